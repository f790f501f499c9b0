"""The fleet's work: what one source and one run are asked, shared by the serial and Ray engines."""

from __future__ import annotations

import logging
import re
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.progress import Progress

from bayesgrpo._text import printable
from bayesgrpo.errors import BayesGRPOError, LiveUpdateWarning, LogReadError
from bayesgrpo.interfaces.text import NO_HORIZON
from bayesgrpo.logs.readers import Source, discover, load_runs
from bayesgrpo.logs.readers.load import MLFLOW_SCHEME, default_run_id
from bayesgrpo.logs.report import ReadIssue
from bayesgrpo.logs.table import RunsTable
from bayesgrpo.model.draws import DEFAULT_BAND
from bayesgrpo.model.reward_model import RewardModel
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
    "method",
    "departed",
    "worst_finding",
    "worst_severity",
    "findings",
    "repairs",
    "seconds",
)
#: What reading a log or assessing a run may raise for want of a good log or run (anything else
#: raised there is a bug: it too is that source's or run's error row, said to be unexpected).
RUN_ERRORS = (BayesGRPOError, ValueError, ArithmeticError, OSError)
#: The end of a file's name that says it is a training log (console output, a W&B run file). Such
#: a file under a folder that no reader recognises (empty, random bytes, no log line at its start)
#: gets a row with its error; the other unrecognised files of a folder (a checkpoint's
#: ``config.json``, a tokenizer's ``vocab.txt``, weights) are not logs and stay notes of the read.
_LOG_NAME = re.compile(r"\.(log|out|err|stdout|stderr|wandb)$|\.log\.", re.IGNORECASE)


#: ``work(item, forecaster_of, settings) -> result``.
WorkFunction = Callable[[Any, Callable[[int], LiveForecaster], Any], Any]


@dataclass(frozen=True)
class Population:
    """A population the work conditions runs on, and how its live forecaster is built."""

    model: RewardModel
    n_draws: int = 2000
    random_seed: int | None = 1

    def forecaster(self) -> LiveForecaster:
        """The live forecaster of this population."""
        return LiveForecaster(self.model, n_draws=self.n_draws, random_seed=self.random_seed)


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
    for a path that cannot even be listed and for a log no reader recognises
    (:func:`unread_logs`): each of those gets an error row.
    """
    out: list[Source | tuple[str, str]] = []
    for path in paths:
        if isinstance(path, str) and path.startswith(MLFLOW_SCHEME):
            out.append(Source("mlflow", (), "", uri=path))
            continue
        try:
            sources, notes, _ = discover(path)
        except (LogReadError, BayesGRPOError, OSError) as exc:
            out.append((str(path), f"{type(exc).__name__}: {exc}"))
            continue
        out.extend(sources)
        out.extend(unread_logs(notes))
    return out


def looks_like_a_log(path: str | Path) -> bool:
    """Whether a file's name says it is a training log (``train.log``, ``job.out``, ``run.wandb``)."""
    return _LOG_NAME.search(Path(path).name) is not None


def unread_logs(issues: Iterable[ReadIssue]) -> list[tuple[str, str]]:
    """The logs a read's issues say were not read, as ``(path, error)``: a file skipped as
    unreadable (``load_runs(skip_unreadable=True)``), and a file under a folder that no reader
    recognises though its name says it is a log (:func:`looks_like_a_log`: an empty log, random
    bytes). The fleet and ``bayesgrpo stop`` give each a row with its error, so that every log
    given is answered for.

    Parameters
    ----------
    issues : iterable of ReadIssue
        A read's notes and issues (``discover``'s notes, ``table.report.issues``).

    Returns
    -------
    list of (str, str)
        Each log's path and its error, in the issues' order.
    """
    out: list[tuple[str, str]] = []
    for issue in issues:
        if issue.kind == "unreadable":
            out.append((issue.source, issue.detail.removeprefix("file skipped: ")))
        elif issue.kind == "unknown_format" and looks_like_a_log(issue.source):
            try:
                empty = Path(issue.source).stat().st_size == 0
            except OSError:
                empty = False
            what = "an empty file" if empty else "no log line of a known format at its start"
            out.append((issue.source, f"UnknownFormatError: no reader recognises this log ({what})"))
    return out


def no_advice(horizon: float | None, step: float) -> str | None:
    """Why a run gets no stop advice at ``step``, or None when it gets some.

    A stop rule weighs the gain left up to the step the run is planned to end at: without that
    horizon (none given, none stated by the logs) or past it, any advice would be made up.
    ``bayesgrpo stop`` and the fleet say this for such a run instead of a decision.

    Parameters
    ----------
    horizon : float or None
        The step the run is planned to end at: given (``--horizon``), else its stated total steps.
    step : float
        The run's last logged step.

    Returns
    -------
    str or None
    """
    if horizon is None:
        return NO_HORIZON
    if horizon < step:
        return f"already at step {step:.0f}, past the horizon {horizon:g}"
    return None


def source_label(source: Source | tuple[str, str]) -> str:
    """A source's path (or URI) as its rows name it."""
    return source[0] if isinstance(source, tuple) else source.label


def error_row(source: str, error: str, run_id: str = "", repairs: str = "") -> dict[str, Any]:
    """The row of a source (or one of its runs) that could not be assessed, and why."""
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
        return [error_row(*source)]
    label = source.label
    try:
        table = read_source(source, settings)
    except Exception as exc:  # noqa: BLE001 - a log that breaks a reader must not end the other runs
        return [error_row(label, _error_text(exc, label))]
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
        except Exception as exc:  # noqa: BLE001 - one run's failure must not end the other runs
            rows.append(error_row(label, _error_text(exc, label, run_id), run_id, repairs))
    return rows


def _error_text(exc: Exception, label: str, run_id: str = "") -> str:
    """An error row's text: the error, and for an error no bad log explains, a plea to report it."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, RUN_ERRORS):
        return text
    logger.debug("unexpected error assessing %s %s", label, run_id, exc_info=exc)
    return f"{text} (unexpected: please report it, with the log if you can)"


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
        # a lone file read again is named by its path: it takes the name found for it (a trainer
        # state's training folder, a manifest's run_id); a name the log states itself stays
        if table.run_ids[0] == printable(default_run_id(source.paths[0])):
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
    """The live update's answers: stop decision (none without a horizon or past it, :func:`no_advice`:
    ``decision`` None and ``reason`` says why), phase, final reward.
    """
    with warnings.catch_warnings():
        # the row names the method that answered and whether the run has left its forecast
        warnings.simplefilter("ignore", LiveUpdateWarning)
        update = forecaster.update(run, horizon=settings.horizon)
    stated = run.runs["total_steps"].iloc[0] if "total_steps" in run.runs.columns else None
    # the update forecasts up to the run's last step when no horizon is known: no advice then
    known = settings.horizon is not None or (stated is not None and bool(pd.notna(stated)))
    refused = no_advice(float(update.horizon_step) if known else None, float(update.step))
    advice: dict[str, Any] = dict.fromkeys(
        ("probability", "expected_gain", "gain_lower", "gain_upper"), float("nan")
    )
    advice.update(decision=None, reason=refused)
    if refused is None:
        decision = settings.rule.decide(update.curve_draws, update.step, update.horizon_step)[0]
        advice.update(
            decision=decision.decision,
            probability=float(decision.probability),
            expected_gain=float(decision.expected_gain),
            gain_lower=float(decision.gain_lower),
            gain_upper=float(decision.gain_upper),
            reason=decision.reason,
        )
    lower, median, upper = update.final_interval(0.9, band=settings.band)
    range_lower, range_upper, range_source = update.reward_range
    phases = phase(update.curve_draws, update.step).iloc[0]
    return {
        "step": float(update.step),
        "horizon_step": float(update.horizon_step),
        **advice,
        # the reward range a relative eps is a share of: stated for the run, or estimated
        "eps_range_lower": range_lower,
        "eps_range_upper": range_upper,
        "eps_range_source": range_source,
        "phase": str(phases["phase"]),
        "phase_probability": float(phases["probability"]),
        "final_median": median,
        "final_lower": lower,
        "final_upper": upper,
        "method": update.method,
        "departed": update.departed,
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
        # on stderr: what a verb writes to stdout (a table, JSON) stays whole
        self._progress = Progress(console=Console(stderr=True), disable=not shown, transient=False)
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
