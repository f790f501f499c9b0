"""The page put together (:func:`write_report`) and ``bayesgrpo report`` (:func:`run_cli`)."""

from __future__ import annotations

import argparse
import datetime as _dt
import logging
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo._version import __version__
from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.interfaces import plotting
from bayesgrpo.interfaces.fleet import FleetSettings, fleet_sources
from bayesgrpo.interfaces.html_report.fleet import fleet_page
from bayesgrpo.interfaces.html_report.markup import CSS, esc, img_tag
from bayesgrpo.interfaces.html_report.runs import (
    NO_ANSWER,
    ReportRun,
    planned_horizons,
    run_rows,
    split_by_run,
)
from bayesgrpo.interfaces.html_report.sections import (
    T80_FRACTIONS,
    diagnostics_section,
    fit_mode_text,
    header_section,
    live_mode_text,
    run_anchor,
    summary_table,
    transfer_section,
    transfer_specs,
)
from bayesgrpo.interfaces.logs_input import read_logs
from bayesgrpo.model.laplace import LiveUpdateWarning
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.questions.history import stop_history
from bayesgrpo.questions.live import LiveForecaster
from bayesgrpo.questions.shrinkage import laplace_modes, scaling_table
from bayesgrpo.questions.stopping import (
    DEFAULT_PLATEAU_EPS,
    DEFAULT_PLATEAU_PROB,
    PlateauRule,
    default_rule,
    steps_to_fraction,
)
from bayesgrpo.questions.stopping.momentum import with_recent_rise

if TYPE_CHECKING:
    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.draws import CurveDraws
    from bayesgrpo.questions.stopping import StoppingRule

logger = logging.getLogger(__name__)


#: Default fit settings when the report fits the pooled model itself.
#: (1,000 warm-up iterations: numpyro's dense mass matrix, as ``bayesgrpo forecast`` fits.)
DEFAULT_FIT: dict[str, Any] = {
    "draws": 1000,
    "tune": 1000,
    "chains": 2,
    "random_seed": 1,
    "progressbar": False,
}
#: Population parameters of the shrinkage and scaling figures.
SHRINKAGE_PARAMS: tuple[str, ...] = ("asymptote", "tau")
SCALING_PARAMS: tuple[str, ...] = ("r1",)


def write_report(
    table: RunsTable,
    path: str | Path,
    *,
    population: RewardModel | None = None,
    fit_kwargs: Mapping[str, Any] | None = None,
    transfer: Sequence[Mapping[str, Any]] | None = None,
    rule: StoppingRule | None = None,
    diagnose: bool = True,
    horizon: float | Mapping[str, float] | None = None,
    history_points: int = 8,
    title: str = "bayesgrpo report",
    dpi: int = 72,
    random_seed: int | None = 0,
) -> Path:
    """Write a self-contained HTML report of the runs of a table.

    Parameters
    ----------
    table : RunsTable
        The runs (``readers.load_runs``); its read report heads the page.
    path : str or Path
        The HTML file to write.
    population : RewardModel, optional
        A fitted population (``pooling="partial"``): each run is conditioned on it live. Without
        one the pooled model is fitted on ``table``.
    fit_kwargs : mapping, optional
        Passed to ``RewardModel.fit`` when fitting (over :data:`DEFAULT_FIT`).
    transfer : sequence of mapping, optional
        New runs to predict (metadata as :func:`bayesgrpo.questions.transfer.predict_new_run` takes it;
        :func:`transfer_specs` builds them from sizes). A missing reward range is taken from the
        runs (same family first), a missing ``total_steps`` from ``horizon`` or the runs' median.
    rule : StoppingRule, optional
        Default :func:`~bayesgrpo.questions.stopping.default_rule` (``FixedBudgetRule(0.65)``).
    diagnose : bool
        Add the diagnostics section (``bayesgrpo.questions.diagnostics.diagnose``).
    horizon : float or mapping run_id -> step, optional
        The step each run is planned to end at (default: its ``total_steps``; a run with neither
        is forecast to its last logged step and gets no decision: "give --horizon").
    history_points : int
        Cuts of each run's stop-probability history (0: no history figures).
    title : str
    dpi : int
        Resolution of the figures.
    random_seed : int, optional

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    BayesGRPOError
        No runs, or a population that cannot be conditioned on. A run with no horizon (none
        given, no ``total_steps``) or past it gets a row that says why it has no decision.
    """
    if len(table.run_ids) == 0:
        raise BayesGRPOError("the table holds no runs: nothing to report")
    rule = default_rule() if rule is None else rule
    horizons, unanswered = planned_horizons(table, horizon)
    forecasts = _forecasts(table, population, fit_kwargs, horizons, history_points, random_seed)
    rows = run_rows(
        table,
        forecasts.draws,
        forecasts.steps,
        rule,
        forecasts.pareto,
        forecasts.methods,
        forecasts.departures,
        unanswered,
    )
    sections = [
        f"<h2>Runs</h2>{summary_table(rows, rule)}",
        _runs_figure(table, dpi),
        _t80_section(table, forecasts.draws, dpi),
        _per_run_section(table, rows, forecasts, rule, horizons, history_points, dpi),
    ]
    if forecasts.model.pooling == "partial":
        sections.append(_pooling_section(forecasts, dpi))
    if transfer:
        sections.append(
            "<h2>Transfer to new runs</h2>"
            + transfer_section(table, forecasts.model, transfer, horizons, horizon, dpi, random_seed)
        )
    if diagnose:
        sections.append("<h2>Diagnostics</h2>" + diagnostics_section(table, forecasts.fitted_on_table))
    page = _page(title, header_section(table, forecasts.mode), sections)
    path = Path(path)
    path.write_text(page, encoding="utf-8")
    logger.info("wrote %s (%d bytes)", path, len(page))
    return path


@dataclass
class _Forecasts:
    """Every run's curve draws, and how they were made."""

    model: RewardModel
    draws: dict[str, CurveDraws]
    steps: dict[str, float]
    pareto: dict[str, float]
    mode: str
    fitted_on_table: RewardModel | None
    live: LiveForecaster | None
    methods: dict[str, str] = field(default_factory=dict)
    departures: dict[str, str] = field(default_factory=dict)


def _forecasts(
    table: RunsTable,
    population: RewardModel | None,
    fit_kwargs: Mapping[str, Any] | None,
    horizons: Mapping[str, float],
    history_points: int,
    random_seed: int | None,
) -> _Forecasts:
    """Each run conditioned live on ``population``, or the pooled model fitted on the table."""
    if population is not None:
        forecaster = LiveForecaster(population, random_seed=random_seed)
        draws, steps, pareto, methods, departures = {}, {}, {}, {}, {}
        for run_id in table.run_ids:
            with warnings.catch_warnings():
                # shown per run: its Pareto k, and whether it has left its forecast
                warnings.simplefilter("ignore", LiveUpdateWarning)
                update = forecaster.update(table.select([run_id]), horizon=horizons[run_id])
            draws[run_id], steps[run_id], pareto[run_id], methods[run_id] = (
                update.curve_draws,
                update.step,
                update.posterior.pareto_k,
                update.method,
            )
            if update.departed:
                assert update.departure is not None  # departed says so
                departures[run_id] = update.departure.note()
        return _Forecasts(
            population,
            draws,
            steps,
            pareto,
            live_mode_text(population),
            None,
            forecaster,
            methods,
            departures,
        )
    settings = {**DEFAULT_FIT, **dict(fit_kwargs or {})}
    logger.info("fitting the pooled model on %d runs (%s)", len(table.run_ids), settings)
    model = RewardModel().fit(table, horizon=horizons, **settings)
    finite = table.points[np.isfinite(table.points["reward"].to_numpy(dtype=float))]
    last_step = finite.groupby("run_id")["step"].max()
    live = LiveForecaster(model, random_seed=random_seed) if history_points > 0 else None
    return _Forecasts(
        model,
        # the runs' own latest rise rides along, as on the live path (the rule may hold a stop on it)
        split_by_run(with_recent_rise(model.curve_draws(), table.points)),
        {run_id: float(last_step[run_id]) for run_id in table.run_ids},
        {},
        fit_mode_text(model),
        model,
        live,
    )


def _runs_figure(table: RunsTable, dpi: int) -> str:
    """The logged curves of every run, on one figure (each on its own range when ranges differ)."""
    figure, ax = plotting.subplots(figsize=(7.5, 3.6))
    bounds = table.runs[["reward_min", "reward_max"]].astype(float)
    normalise = bool(bounds.isna().any().any() or bounds.nunique().max() > 1)
    plotting.plot_runs(table, color_by="family", normalise=normalise, smooth=0.05, ax=ax)
    return img_tag(plotting.figure_png(figure, dpi=dpi), "logged curves of every run") + (
        '<p class="note">Each run on its own reward range (0 = its lower bound, 1 = its upper one), '
        "smoothed over 5% of its points.</p>"
        if normalise
        else ""
    )


def _t80_section(table: RunsTable, draws: Mapping[str, CurveDraws], dpi: int) -> str:
    """The steps to 80% of each run's total gain, every run on one figure."""
    fractions = pd.concat(
        [steps_to_fraction(draws[r], T80_FRACTIONS) for r in table.run_ids], ignore_index=True
    )
    figure, ax = plotting.subplots(figsize=(7.5, 1.2 + 0.2 * len(table.run_ids)))
    plotting.plot_t80(fractions, fractions=T80_FRACTIONS, ax=ax)
    return f"<h2>Steps to {T80_FRACTIONS[0]:.0%} of the gain</h2>" + img_tag(
        plotting.figure_png(figure, dpi=dpi), "steps to 80% of the gain"
    )


def _per_run_section(
    table: RunsTable,
    rows: Sequence[ReportRun],
    forecasts: _Forecasts,
    rule: StoppingRule,
    horizons: Mapping[str, float],
    history_points: int,
    dpi: int,
) -> str:
    """Each run: its fan chart and, with ``history_points``, what the rule would have said."""
    per_run = ["<h2>Each run</h2>"]
    if history_points > 0:
        per_run.append(
            '<p class="note">Right: what the rule would have said had it run during training. Each cut '
            "of the run is conditioned on the population live; the band beneath is the most probable phase, "
            "its opacity that phase's probability."
            + (
                " The population was fitted on these runs, so early cuts borrow from each run's own later "
                "points."
                if forecasts.fitted_on_table is not None
                else ""
            )
            + "</p>"
        )
    for r in rows:
        ncols = 2 if history_points > 0 else 1
        figure, axes = plotting.subplots(
            1, ncols, figsize=(5.0 * ncols + (1.6 if ncols == 2 else 0), 3.0), squeeze=False
        )
        plotting.plot_fan(forecasts.draws[r.run_id], r.run_id, observed=table, step_now=r.step, ax=axes[0, 0])
        axes[0, 0].legend(fontsize=6, frameon=False)
        # live is None only without history; a run with no horizon has no rule's history to show
        if history_points > 0 and forecasts.live is not None and r.decision != NO_ANSWER:
            history = stop_history(
                forecasts.live, table.select([r.run_id]), history_points, rule, horizon=horizons[r.run_id]
            )
            plotting.plot_stop_probability(history, threshold=_single_threshold(rule), ax=axes[0, 1])
            axes[0, 1].set_title("stop probability and phase", fontsize=8)
        per_run.append(
            f'<h3 id="run-{run_anchor(r.run_id)}">{esc(r.run_id)}</h3>'
            f'<p class="note">{esc(r.decision)}: {esc(r.reason)}</p>'
            + img_tag(plotting.figure_png(figure, dpi=dpi), f"forecast of {r.run_id}")
        )
    return "\n".join(per_run)


def _single_threshold(rule: StoppingRule) -> float | None:
    """The one probability a rule stops at (its ``stop_probability``), or None where it has two
    (:class:`GuardedBudgetRule`) or none; a ``Confirmed`` rule answers for the rule it wraps.
    """
    return getattr(rule, "stop_probability", None)


def _pooling_section(forecasts: _Forecasts, dpi: int) -> str:
    """The partially pooled population: shrinkage of each run and scaling with model size."""
    model = forecasts.model
    assert model.data is not None  # a fitted model
    which = (
        "these runs"
        if forecasts.fitted_on_table is not None
        else f"the population's own {model.data.n_runs} runs"
    )
    parts = [
        (
            f'<h2>Pooling</h2><p class="note">Shrinkage and size scaling of the partially pooled model, '
            f"over {which}. Levels in normalised reward (0 = a run's lower reward bound, 1 = its upper "
            "one), rates in normalised progress (1 = a run's horizon).</p>"
        )
    ]
    n_pop = model.data.n_runs
    modes = laplace_modes(model)  # once for every parameter
    for param in SHRINKAGE_PARAMS:
        figure, ax = plotting.subplots(figsize=(7.5, 1.2 + 0.17 * n_pop))
        plotting.plot_shrinkage(model, param=param, unpooled=modes, ax=ax)
        parts.append(img_tag(plotting.figure_png(figure, dpi=dpi), f"shrinkage of {param}"))
    for param in SCALING_PARAMS:
        if scaling_table(model, param).runs.empty:  # an empty panel says nothing: say why instead
            parts.append(
                f'<p class="note">{esc(param)} by model size: no run here states its model size on a '
                "stated reward range, so there is nothing to draw (give size_b, reward_min and "
                "reward_max in the runs' metadata).</p>"
            )
            continue
        figure, ax = plotting.subplots(figsize=(6.5, 3.6))
        plotting.plot_scaling(model, param=param, ax=ax)
        parts.append(img_tag(plotting.figure_png(figure, dpi=dpi), f"{param} by model size"))
    return "\n".join(parts)


def _page(title: str, header: str, sections: Sequence[str]) -> str:
    """The whole HTML page: title, version and time, the header, the sections."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>\n"
        f'<h1>{esc(title)}</h1><p class="note">bayesgrpo {esc(__version__)}, {stamp}</p>\n'
        + header
        + "\n"
        + "\n".join(sections)
        + "\n</body></html>\n"
    )


#: Above this many log sources ``bayesgrpo report`` writes the fleet's page (``--fleet``).
FLEET_THRESHOLD = 50


def _report_rule(args: argparse.Namespace) -> StoppingRule:
    """``--eps`` or ``--prob`` given: the plateau rule they set; else :func:`default_rule`."""
    if args.eps is None and args.prob is None:
        return default_rule()
    return PlateauRule(
        eps=DEFAULT_PLATEAU_EPS if args.eps is None else args.eps,
        prob=DEFAULT_PLATEAU_PROB if args.prob is None else args.prob,
        relative=True,
    )


def run_cli(args: argparse.Namespace) -> tuple[Path, dict[str, str]]:
    """``bayesgrpo report LOGS... -o report.html``: read the logs, write the report. With
    ``--fleet``, ``--workers`` or ``--address``, or more than :data:`FLEET_THRESHOLD` log sources,
    the fleet's page (:mod:`.fleet`).

    Returns
    -------
    path : Path
        The file written.
    unanswered : dict
        ``run_id -> why`` of every run when no run got a stop decision (no horizon, past it, an
        unreadable log): the command then fails after writing the page. Empty when one did.
    """
    fleet_asked = args.fleet or args.workers is not None or args.address is not None
    if fleet_asked or len(fleet_sources(args.paths)) > FLEET_THRESHOLD:
        return _fleet_cli(args)
    table = read_logs(args)
    _, unanswered = planned_horizons(table, args.horizon)
    if len(unanswered) < len(table.run_ids):
        unanswered = {}
    population = None
    if args.population:
        population = RewardModel.load(args.population)
    transfer = None
    if args.transfer_size:
        transfer = transfer_specs(
            args.transfer_size, family=args.transfer_family, task=args.transfer_task, table=table
        )
    rule = _report_rule(args)
    fit_kwargs = {
        "draws": args.draws,
        "tune": args.tune,
        "random_seed": args.seed,
        "progressbar": not args.quiet,
    }
    path = write_report(
        table,
        args.output,
        population=population,
        fit_kwargs=fit_kwargs,
        transfer=transfer,
        rule=rule,
        diagnose=not args.no_diagnose,
        horizon=args.horizon,
        history_points=args.history_points,
        random_seed=args.seed,
    )
    return path, unanswered


def _fleet_cli(args: argparse.Namespace) -> tuple[Path, dict[str, str]]:
    """``bayesgrpo report`` on a fleet: the sortable page of :func:`write_fleet_report`."""
    if args.transfer_size or args.strict:
        raise BayesGRPOError(
            "the fleet's report (--fleet, --workers, --address, or more than "
            f"{FLEET_THRESHOLD} logs) has no transfer section and no --strict: leave those out, or "
            "report fewer runs at once"
        )
    settings = FleetSettings(
        rule=_report_rule(args),
        horizon=args.horizon,
        reward=args.reward,
        metadata=args.metadata,
        random_seed=args.seed,
        diagnose=not args.no_diagnose,
    )
    path, frame = fleet_page(
        args.paths,
        args.output,
        population=args.population,
        settings=settings,
        workers=args.workers,
        address=args.address,
        figures=args.figures,
        max_inline=args.max_inline,
        progress=not args.quiet,
    )
    if frame["decision"].map(lambda decision: isinstance(decision, str)).any():
        return path, {}
    return path, {
        str(row.run_id): str(row.error if row.status != "ok" else row.reason) for row in frame.itertuples()
    }
