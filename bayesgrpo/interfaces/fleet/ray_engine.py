"""The Ray engine of :func:`bayesgrpo.interfaces.fleet.assess` (imported only when Ray is asked for).

The population goes into the object store once (``ray.put``); each task gets a batch of sources
and a reference to it. A worker process keeps one :class:`~bayesgrpo.questions.live.LiveForecaster`
per population it has seen (:data:`_FORECASTERS`), so the population is deserialised and the
prior's draws made once per worker, not per run or per task. A small actor counts the times each
batch started, which is how a task Ray retried after its worker died is counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    import ray
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "assess(..., workers=N) or address=... needs Ray: install the extra with "
        "`pip install 'bayesgrpo[ray]'`"
    ) from exc

from bayesgrpo.interfaces.fleet.work import FleetSettings, assess_source, batches, progress_bar
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.questions.live import LiveForecaster

#: Per worker process: the live forecaster of each population (by object reference), built once.
_FORECASTERS: dict[str, LiveForecaster] = {}


@ray.remote(num_cpus=0)
class BatchAttempts:
    """How many times each batch started: more than once is a retry (its worker died)."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}

    def start(self, batch: int) -> int:
        """Count one more start of ``batch``; how many so far."""
        self.counts[batch] = self.counts.get(batch, 0) + 1
        return self.counts[batch]

    def retried(self) -> int:
        """How many batches started more than once."""
        return sum(count > 1 for count in self.counts.values())


@ray.remote
def assess_batch(
    batch: int, sources: Sequence[Any], population: list[Any], settings: FleetSettings, attempts: Any
) -> list[dict[str, Any]]:
    """Assess one batch of sources in a worker (``population`` is ``[ObjectRef]``: not resolved
    by Ray before the call, so the worker can keep its forecaster by the reference).
    """
    ray.get(attempts.start.remote(batch))
    key = population[0].hex()
    if key not in _FORECASTERS:
        model = ray.get(population[0])
        _FORECASTERS[key] = LiveForecaster(model, n_draws=settings.n_draws, random_seed=settings.random_seed)
    forecaster = _FORECASTERS[key]
    return [row for source in sources for row in assess_source(source, forecaster, settings)]


def run(
    sources: Sequence[Any],
    model: RewardModel,
    settings: FleetSettings,
    workers: int | None,
    address: str | None,
    batch_size: int | None,
    max_retries: int,
    progress: bool,
) -> tuple[list[dict[str, Any]], int]:
    """Assess ``sources`` on Ray; the rows in source order and the number of retried tasks."""
    started = not ray.is_initialized()
    if started:
        ray.init(
            address=address,
            num_cpus=workers if address is None else None,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    pending: list[Any] = []
    try:
        capacity = workers or max(1, int(ray.available_resources().get("CPU", 1)))
        chunks = batches(len(sources), capacity, batch_size)
        reference = ray.put(model)
        attempts = BatchAttempts.remote()  # type: ignore[attr-defined]
        task = assess_batch.options(max_retries=max_retries)
        futures = {
            task.remote(i, [sources[j] for j in chunk], [reference], settings, attempts): i
            for i, chunk in enumerate(chunks)
        }
        results: dict[int, list[dict[str, Any]]] = {}
        bar = progress_bar(len(sources), progress)
        pending = list(futures)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for future in done:
                index = futures[future]
                results[index] = ray.get(future)
                bar.update(len(chunks[index]))
        bar.close()
        retried = int(ray.get(attempts.retried.remote()))
    except KeyboardInterrupt:
        for future in pending:
            ray.cancel(future, force=True)
        raise
    finally:
        if started:
            ray.shutdown()
    return [row for i in range(len(chunks)) for row in results[i]], retried
