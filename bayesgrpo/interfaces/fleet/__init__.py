"""A fleet of runs at once: read, live-update, decide, forecast and diagnose each, serially or on Ray.

:func:`assess` answers for many runs in one call and returns one tidy table, a row per run. Its
unit of work is a *source* (a log file, a TensorBoard run folder, a trainer state, an ``mlflow:``
URI), as ``load_runs`` finds them under the paths given; every run of a source gets a row. A source
that cannot be read gets a row with the error and what the reader reported; the other sources go
on.

Without ``workers`` or ``address`` the sources are assessed in this process, one after the other.
With them, on Ray (``pip install 'bayesgrpo[ray]'``; ``ray.init()`` on a laptop, ``address=`` for a
cluster): the population is shared once (a file on a local Ray, ``ray.put`` on a cluster), the
sources are cut into batches so that a task's overhead stays a small share of its work, and each
worker process builds
its :class:`~bayesgrpo.questions.live.LiveForecaster` (and the compiled draws of the prior) once,
for every batch it runs. A batch whose worker process dies is sent again (``max_retries`` times at
most) and counted in ``attrs["retried_tasks"]``: no run is lost or assessed twice. Every run's
answer depends on its own data and the seed only, never on the order or the worker, so the Ray
table equals the serial one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from bayesgrpo.errors import EngineLostError
from bayesgrpo.interfaces.fleet.engine import Engine, SerialEngine, open_engine
from bayesgrpo.interfaces.fleet.work import (
    FLEET_COLUMNS,
    FleetSettings,
    Population,
    WorkFunction,
    assess_source,
    assess_source_work,
    batches,
    error_row,
    fleet_sources,
    source_label,
)
from bayesgrpo.model.draws import check_band
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.questions.live import resolve_population

logger = logging.getLogger(__name__)

__all__ = [
    "FLEET_COLUMNS",
    "Engine",
    "EngineLostError",
    "FleetSettings",
    "Population",
    "SerialEngine",
    "WorkFunction",
    "assess",
    "assess_source",
    "batches",
    "fleet_sources",
    "open_engine",
]


def assess(
    paths: str | Path | Sequence[str | Path],
    population: RewardModel | str | Path | None = None,
    *,
    settings: FleetSettings | None = None,
    workers: int | None = None,
    address: str | None = None,
    batch_size: int | None = None,
    max_retries: int = 3,
    progress: bool = False,
    engine: Engine | None = None,
) -> pd.DataFrame:
    """Assess every run under ``paths``: one row per run, columns :data:`FLEET_COLUMNS`.

    Parameters
    ----------
    paths : path, URI or a sequence of them
        Log files, folders (read recursively) and ``mlflow:`` sources.
    population : RewardModel, path or None
        The population every run is conditioned on (default: the one shipped with bayesgrpo).
    settings : FleetSettings, optional
        The rule, horizon, band, reward metric, metadata, seed, diagnostics; default a plateau
        rule (eps 1% of the range, p 0.9) at each run's stated horizon.
    workers : int, optional
        Ray worker processes to use (a local Ray is started with this many CPUs when none runs).
        None and no ``address``: serial, in this process.
    address : str, optional
        A Ray cluster's address (``"ray://host:10001"`` or ``"auto"``).
    batch_size : int, optional
        Sources per Ray task (default: about four tasks a worker).
    max_retries : int
        Times a batch whose worker process died is sent again.
    progress : bool
        A progress bar (rich) counting sources done.
    engine : Engine, optional
        An engine already open on ``[Population(model, settings.n_draws, settings.random_seed)]``
        (``watch`` keeps one across polls); ``population``, ``workers``, ``address``,
        ``batch_size`` and ``max_retries`` are then not used.

    Returns
    -------
    pandas.DataFrame
        One row per run, and one per log that could not be read (``status`` ``"error"``, with
        its ``error``); ``attrs["retried_tasks"]`` counts the Ray tasks that ran more than once,
        ``attrs["engine"]`` says ``"serial"`` or ``"ray"``. ``findings`` holds each run's
        diagnostic findings (records of :func:`bayesgrpo.questions.diagnostics.diagnose` on the
        run alone), highest severity first. When the engine is lost on the way (a Ray node, its
        raylet or agent: :class:`EngineLostError`), the sources answered before keep their rows,
        each other source is an error row saying so, and ``attrs["incomplete"]`` says what was
        lost (absent otherwise).
    """
    settings = settings or FleetSettings()
    check_band(settings.band)
    given = [paths] if isinstance(paths, (str, Path)) else list(paths)
    sources = fleet_sources(given)
    title = "assessing sources" if progress else None
    lost: EngineLostError | None = None
    if engine is not None:
        before = engine.retried_tasks
        rows, lost = _map_sources(engine, sources, settings, title)
        retried, name = engine.retried_tasks - before, engine.name
    else:
        model = resolve_population(population)
        spec = Population(model, settings.n_draws, settings.random_seed)
        with open_engine(
            [spec], workers=workers, address=address, batch_size=batch_size, max_retries=max_retries
        ) as opened:
            rows, lost = _map_sources(opened, sources, settings, title)
            retried, name = opened.retried_tasks, opened.name
    frame = pd.DataFrame([row for found in rows for row in found], columns=list(FLEET_COLUMNS))
    frame.attrs.update(retried_tasks=retried, engine=name)
    if lost is not None:
        frame.attrs["incomplete"] = str(lost)
    return frame


def _map_sources(
    engine: Engine, sources: list[Any], settings: FleetSettings, title: str | None
) -> tuple[list[list[dict[str, Any]]], EngineLostError | None]:
    """Each source's rows; when the engine is lost, the rows finished and an error row for
    each source not answered, with the loss.
    """
    try:
        return engine.map(assess_source_work, sources, settings, progress=title), None
    except EngineLostError as lost:
        logger.warning("%s", lost)
        rows = [
            lost.done[i]
            if i in lost.done
            else [error_row(source_label(source), f"not assessed: the engine was lost ({lost})")]
            for i, source in enumerate(sources)
        ]
        return rows, lost
