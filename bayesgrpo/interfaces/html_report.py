"""A self-contained HTML report of a set of runs: forecasts, stop decisions, phases, pooling,
transfer and diagnostics on one page.

The page needs nothing beyond itself: figures are base64 PNGs in ``data:`` URIs, the style is
inline, there is no script and nothing is fetched. Every string that came from a log (run ids,
families, tasks, file names, reader notes, evidence) is HTML-escaped.

Two ways to get each run's forecast:

* with a fitted ``population`` (e.g. ``RewardModel.load("model.nc")`` or
  ``datasets.bundled_population()``), each run is conditioned on it live
  (``bayesgrpo.questions.live.LiveForecaster``, milliseconds per run, no refit);
* without one, the pooled model is fitted on the runs themselves (``RewardModel().fit``).

Examples
--------
>>> from bayesgrpo.model.datasets import load_bundled  # doctest: +SKIP
>>> write_report(load_bundled(), "report.html", fit_kwargs={"draws": 300})  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import base64
import datetime as _dt
import html
import logging
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo.errors import BayesGRPOError

if TYPE_CHECKING:
    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.questions.stopping import CurveDraws, StoppingRule
    from bayesgrpo.logs.table import RunsTable

logger = logging.getLogger(__name__)

__all__ = ["ReportRun", "run_cli", "transfer_specs", "write_report"]

#: Default fit settings when the report fits the pooled model itself.
DEFAULT_FIT: dict[str, Any] = {"draws": 500, "tune": 500, "chains": 2, "random_seed": 1, "progressbar": False}
#: Logged rewards averaged into a run's "reward now".
RECENT_POINTS = 5
#: Fractions of the total gain shown by the t80 figure.
T80_FRACTIONS: tuple[float, ...] = (0.8,)
#: Population parameters of the shrinkage and scaling figures.
SHRINKAGE_PARAMS: tuple[str, ...] = ("asymptote", "tau")
SCALING_PARAMS: tuple[str, ...] = ("r1",)
#: Most runs of one family drawn as context under the transfer predictions.
TRANSFER_CONTEXT_RUNS = 20

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px;
       color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }
h3 { font-size: 1.0em; margin: 1.2em 0 0.3em; word-break: break-all; }
table { border-collapse: collapse; font-size: 0.82em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.run { word-break: break-all; max-width: 22em; }
.stop { color: #b2182b; font-weight: 600; }
.continue { color: #2166ac; font-weight: 600; }
.sev-high { color: #b2182b; font-weight: 600; }
.sev-warning { color: #d6604d; font-weight: 600; }
.sev-info { color: #666; }
.note { color: #555; font-size: 0.9em; }
.warn { color: #b2182b; }
td.evidence { font-size: 0.85em; color: #444; max-width: 40em; }
img { max-width: 100%; height: auto; }
details { margin: 0.4em 0; }
code { background: #f5f5f5; padding: 0 3px; }
"""


def _e(value: Any) -> str:
    """HTML-escaped text of any value (quotes too)."""
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: Any, digits: int = 3) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "-"
    if not math.isfinite(number):
        return "-"
    return f"{number:.{digits}g}"


def _text(value: Any) -> str | None:
    """A metadata value as text, None when missing."""
    if value is None or (not isinstance(value, str) and bool(pd.isna(value))):
        return None
    text = str(value)
    return None if text in ("", "<NA>", "nan", "None") else text


def _img(png: bytes, alt: str) -> str:
    return f'<img src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}" alt="{_e(alt)}">'


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """An HTML table; cells are given as HTML (escape before)."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(rows_cell for rows_cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _td(html_text: str, cls: str | None = None) -> str:
    return f'<td class="{cls}">{html_text}</td>' if cls else f"<td>{html_text}</td>"


@dataclass(frozen=True)
class ReportRun:
    """What the report says about one run (one row of its summary table).

    Attributes
    ----------
    run_id, family, task : str or None
    size_b : float
    n_points : int
    step, horizon_step : float
        The last logged step and the step the run is planned to end at.
    reward_now : float
        Mean of the last :data:`RECENT_POINTS` logged rewards.
    final_median, final_lower, final_upper : float
        The expected reward at the horizon: posterior median and 90% interval.
    decision : str
    probability : float
        The rule's probability (``P(gain < eps)`` for a plateau rule).
    reason : str
    phase : str
    phase_probability : float
    pareto_k : float
        The live update's importance-sampling diagnostic (NaN for a fitted model).
    """

    run_id: str
    family: str | None
    task: str | None
    size_b: float
    n_points: int
    step: float
    horizon_step: float
    reward_now: float
    final_median: float
    final_lower: float
    final_upper: float
    decision: str
    probability: float
    reason: str
    phase: str
    phase_probability: float
    pareto_k: float = float("nan")


def _horizons(table: RunsTable, horizon: float | Mapping[str, float] | None) -> dict[str, float]:
    """Each run's horizon: ``horizon`` (one for all, or per run), else its ``total_steps``, else
    its last logged step; never before its last logged step."""
    from bayesgrpo.questions.history import run_horizon

    out = {}
    for run_id in table.run_ids:
        one = table.select([run_id])
        given = horizon.get(run_id) if isinstance(horizon, Mapping) else horizon
        value = run_horizon(one, None if given is None else float(given))
        finite = one.points[np.isfinite(one.points["reward"].to_numpy(dtype=float))]
        last = float(finite["step"].max())
        if value < last:
            raise BayesGRPOError(
                f"run {run_id!r} is already at step {last:g}, past its horizon {value:g}; pass a later horizon"
            )
        out[run_id] = value
    return out


def _recent_reward(table: RunsTable) -> dict[str, float]:
    out = {}
    for run_id, frame in table.points.groupby("run_id", sort=False):
        reward = frame.sort_values("step")["reward"].to_numpy(dtype=float)
        reward = reward[np.isfinite(reward)]
        out[str(run_id)] = float(reward[-RECENT_POINTS:].mean()) if reward.size else float("nan")
    return out


def _run_rows(
    table: RunsTable,
    draws: Mapping[str, CurveDraws],
    steps: Mapping[str, float],
    rule: StoppingRule,
    pareto: Mapping[str, float],
) -> list[ReportRun]:
    """One :class:`ReportRun` per run from its curve draws (one run each)."""
    from bayesgrpo.questions.stopping import phase, reward_at

    recent = _recent_reward(table)
    meta = table.runs.set_index("run_id")
    counts = table.points[np.isfinite(table.points["reward"].to_numpy(dtype=float))].groupby("run_id").size()
    rows = []
    for run_id in table.run_ids:
        cd = draws[run_id]
        horizon = float(cd.horizon_step[0])
        final = reward_at(cd, [horizon])[:, 0, 0]
        low, median, high = np.quantile(final, [0.05, 0.5, 0.95])
        decision = rule.decide(cd, steps[run_id], horizon)[0]
        phases = phase(cd, steps[run_id]).iloc[0]
        rows.append(ReportRun(
            run_id=run_id,
            family=_text(meta.loc[run_id, "family"]),
            task=_text(meta.loc[run_id, "task"]),
            size_b=float(meta.loc[run_id, "size_b"]),
            n_points=int(counts.get(run_id, 0)),
            step=float(steps[run_id]),
            horizon_step=horizon,
            reward_now=recent.get(run_id, float("nan")),
            final_median=float(median),
            final_lower=float(low),
            final_upper=float(high),
            decision=decision.decision,
            probability=decision.probability,
            reason=decision.reason,
            phase=str(phases["phase"]),
            phase_probability=float(phases["probability"]),
            pareto_k=float(pareto.get(run_id, float("nan"))),
        ))
    return rows


def _split(cd: CurveDraws) -> dict[str, CurveDraws]:
    """Curve draws of several runs as one ``CurveDraws`` per run."""
    from bayesgrpo.questions.stopping import CurveDraws

    out = {}
    for i, run_id in enumerate(cd.run_ids):
        out[run_id] = CurveDraws(
            curve=cd.curve,
            params={name: value[:, [i]] for name, value in cd.params.items()},
            step_scale=np.asarray(cd.step_scale)[[i]],
            reward_scale=np.asarray(cd.reward_scale)[[i]],
            horizon_step=None if cd.horizon_step is None else np.asarray(cd.horizon_step)[[i]],
            run_ids=(run_id,),
            step_offset=cd.step_offset,
        )
    return out


def transfer_specs(
    sizes: Sequence[float],
    *,
    family: str | None = None,
    task: str | None = None,
    table: RunsTable | None = None,
) -> list[dict[str, Any]]:
    """Metadata of new runs for :func:`write_report`'s ``transfer``: one per size.

    Parameters
    ----------
    sizes : sequence of float
        Model sizes in billions of parameters.
    family, task : str, optional
        Default: the most common family (task) among the runs of ``table``.
    table : RunsTable, optional

    Returns
    -------
    list of dict
        ``run_id`` (a label), ``family``, ``task``, ``size_b``.
    """
    def most_common(column: str) -> str | None:
        if table is None or column not in table.runs:
            return None
        values = [v for v in (_text(x) for x in table.runs[column]) if v is not None]
        return pd.Series(values).mode().iloc[0] if values else None

    family = family if family is not None else most_common("family")
    task = task if task is not None else most_common("task")
    specs = []
    for size in sizes:
        label = f"{family or 'unknown family'} {float(size):g}B" + (f", {task}" if task else "")
        specs.append({"run_id": label, "family": family, "task": task, "size_b": float(size)})
    return specs


def _transfer_bounds(table: RunsTable, population: RewardModel, family: str | None) -> tuple[float, float, str]:
    """The reward range of a new run: the runs' stated bounds (same family first), else the
    population's normalisation bounds (same family first)."""
    runs = table.runs
    stated = runs[np.isfinite(runs["reward_min"].to_numpy(dtype=float)) & np.isfinite(runs["reward_max"].to_numpy(dtype=float))]
    same = stated[stated["family"].astype("string") == family] if family is not None else stated.iloc[:0]
    for frame, where in ((same, f"stated by the logged {family} runs"), (stated, "stated by the logged runs")):
        if len(frame):
            return float(frame["reward_min"].median()), float(frame["reward_max"].median()), where
    data = population.data
    assert data is not None
    families = np.array([data.families[i] for i in data.family_index])
    chosen = families == family if family is not None and (families == family).any() else np.ones(data.n_runs, dtype=bool)
    return (float(np.median(data.lower[chosen])), float(np.median(data.upper[chosen])),
            "the population's normalisation bounds" + (f" of its {family} runs" if chosen.sum() < data.n_runs else ""))


def _context_runs(table: RunsTable, specs: Sequence[Mapping[str, Any]], bounds: Sequence[tuple[float, float]]) -> list[str]:
    """Logged runs to draw under transfer predictions: of their families, narrowed to their
    tasks and to their reward range where some runs match (rewards on one scale)."""
    runs = table.runs
    chosen = runs["family"].astype("string").isin({_text(s.get("family")) for s in specs} - {None}).fillna(False)
    tasks = {_text(s.get("task")) for s in specs} - {None}
    narrower = chosen & runs["task"].astype("string").isin(tasks).fillna(False)
    if narrower.any():
        chosen = narrower
    same_range = pd.Series(False, index=runs.index)
    for low, high in set(bounds):
        same_range |= np.isclose(runs["reward_min"].astype(float), low) & np.isclose(runs["reward_max"].astype(float), high)
    if (chosen & same_range).any():
        chosen = chosen & same_range
    return runs.loc[chosen.to_numpy(dtype=bool), "run_id"].astype(str).tolist()


def _transfer_section(
    table: RunsTable,
    population: RewardModel,
    specs: Sequence[Mapping[str, Any]],
    horizons: Mapping[str, float],
    horizon: float | Mapping[str, float] | None,
    dpi: int,
    random_seed: int | None,
) -> str:
    from bayesgrpo.interfaces import plotting
    from bayesgrpo.questions.stopping import steps_to_fraction
    from bayesgrpo.questions.transfer import predict_new_run

    predictions = {}
    rows = []
    bounds_used: list[tuple[float, float]] = []
    for spec in specs:
        metadata = dict(spec)
        family = _text(metadata.get("family"))
        if _text(metadata.get("reward_min")) is None or _text(metadata.get("reward_max")) is None:
            low, high, where = _transfer_bounds(table, population, family)
            metadata.update(reward_min=low, reward_max=high)
        else:
            where = "given"
        planned = metadata.get("total_steps")
        if planned is None or not np.isfinite(float(planned)):
            planned = horizon if isinstance(horizon, (int, float)) else float(np.median(list(horizons.values())))
        label = str(metadata.get("run_id") or f"{family} {metadata.get('size_b')}B")
        metadata["run_id"] = label
        bounds_used.append((float(metadata["reward_min"]), float(metadata["reward_max"])))
        prediction = predict_new_run(population, metadata, horizon=float(planned), random_seed=random_seed)
        predictions[label] = prediction
        final = prediction.table.iloc[-1]
        t80 = steps_to_fraction(prediction.curve_draws, T80_FRACTIONS).iloc[0]
        rows.append([
            _td(_e(label), "run"), _td(_e(family or "-")), _td(_e(_text(metadata.get("task")) or "-")),
            _td(_num(metadata.get("size_b")), "num"), _td(_num(planned, 6), "num"),
            _td(f"{_num(final['mean'])} [{_num(final['q05'])}, {_num(final['q95'])}]", "num"),
            _td(f"{_num(t80['median'], 4)} [{_num(t80['lower'], 4)}, {_num(t80['upper'], 4)}]", "num"),
            _td(f"{_num(metadata['reward_min'])} .. {_num(metadata['reward_max'])} ({_e(where)})"),
        ])
    context_ids = _context_runs(table, specs, bounds_used)
    context = table.select(context_ids[:TRANSFER_CONTEXT_RUNS]) if context_ids else None
    figure, ax = plotting.subplots(figsize=(7.5, 3.8))
    plotting.plot_transfer(predictions, context, ax=ax)
    image = _img(plotting.figure_png(figure, dpi=dpi), "transfer predictions")
    table_html = _table(
        ["new run", "family", "task", "size (B)", "horizon", "reward at horizon (mean, 90%)",
         f"step to {T80_FRACTIONS[0]:.0%} of its gain (median, 90%)", "reward range"],
        rows,
    )
    note = ('<p class="note">Zero-shot: each curve is the population\'s prediction for a run of that family, task '
            "and size before its first step (<code>bayesgrpo.questions.transfer.predict_new_run</code>); grey curves are logged "
            "runs of the same family (and task and reward range, where some match), for context.</p>")
    return table_html + note + image


def _header(table: RunsTable, mode: str) -> str:
    report = table.report
    formats = sorted({a.format for a in report.sources})
    lines = [
        f"<p>Read {report.records_read} records from {len(report.sources)} source(s)"
        + (f" ({_e(', '.join(formats))})" if formats else "")
        + f": kept {report.records_kept}, dropped {report.records_dropped}."
        + ("" if report.balanced else ' <span class="warn">The accounting does not balance: please report this.</span>')
        + f" {len(table.run_ids)} runs, "
        f"{int(np.isfinite(table.points['reward'].to_numpy(dtype=float)).sum())} reward points.</p>",
        f"<p>{mode}</p>",
    ]
    changes = [i for i in report.issues if i.action != "info"]
    notes = [i for i in report.issues if i.action == "info"]
    if changes:
        items = "".join(f"<li>{_e(issue)}</li>" for issue in changes)
        lines.append(f"<details open><summary>{len(changes)} repair(s) and drop(s) by the readers</summary><ul>{items}</ul></details>")
    else:
        lines.append('<p class="note">The readers repaired and dropped nothing.</p>')
    if notes:
        items = "".join(f"<li>{_e(issue)}</li>" for issue in notes)
        lines.append(f"<details><summary>{len(notes)} reader note(s)</summary><ul>{items}</ul></details>")
    if report.sources:
        sources = "".join(
            f"<li>{_e(a.source)} ({_e(a.format)}): runs {_e(', '.join(a.run_ids))}; read {a.records_read}, kept {a.records_kept}</li>"
            for a in report.sources
        )
        lines.append(f"<details><summary>sources</summary><ul>{sources}</ul></details>")
    return "\n".join(lines)


def _summary_table(rows: Sequence[ReportRun], rule: StoppingRule) -> str:
    body = []
    for r in rows:
        k_flag = "" if not np.isfinite(r.pareto_k) or r.pareto_k <= 0.7 else f' <span class="warn">(Pareto k {r.pareto_k:.2f}: unreliable)</span>'
        body.append([
            _td(f'<a href="#run-{_anchor(r.run_id)}">{_e(r.run_id)}</a>', "run"),
            _td(_e(r.family or "-")),
            _td(_num(r.size_b), "num"),
            _td(f"{_num(r.step, 6)} / {_num(r.horizon_step, 6)}", "num"),
            _td(_num(r.reward_now), "num"),
            _td(f"{_num(r.final_median)} [{_num(r.final_lower)}, {_num(r.final_upper)}]", "num"),
            _td(_e(r.decision), r.decision if r.decision in ("stop", "continue") else None),
            _td(_num(r.probability, 2), "num"),
            _td(f"{_e(r.phase.replace('_', ' '))} ({_num(r.phase_probability, 2)})"),
            _td(_e(r.reason) + k_flag),
        ])
    header = ["run", "family", "size (B)", "step / horizon", f"reward now (mean of last {RECENT_POINTS})",
              "expected reward at horizon (median, 90%)", "decision", "probability", "phase (probability)", "reason"]
    return f"<p>Rule: <code>{_e(rule)}</code>.</p>" + _table(header, body)


def _anchor(run_id: str) -> str:
    """An id attribute value for a run (letters, digits, - and _ kept; the rest hex-coded)."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_") else f"-{ord(c):x}" for c in run_id)


def _diagnostics_section(table: RunsTable, fitted: Any) -> str:
    from bayesgrpo.questions.diagnostics import diagnose

    findings = diagnose(table, fitted)
    if findings.empty:
        return f"<p>No findings in {len(table.run_ids)} runs.</p>"
    rows = []
    for f in findings.itertuples(index=False):
        evidence = "; ".join(f"{_e(k)}={_e(_num(v, 4) if isinstance(v, float) else v)}" for k, v in dict(f.evidence).items())
        rows.append([
            _td(_e(f.run_id), "run"), _td(_e(f.name)), _td(_e(f.severity), f"sev-{_e(f.severity)}"),
            _td(f"{_num(f.first_step, 6)}-{_num(f.last_step, 6)}", "num"), _td(evidence, "evidence"), _td(_e(f.action)),
        ])
    n_runs = findings["run_id"].nunique()
    return (f"<p>{len(findings)} finding(s) in {n_runs} of {len(table.run_ids)} runs "
            "(<code>bayesgrpo.questions.diagnostics.diagnose</code>).</p>"
            + _table(["run", "finding", "severity", "steps", "evidence", "action"], rows))


def _fit_mode_text(model: RewardModel) -> str:
    d = model.diagnostics
    if d is None:
        return "Pooled model fitted on these runs."
    warn = "".join(f'<br><span class="warn">{_e(w)}</span>' for w in d.warnings)
    return (f"Pooled {_e(model.curve)} model (partial pooling) fitted on these runs: {_e(d.sampler)}, {d.chains} chains x "
            f"{d.draws} draws, {d.seconds:.0f} s, {d.divergences} divergences, max r_hat {d.max_r_hat:.3f}, "
            f"min bulk ESS {d.min_ess_bulk:.0f}.{warn}")


def _live_mode_text(population: RewardModel) -> str:
    data = population.data
    n = data.n_runs if data is not None else 0
    families = ", ".join(data.families) if data is not None else ""
    return (f"Each run conditioned live on a fitted population ({_e(population.curve)} model, {n} runs; families "
            f"{_e(families)}) with <code>bayesgrpo.questions.live.LiveForecaster</code>: no refit.")


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
        Default ``PlateauRule(eps=0.01, prob=0.9, relative=True)``.
    diagnose : bool
        Add the diagnostics section (``bayesgrpo.questions.diagnostics.diagnose``).
    horizon : float or mapping run_id -> step, optional
        The step each run is planned to end at (default: its ``total_steps``, else its last
        logged step).
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
        No runs, a run past its horizon, or a population that cannot be conditioned on.
    """
    from bayesgrpo.interfaces import plotting
    from bayesgrpo.questions.history import default_rule, stop_history
    from bayesgrpo.questions.shrinkage import laplace_modes
    from bayesgrpo.questions.stopping import steps_to_fraction

    if len(table.run_ids) == 0:
        raise BayesGRPOError("the table holds no runs: nothing to report")
    rule = default_rule() if rule is None else rule
    horizons = _horizons(table, horizon)
    finite = table.points[np.isfinite(table.points["reward"].to_numpy(dtype=float))]
    last_step = finite.groupby("run_id")["step"].max()
    pareto: dict[str, float] = {}
    from bayesgrpo.questions.live import LiveForecaster

    if population is not None:
        from bayesgrpo.model.laplace import LiveUpdateWarning

        live = LiveForecaster(population, random_seed=random_seed)
        draws = {}
        steps = {}
        for run_id in table.run_ids:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", LiveUpdateWarning)  # shown per run as its Pareto k
                update = live.update(table.select([run_id]), horizon=horizons[run_id])
            draws[run_id], steps[run_id], pareto[run_id] = update.curve_draws, update.step, update.posterior.pareto_k
        model = population
        mode = _live_mode_text(population)
        fitted_on_table = None
    else:
        from bayesgrpo.model.reward_model import RewardModel

        settings = {**DEFAULT_FIT, **dict(fit_kwargs or {})}
        logger.info("fitting the pooled model on %d runs (%s)", len(table.run_ids), settings)
        model = RewardModel().fit(table, horizon=horizons, **settings)
        draws = _split(model.curve_draws())
        steps = {run_id: float(last_step[run_id]) for run_id in table.run_ids}
        mode = _fit_mode_text(model)
        fitted_on_table = model
        live = LiveForecaster(model, random_seed=random_seed) if history_points > 0 else None
    rows = _run_rows(table, draws, steps, rule, pareto)

    sections: list[str] = []
    sections.append(f"<h2>Runs</h2>{_summary_table(rows, rule)}")
    figure, ax = plotting.subplots(figsize=(7.5, 3.6))
    bounds = table.runs[["reward_min", "reward_max"]].astype(float)
    normalise = bool(bounds.isna().any().any() or bounds.nunique().max() > 1)
    plotting.plot_runs(table, color_by="family", normalise=normalise, smooth=0.05, ax=ax)
    sections.append(_img(plotting.figure_png(figure, dpi=dpi), "logged curves of every run")
                    + ('<p class="note">Each run on its own reward range (0 = its lower bound, 1 = its upper one), '
                       "smoothed over 5% of its points.</p>" if normalise else ""))

    # t80 over every run
    fractions = pd.concat([steps_to_fraction(draws[r], T80_FRACTIONS) for r in table.run_ids], ignore_index=True)
    figure, ax = plotting.subplots(figsize=(7.5, 1.2 + 0.2 * len(table.run_ids)))
    plotting.plot_t80(fractions, fractions=T80_FRACTIONS, ax=ax)
    sections.append(f"<h2>Steps to {T80_FRACTIONS[0]:.0%} of the gain</h2>"
                    + _img(plotting.figure_png(figure, dpi=dpi), "steps to 80% of the gain"))

    # per run: fan chart and stop history
    per_run = ["<h2>Each run</h2>"]
    if history_points > 0:
        per_run.append('<p class="note">Right: what the rule would have said had it run during training. Each cut '
                       "of the run is conditioned on the population live; the band beneath is the most probable "
                       "phase, its opacity that phase's probability."
                       + (" The population was fitted on these runs, so early cuts borrow from each run's own later "
                          "points." if fitted_on_table is not None else "") + "</p>")
    for r in rows:
        ncols = 2 if history_points > 0 else 1
        figure, axes = plotting.subplots(1, ncols, figsize=(5.0 * ncols + (1.6 if ncols == 2 else 0), 3.0), squeeze=False)
        plotting.plot_fan(draws[r.run_id], r.run_id, observed=table, step_now=r.step, ax=axes[0, 0])
        axes[0, 0].legend(fontsize=6, frameon=False)
        if history_points > 0:
            history = stop_history(live, table.select([r.run_id]), history_points, rule, horizon=horizons[r.run_id])
            plotting.plot_stop_probability(history, threshold=getattr(rule, "prob", None), ax=axes[0, 1])
            axes[0, 1].set_title("stop probability and phase", fontsize=8)
        per_run.append(f'<h3 id="run-{_anchor(r.run_id)}">{_e(r.run_id)}</h3>'
                       f'<p class="note">{_e(r.decision)}: {_e(r.reason)}</p>'
                       + _img(plotting.figure_png(figure, dpi=dpi), f"forecast of {r.run_id}"))
    sections.append("\n".join(per_run))

    # the population: shrinkage and scaling
    if model.pooling == "partial":
        which = "these runs" if fitted_on_table is not None else f"the population's own {model.data.n_runs} runs"
        parts = [(f"<h2>Pooling</h2><p class=\"note\">Shrinkage and size scaling of the partially pooled model, over {which}."
                  " Levels in normalised reward (0 = a run's lower reward bound, 1 = its upper one), rates in "
                  "normalised progress (1 = a run's horizon).</p>")]
        n_pop = model.data.n_runs
        modes = laplace_modes(model)  # once for every parameter
        for param in SHRINKAGE_PARAMS:
            figure, ax = plotting.subplots(figsize=(7.5, 1.2 + 0.17 * n_pop))
            plotting.plot_shrinkage(model, param=param, unpooled=modes, ax=ax)
            parts.append(_img(plotting.figure_png(figure, dpi=dpi), f"shrinkage of {param}"))
        for param in SCALING_PARAMS:
            figure, ax = plotting.subplots(figsize=(6.5, 3.6))
            plotting.plot_scaling(model, param=param, ax=ax)
            parts.append(_img(plotting.figure_png(figure, dpi=dpi), f"{param} by model size"))
        sections.append("\n".join(parts))

    if transfer:
        sections.append("<h2>Transfer to new runs</h2>"
                        + _transfer_section(table, model, transfer, horizons, horizon, dpi, random_seed))
    if diagnose:
        sections.append("<h2>Diagnostics</h2>" + _diagnostics_section(table, fitted_on_table))

    from bayesgrpo._version import __version__

    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>\n"
        f"<h1>{_e(title)}</h1><p class=\"note\">bayesgrpo {_e(__version__)}, {stamp}</p>\n"
        + _header(table, mode) + "\n" + "\n".join(sections) + "\n</body></html>\n"
    )
    path = Path(path)
    path.write_text(page, encoding="utf-8")
    logger.info("wrote %s (%d bytes)", path, len(page))
    return path


def run_cli(args: argparse.Namespace) -> Path:
    """``bayesgrpo report LOGS... -o report.html``: read the logs, write the report; returns
    the file written."""
    from bayesgrpo.logs.readers import load_runs
    from bayesgrpo.questions.stopping import PlateauRule

    table = load_runs(args.paths, reward=args.reward, metadata=args.metadata, warn=False)
    population = None
    if args.population:
        from bayesgrpo.model.reward_model import RewardModel

        population = RewardModel.load(args.population)
    transfer = None
    if args.transfer_size:
        transfer = transfer_specs(args.transfer_size, family=args.transfer_family, task=args.transfer_task, table=table)
    rule = PlateauRule(eps=args.eps, prob=args.prob, relative=True)
    fit_kwargs = {"draws": args.draws, "tune": args.tune, "random_seed": args.seed, "progressbar": not args.quiet}
    return write_report(
        table, args.output, population=population, fit_kwargs=fit_kwargs, transfer=transfer, rule=rule,
        diagnose=not args.no_diagnose, horizon=args.horizon, history_points=args.history_points, random_seed=args.seed,
    )
