"""The engines that run a fleet's work: in this process, or on Ray.

Every fleet verb (``assess``, ``bayesgrpo forecast/stop/diagnose --workers``, ``watch
--workers``, the backtest harness) is a map of one *work function* over *items* (a log source, a
run to update, a run to backtest), each answered with a run's live forecaster. An engine is given
the populations once, when it opens, and maps work over items as often as it is asked (``watch``
asks at every poll):

* :class:`SerialEngine` maps in this process, one item after the other;
* :class:`~bayesgrpo.interfaces.fleet.ray_engine.RayEngine` shares each population once (a file on
  a local Ray it starts, else Ray's object store), sends items in batches (about four a worker, so
  a slow or retried batch leaves no worker idle), builds each population's :class:`LiveForecaster`
  once per worker process, retries a batch whose worker died and counts it.

A work function is ``work(item, forecaster_of, settings) -> result``: ``forecaster_of(i)`` is the
live forecaster of population ``i``, ``settings`` a picklable object every item shares. It must be
a module-level function (Ray sends it by reference) whose answer depends on the item, the settings
and the population only, so that every engine gives the same results in the same order.

Examples
--------
>>> with open_engine([Population(model)], workers=2) as engine:  # doctest: +SKIP
...     results = engine.map(assess_source_work, sources, settings)
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any, Protocol

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.interfaces.fleet.work import Population, WorkFunction, progress_bar
from bayesgrpo.questions.live import LiveForecaster


class Engine(Protocol):
    """What the fleet's verbs need of an engine."""

    #: ``"serial"`` or ``"ray"``.
    name: str
    #: Batches sent more than once because their worker process died, over every map so far.
    retried_tasks: int

    def map(
        self, work: WorkFunction, items: Sequence[Any], settings: Any, *, progress: str | None = None
    ) -> list[Any]:
        """``work`` over ``items``: their results, in the items' order (:class:`EngineLostError`,
        with the results finished, when the engine is lost on the way).
        """
        ...

    def close(self) -> None:
        """Free what the engine holds (a Ray it started)."""
        ...

    def __enter__(self) -> Engine: ...

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None: ...


class SerialEngine:
    """Maps work in this process, one item after the other (forecasters built on first use; a
    ready :class:`LiveForecaster` given in place of a :class:`Population` is used as it is).
    """

    name = "serial"

    def __init__(self, populations: Sequence[Population | LiveForecaster]) -> None:
        self.populations = list(populations)
        self.retried_tasks = 0
        self._forecasters: dict[int, LiveForecaster] = {}

    def forecaster_of(self, index: int) -> LiveForecaster:
        """The live forecaster of population ``index``, built once."""
        if index not in self._forecasters:
            population = self.populations[index]
            if isinstance(population, Population):
                self._forecasters[index] = population.forecaster()
            else:
                self._forecasters[index] = population
        return self._forecasters[index]

    def map(
        self, work: WorkFunction, items: Sequence[Any], settings: Any, *, progress: str | None = None
    ) -> list[Any]:
        """``work`` over ``items`` in this process; a progress bar titled ``progress`` if given."""
        bar = progress_bar(len(items), progress is not None, progress or "")
        results = []
        try:
            for item in items:
                results.append(work(item, self.forecaster_of, settings))
                bar.update(1)
        finally:
            bar.close()
        return results

    def close(self) -> None:
        """Nothing to free."""

    def __enter__(self) -> SerialEngine:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def open_engine(
    populations: Sequence[Population | LiveForecaster],
    *,
    workers: int | None = None,
    address: str | None = None,
    batch_size: int | None = None,
    max_retries: int = 3,
) -> Engine:
    """The serial engine, or with ``workers`` or ``address`` a Ray engine (``bayesgrpo[ray]``).

    Parameters
    ----------
    populations : sequence of Population (or LiveForecaster, serial only)
        What the work's ``forecaster_of(i)`` conditions on.
    workers : int, optional
        Ray worker processes (a local Ray with this many CPUs is started when none runs).
    address : str, optional
        A Ray cluster's address (``"ray://host:10001"``, ``"auto"``).
    batch_size : int, optional
        Items per Ray task (default: about four tasks a worker).
    max_retries : int
        Times a batch whose worker process died is sent again.
    """
    if workers is None and address is None:
        return SerialEngine(populations)
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1; got {workers}")
    specs = [p for p in populations if isinstance(p, Population)]
    if len(specs) < len(populations):
        raise BayesGRPOError(
            "Ray workers build their own forecasters from fitted populations; got a ready forecaster: "
            "give fitted RewardModels (Population(model, n_draws, random_seed))"
        )
    from bayesgrpo.interfaces.fleet.ray_engine import RayEngine  # Ray is imported only when asked for

    return RayEngine(specs, workers=workers, address=address, batch_size=batch_size, max_retries=max_retries)
