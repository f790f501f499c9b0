"""The fleet's work: what one source and one run are asked, shared by the serial and Ray engines."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rich.progress import Progress

from bayesgrpo.errors import BayesGRPOError, LiveUpdateWarning, LogReadError
from bayesgrpo.logs.readers import Source, discover, load_runs
from bayesgrpo.logs.readers.load import MLFLOW_SCHEME
from bayesgrpo.logs.table import RunsTable
from bayesgrpo.model.draws import DEFAULT_BAND
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.questions.band_stretch import BandStretch, shipped_band_stretch
from bayesgrpo.questions.diagnostics import diagnose
from bayesgrpo.questions.diagnostics.by_run import peer_summaries
from bayesgrpo.questions.live import LiveForecaster
from bayesgrpo.questions.stopping import default_rule, phase

logger = logging.getLogger(__name__)

#: The columns of :func:`assess`'s table, in order.
FLEET_COLUMNS: tuple[str, ...] = (
    "run_id",
    "source",
    "status",
    "error",
    "n_points",
    "step",
    "horizon_step",
    "decision",
    "probability",
    "expected_gain",
    "gain_lower",
    "gain_upper",
    "reason",
    "eps_range_lower",
    "eps_range_upper",
    "eps_range_source",
    "phase",
    "phase_probability",
    "final_median",
    "final_lower",
    "final_upper",
    "band",
    "band_stretch_below",
    "band_stretch_above",
    "band_noise",
    "method",
    "departed",
    "departure_level",
    "departure_noise_factor",
    "worst_finding",
    "worst_severity",
    "findings",
    "repairs",
    "seconds",
)
#: What one run's assessment may raise and still leave the others alone.
RUN_ERRORS = (BayesGRPOError, ValueError, ArithmeticError, OSError)


#: ``work(item, forecaster_of, settings) -> result``.
WorkFunction = Callable[[Any, Callable[[int], LiveForecaster], Any], Any]


@dataclass(frozen=True)
class Population:
    """A population the work conditions runs on, and how its live forecaster is built."""

    model: RewardModel
    n_draws: int = 2000
    random_seed: int | None = 1
    band_stretch: BandStretch | None = field(default_factory=shipped_band_stretch)

    def forecaster(self) -> LiveForecaster:
        """The live forecaster of this population (its predictive band stretched by ``band_stretch``)."""
        return LiveForecaster(
            self.model, n_draws=self.n_draws, random_seed=self.random_seed, band_stretch=self.band_stretch
        )


@dataclass(frozen=True)
class FleetSettings:
    """What every run is asked: picklable, sent with each Ray task.

    ``forecast``: the live update and what it answers (stop decision, phase, final reward);
    ``diagnose``: the run's findings (``oscillation``: with the ringing test, seconds a run;
    ``references``: the stall test's peer references of every run, from
    :func:`peer_summaries_work` over the fleet, else each run is judged without peers).
    """

    rule: Any = field(default_factory=default_rule)
    horizon: float | None = None
    band: str = DEFAULT_BAND
    reward: str | None = None
    metadata: Any = None
    random_seed: int = 1
    n_draws: int = 2000
    diagnose: bool = True
    oscillation: bool = False
    forecast: bool = True
    references: Mapping[str, tuple[float, float, float]] | None = None


def fleet_sources(paths: Iterable[str | Path]) -> list[Source | tuple[str, str]]:
    """The units of work under ``paths``: sources ``load_runs`` would read, or ``(path, error)``
    for a path that cannot even be listed (it gets an error row).
    """
    out: list[Source | tuple[str, str]] = []
    for path in paths:
        if isinstance(path, str) and path.startswith(MLFLOW_SCHEME):
            out.append(Source("mlflow", (), "", uri=path))
            continue
        try:
            sources, _, _ = discover(path)
        except (LogReadError, BayesGRPOError, OSError) as exc:
            out.append((str(path), f"{type(exc).__name__}: {exc}"))
            continue
        out.extend(sources)
    return out


def _error_row(source: str, error: str, run_id: str = "", repairs: str = "") -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(FLEET_COLUMNS)
    row.update(
        run_id=run_id or Path(source).name,
        source=source,
        status="error",
        error=error,
        findings=[],
        repairs=repairs,
    )
    return row


def assess_source(
    source: Source | tuple[str, str], forecaster: LiveForecaster | None, settings: FleetSettings
) -> list[dict[str, Any]]:
    """Every run of one source, assessed: a row each (an error row when it cannot be read)."""
    if isinstance(source, tuple):
        return [_error_row(*source)]
    label = source.label
    try:
        table = read_source(source, settings)
    except RUN_ERRORS as exc:
        return [_error_row(label, f"{type(exc).__name__}: {exc}")]
    repairs = (table.report.repair_line() or "") if table.report.has_changes else ""
    rows = []
    for run_id in table.run_ids:
        start = time.perf_counter()
        run = table.select([run_id])
        try:
            rows.append(
                {
                    **_assess_run(run, forecaster, settings),
                    "source": label,
                    "repairs": repairs,
                    "seconds": time.perf_counter() - start,
                }
            )
        except RUN_ERRORS as exc:
            rows.append(_error_row(label, f"{type(exc).__name__}: {exc}", run_id, repairs))
    return rows


def read_source(source: Source, settings: FleetSettings) -> RunsTable:
    """The runs of one source, read as ``load_runs`` reads them (a single run named as the
    source names it).
    """
    paths: list[Any] = [source.uri] if source.uri is not None else list(source.paths)
    table = load_runs(
        paths,
        format=None if source.uri is not None else source.format,
        reward=settings.reward or source.reward,
        metadata=settings.metadata,
        warn=False,
    )
    if source.uri is None and len(table.run_ids) == 1 and source.run_id:
        table = _named(table, source.run_id)
    return table


def assess_source_work(
    source: Source | tuple[str, str], forecaster_of: Callable[[int], LiveForecaster], settings: FleetSettings
) -> list[dict[str, Any]]:
    """:func:`assess_source` as an engine's work function (population 0, built only when the
    settings ask for a forecast).
    """
    return assess_source(source, forecaster_of(0) if settings.forecast else None, settings)


def peer_summaries_work(
    source: Source | tuple[str, str], forecaster_of: Callable[[int], LiveForecaster], settings: FleetSettings
) -> list[dict[str, Any]]:
    """What the stall test's peer reference needs of each run of a source
    (:func:`bayesgrpo.questions.diagnostics.by_run.peer_summaries`; none for an unreadable one).
    """
    if isinstance(source, tuple):
        return []
    try:
        return peer_summaries(read_source(source, settings))
    except RUN_ERRORS:
        return []  # its error row comes from the assessment


def _named(table: RunsTable, run_id: str) -> RunsTable:
    points = table.points.assign(run_id=pd.Series([run_id] * len(table.points), dtype="string"))
    return RunsTable(points=points, runs=table.runs.assign(run_id=run_id), report=table.report)


def _assess_run(run: Any, forecaster: LiveForecaster | None, settings: FleetSettings) -> dict[str, Any]:
    row: dict[str, Any] = {
        "run_id": run.run_ids[0],
        "status": "ok",
        "error": "",
        "n_points": int(np.isfinite(run.points["reward"].to_numpy(dtype=float)).sum()),
        "band": settings.band,
        **(_forecast(run, forecaster, settings) if forecaster is not None and settings.forecast else {}),
        "worst_finding": "",
        "worst_severity": "",
        "findings": [],
    }
    if settings.diagnose:
        # the run alone, with its peers' references when the settings carry them: the same
        # whichever batch it is in
        findings = diagnose(run, oscillation=settings.oscillation, references=settings.references)
        row["findings"] = findings.to_dict("records")  # highest severity first
        if len(findings):
            row["worst_finding"] = str(findings["name"].iloc[0])
            row["worst_severity"] = str(findings["severity"].iloc[0])
    return row


def _forecast(run: Any, forecaster: LiveForecaster, settings: FleetSettings) -> dict[str, Any]:
    """The live update's answers: stop decision, phase, final reward."""
    with warnings.catch_warnings():
        # the row names the method that answered and whether the run has left its forecast
        warnings.simplefilter("ignore", LiveUpdateWarning)
        update = forecaster.update(run, horizon=settings.horizon)
    decision = settings.rule.decide(update.curve_draws, update.step, update.horizon_step)[0]
    lower, median, upper = update.final_interval(0.9, band=settings.band)
    range_lower, range_upper, range_source = update.reward_range
    phases = phase(update.curve_draws, update.step).iloc[0]
    return {
        "step": float(update.step),
        "horizon_step": float(update.horizon_step),
        "decision": decision.decision,
        "probability": float(decision.probability),
        "expected_gain": float(decision.expected_gain),
        "gain_lower": float(decision.gain_lower),
        "gain_upper": float(decision.gain_upper),
        "reason": decision.reason,
        # the reward range a relative eps is a share of: stated for the run, or estimated
        "eps_range_lower": range_lower,
        "eps_range_upper": range_upper,
        "eps_range_source": range_source,
        "phase": str(phases["phase"]),
        "phase_probability": float(phases["probability"]),
        "final_median": median,
        "final_lower": lower,
        "final_upper": upper,
        # the predictive band's 90% edges stretched about its median (mid-run; apart with a stated range)
        "band_stretch_below": update.predictive_stretch[0] if settings.band == "predictive" else 1.0,
        "band_stretch_above": update.predictive_stretch[1] if settings.band == "predictive" else 1.0,
        # where a logged point's noise comes from: the Student-t, or the run's recent residuals
        "band_noise": update.noise_source if settings.band == "predictive" else "none",
        "method": update.method,
        "departed": update.departed,
        # where the run left its curve on one side: the level the forecast follows, off the curve
        "departure_level": update.departure.level if update.departure is not None else float("nan"),
        # where its latest points scatter more than the band allows: the factor its noise was widened by
        "departure_noise_factor": update.departure.noise_factor if update.departure is not None else 1.0,
    }


def batches(n_items: int, workers: int, batch_size: int | None = None) -> list[range]:
    """Consecutive index ranges covering ``n_items``: about four batches a worker (so a slow
    batch or a retried one does not leave the others idle), or ``batch_size`` items each.
    """
    if n_items <= 0:
        return []
    size = batch_size or max(1, int(np.ceil(n_items / max(1, 4 * workers))))
    return [range(start, min(start + size, n_items)) for start in range(0, n_items, size)]


class ProgressBar:
    """Items done out of all (rich), or nothing when not shown."""

    def __init__(self, total: int, shown: bool, title: str = "assessing sources") -> None:
        self._progress = Progress(disable=not shown, transient=False)
        self._task = self._progress.add_task(title or "working", total=total)
        self._progress.start()

    def update(self, done: int) -> None:
        """Count ``done`` more items."""
        self._progress.update(self._task, advance=done)

    def close(self) -> None:
        """Stop drawing."""
        self._progress.stop()


def progress_bar(total: int, shown: bool, title: str = "assessing sources") -> ProgressBar:
    """A progress bar of ``total`` items titled ``title`` (drawn when ``shown``)."""
    return ProgressBar(total, shown, title)
