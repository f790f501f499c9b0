"""The report's sections: header, summary table, transfer, diagnostics, and how forecasts were made."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo.interfaces import plotting
from bayesgrpo.interfaces.html_report.markup import (
    esc,
    fmt_band,
    fmt_number,
    fmt_text,
    html_cell,
    html_table,
    img_tag,
)
from bayesgrpo.interfaces.html_report.runs import RECENT_POINTS, ReportRun
from bayesgrpo.questions.diagnostics import diagnose
from bayesgrpo.questions.stopping import steps_to_fraction
from bayesgrpo.questions.transfer import predict_new_run

if TYPE_CHECKING:
    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.questions.stopping import StoppingRule

#: The summary's column of the probability behind each decision (the rule's question).
DECISION_PROBABILITY = "P behind the decision"
#: The summary's column of each run's phase now (the curve's rate, not the gain left).
PHASE_NOW = "phase now: the curve's rate (P)"
#: Fractions of the total gain shown by the t80 figure.
T80_FRACTIONS: tuple[float, ...] = (0.8,)
#: Most runs of one family drawn as context under the transfer predictions.
TRANSFER_CONTEXT_RUNS = 20


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
        values = [v for v in (fmt_text(x) for x in table.runs[column]) if v is not None]
        return pd.Series(values).mode().iloc[0] if values else None

    family = family if family is not None else most_common("family")
    task = task if task is not None else most_common("task")
    specs = []
    for size in sizes:
        label = f"{family or 'unknown family'} {float(size):g}B" + (f", {task}" if task else "")
        specs.append({"run_id": label, "family": family, "task": task, "size_b": float(size)})
    return specs


#: How :func:`transfer_bounds` names bounds that are the population's normalisation, not stated.
POPULATION_BOUNDS = "the population's normalisation bounds"


def transfer_bounds(
    table: RunsTable, population: RewardModel, family: str | None
) -> tuple[float, float, str]:
    """The reward range of a new run: the runs' stated bounds (same family first), else the
    population's normalisation bounds (same family first).
    """
    runs = table.runs
    stated = runs[
        np.isfinite(runs["reward_min"].to_numpy(dtype=float))
        & np.isfinite(runs["reward_max"].to_numpy(dtype=float))
    ]
    same = stated[stated["family"].astype("string") == family] if family is not None else stated.iloc[:0]
    for frame, where in (
        (same, f"stated by the logged {family} runs"),
        (stated, "stated by the logged runs"),
    ):
        if len(frame):
            return float(frame["reward_min"].median()), float(frame["reward_max"].median()), where
    data = population.data
    assert data is not None
    families = np.array([data.families[i] for i in data.family_index])
    chosen = (
        families == family
        if family is not None and (families == family).any()
        else np.ones(data.n_runs, dtype=bool)
    )
    return (
        float(np.median(data.lower[chosen])),
        float(np.median(data.upper[chosen])),
        POPULATION_BOUNDS + (f" of its {family} runs" if chosen.sum() < data.n_runs else ""),
    )


def context_runs(
    table: RunsTable, specs: Sequence[Mapping[str, Any]], bounds: Sequence[tuple[float, float]]
) -> list[str]:
    """Logged runs to draw under transfer predictions: of their families, narrowed to their
    tasks and to their reward range where some runs match (rewards on one scale).
    """
    runs = table.runs
    chosen = (
        runs["family"]
        .astype("string")
        .isin({fmt_text(s.get("family")) for s in specs} - {None})
        .fillna(False)
    )
    tasks = {fmt_text(s.get("task")) for s in specs} - {None}
    narrower = chosen & runs["task"].astype("string").isin(tasks).fillna(False)
    if narrower.any():
        chosen = narrower
    same_range = pd.Series(False, index=runs.index)
    for low, high in set(bounds):
        same_range |= np.isclose(runs["reward_min"].astype(float), low) & np.isclose(
            runs["reward_max"].astype(float), high
        )
    if (chosen & same_range).any():
        chosen = chosen & same_range
    return runs.loc[chosen.to_numpy(dtype=bool), "run_id"].astype(str).tolist()


def transfer_section(
    table: RunsTable,
    population: RewardModel,
    specs: Sequence[Mapping[str, Any]],
    horizons: Mapping[str, float],
    horizon: float | Mapping[str, float] | None,
    dpi: int,
    random_seed: int | None,
) -> str:
    """The transfer section: zero-shot predictions for new runs of each family, logged runs as context."""
    predictions = {}
    rows = []
    bounds_used: list[tuple[float, float]] = []
    any_share = False
    for spec in specs:
        metadata = dict(spec)
        family = fmt_text(metadata.get("family"))
        share = False
        if fmt_text(metadata.get("reward_min")) is None or fmt_text(metadata.get("reward_max")) is None:
            low, high, where = transfer_bounds(table, population, family)
            # normalisation bounds read from logged points are no range the reward can reach:
            # the prediction is a share of them, never a score of 1.15 on an accuracy
            share = where.startswith(POPULATION_BOUNDS)
            metadata.update(reward_min=0.0 if share else low, reward_max=1.0 if share else high)
        else:
            low, high, where = float(metadata["reward_min"]), float(metadata["reward_max"]), "given"
        any_share = any_share or share
        planned = metadata.get("total_steps")
        if planned is None or not np.isfinite(float(planned)):
            planned = (
                horizon if isinstance(horizon, (int, float)) else float(np.median(list(horizons.values())))
            )
        label = str(metadata.get("run_id") or f"{family} {metadata.get('size_b')}B")
        metadata["run_id"] = label
        if not share:
            bounds_used.append((low, high))
        prediction = predict_new_run(population, metadata, horizon=float(planned), random_seed=random_seed)
        predictions[label] = prediction
        final = prediction.table.iloc[-1]
        t80 = steps_to_fraction(prediction.curve_draws, T80_FRACTIONS).iloc[0]
        rows.append(
            [
                html_cell(esc(label), "run"),
                html_cell(esc(family or "-")),
                html_cell(esc(fmt_text(metadata.get("task")) or "-")),
                html_cell(fmt_number(metadata.get("size_b")), "num"),
                html_cell(fmt_number(planned, 6), "num"),
                html_cell(
                    fmt_band(final["mean"], final["q05"], final["q95"]),
                    "num",
                ),
                html_cell(
                    f"{fmt_number(t80['median'], 4)} [{fmt_number(t80['lower'], 4)}, "
                    f"{fmt_number(t80['upper'], 4)}]",
                    "num",
                ),
                html_cell(
                    (
                        f"share of {fmt_number(low)} .. {fmt_number(high)} (0 = its bottom, 1 = its top; "
                        if share
                        else f"{fmt_number(low)} .. {fmt_number(high)} ("
                    )
                    + f"{esc(where)})"
                ),
            ]
        )
    # logged runs in reward units beside predictions on a share of a range would mislead
    context_ids = context_runs(table, specs, bounds_used) if bounds_used else []
    context = table.select(context_ids[:TRANSFER_CONTEXT_RUNS]) if context_ids else None
    figure, ax = plotting.subplots(figsize=(7.5, 3.8))
    plotting.plot_transfer(predictions, context, ax=ax)
    image = img_tag(plotting.figure_png(figure, dpi=dpi), "transfer predictions")
    table_html = html_table(
        [
            "new run",
            "family",
            "task",
            "size (B)",
            "horizon",
            "reward at horizon (mean, 90%)",
            f"step to {T80_FRACTIONS[0]:.0%} of its gain (median, 90%)",
            "reward range",
        ],
        rows,
    )
    note = (
        '<p class="note">Zero-shot: each curve is the population\'s prediction for a run of that family, '
        "task and size before its first step (<code>bayesgrpo.questions.transfer.predict_new_run</code>); "
        "grey curves are logged runs of the same family (and task and reward range, where some match), for "
        "context.</p>"
    )
    if any_share:
        note += (
            '<p class="note">Where the logs state no reward range, the prediction is a share of the '
            "population's normalisation bounds (the range read from its runs' points, not a range the "
            "reward is known to keep to): 0 is their bottom, 1 their top. Give the runs reward_min and "
            "reward_max for a prediction in reward units.</p>"
        )
    return table_html + note + image


def header_section(table: RunsTable, mode: str) -> str:
    """The page header: what was read, from where, and how the forecasts were made."""
    report = table.report
    formats = sorted({a.format for a in report.sources})
    lines = [
        f"<p>Read {report.records_read} records from {len(report.sources)} source(s)"
        + (f" ({esc(', '.join(formats))})" if formats else "")
        + f": kept {report.records_kept}, dropped {report.records_dropped}."
        + (
            ""
            if report.balanced
            else ' <span class="warn">The accounting does not balance: please report this.</span>'
        )
        + f" {len(table.run_ids)} runs, "
        f"{int(np.isfinite(table.points['reward'].to_numpy(dtype=float)).sum())} reward points.</p>",
        f"<p>{mode}</p>",
    ]
    changes = [i for i in report.issues if i.action != "info"]
    notes = [i for i in report.issues if i.action == "info"]
    if changes:
        items = "".join(f"<li>{esc(issue)}</li>" for issue in changes)
        lines.append(
            f"<details open><summary>{len(changes)} repair(s) and drop(s) by the "
            f"readers</summary><ul>{items}</ul></details>"
        )
    else:
        lines.append('<p class="note">The readers repaired and dropped nothing.</p>')
    if notes:
        items = "".join(f"<li>{esc(issue)}</li>" for issue in notes)
        lines.append(f"<details><summary>{len(notes)} reader note(s)</summary><ul>{items}</ul></details>")
    if report.sources:
        sources = "".join(
            f"<li>{esc(a.source)} ({esc(a.format)}): runs {esc(', '.join(a.run_ids))}; read "
            f"{a.records_read}, kept {a.records_kept}</li>"
            for a in report.sources
        )
        lines.append(f"<details><summary>sources</summary><ul>{sources}</ul></details>")
    return "\n".join(lines)


def summary_table(rows: Sequence[ReportRun], rule: StoppingRule) -> str:
    """The summary table: one row a run, linked to its section."""
    body = []
    for r in rows:
        k_flag = (
            ""
            if not np.isfinite(r.pareto_k) or r.pareto_k <= 0.7
            else f' <span class="warn">(Pareto k {r.pareto_k:.2f}: answered by the {esc(r.method)} '
            "fallback)</span>"
        )
        if r.departure_note:
            k_flag += f' <span class="warn">(the run has left its forecast: {esc(r.departure_note)})</span>'
        body.append(
            [
                html_cell(f'<a href="#run-{run_anchor(r.run_id)}">{esc(r.run_id)}</a>', "run"),
                html_cell(esc(r.family or "-")),
                html_cell(fmt_number(r.size_b), "num"),
                html_cell(f"{fmt_number(r.step, 6)} / {fmt_number(r.horizon_step, 6)}", "num"),
                html_cell(fmt_number(r.reward_now), "num"),
                html_cell(
                    fmt_band(r.final_median, r.final_lower, r.final_upper),
                    "num",
                ),
                html_cell(
                    esc(r.decision), r.decision if r.decision in ("stop", "continue", "undecided") else None
                ),
                html_cell(fmt_number(r.probability, 2), "num"),
                html_cell(f"{esc(r.phase.replace('_', ' '))} ({fmt_number(r.phase_probability, 2)})"),
                html_cell(esc(r.reason) + k_flag),
            ]
        )
    header = [
        "run",
        "family",
        "size (B)",
        "step / horizon",
        f"reward now (mean of last {RECENT_POINTS})",
        "reward at horizon (median, 90% "
        + "/".join(sorted({r.band for r in rows} or {"predictive"}))
        + " band)",
        "decision",
        DECISION_PROBABILITY,
        PHASE_NOW,
        "reason",
    ]
    note = (
        '<p class="note">Two questions, two answers. The decision, its probability and the reason '
        "answer the rule's question: is the gain left before the horizon worth the steps? The phase "
        "answers another: how fast is the curve rising now? A run is on its plateau once its rate has "
        "fallen below a fifth of its peak after half its gain; a slow climb can still add more than "
        "the rule's threshold before the horizon, so a plateau (0.98) beside continue is no "
        "contradiction. A run with no horizon has no decision: give --horizon.</p>"
    )
    return f"<p>Rule: <code>{esc(rule)}</code>.</p>" + html_table(header, body) + note


def run_anchor(run_id: str) -> str:
    """An id attribute value for a run (letters, digits, - and _ kept; the rest hex-coded)."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_") else f"-{ord(c):x}" for c in run_id)


def diagnostics_section(table: RunsTable, fitted: Any) -> str:
    """The diagnostics section: every finding of every run, worst first."""
    findings = diagnose(table, fitted)
    if findings.empty:
        return f"<p>No findings in {len(table.run_ids)} runs.</p>"
    rows = []
    for f in findings.itertuples(index=False):
        evidence = "; ".join(
            f"{esc(k)}={esc(fmt_number(v, 4) if isinstance(v, float) else v)}"
            for k, v in dict(f.evidence).items()
        )
        rows.append(
            [
                html_cell(esc(f.run_id), "run"),
                html_cell(esc(f.name)),
                html_cell(esc(f.severity), f"sev-{esc(f.severity)}"),
                html_cell(f"{fmt_number(f.first_step, 6)}-{fmt_number(f.last_step, 6)}", "num"),
                html_cell(evidence, "evidence"),
                html_cell(esc(f.action)),
            ]
        )
    n_runs = findings["run_id"].nunique()
    return (
        f"<p>{len(findings)} finding(s) in {n_runs} of {len(table.run_ids)} runs "
        "(<code>bayesgrpo.questions.diagnostics.diagnose</code>).</p>"
        + html_table(["run", "finding", "severity", "steps", "evidence", "action"], rows)
    )


def fit_mode_text(model: RewardModel) -> str:
    """How the forecasts were made when the model was fitted on these runs."""
    d = model.diagnostics
    if d is None:
        return "Pooled model fitted on these runs."
    warn = "".join(f'<br><span class="warn">{esc(w)}</span>' for w in d.warnings)
    return (
        f"Pooled {esc(model.curve)} model (partial pooling) fitted on these runs: {esc(d.sampler)}, "
        f"{d.chains} chains x {d.draws} draws, {d.seconds:.0f} s, {d.divergences} divergences, max r_hat "
        f"{d.max_r_hat:.3f}, min bulk ESS {d.min_ess_bulk:.0f}.{warn}"
    )


def live_mode_text(population: RewardModel) -> str:
    """How the forecasts were made when each run was conditioned live on a population."""
    data = population.data
    n = data.n_runs if data is not None else 0
    families = ", ".join(data.families) if data is not None else ""
    return (
        f"Each run conditioned live on a fitted population ({esc(population.curve)} model, {n} runs; "
        f"families {esc(families)}) with <code>bayesgrpo.questions.live.LiveForecaster</code>: no refit."
    )
