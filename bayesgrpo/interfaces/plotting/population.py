"""The population: transfer predictions for new runs, pooling shrinkage, scaling with model size."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import NullFormatter

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.interfaces.plotting.style import (
    family_colors,
    family_of,
    plain_label,
    pyplot,
    robust_limits,
    short_label,
)
from bayesgrpo.questions.shrinkage import param_label, scaling_table, shrinkage_table

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.reward_model import RewardModel


def plot_transfer(
    predictions: Any,
    truth_table: RunsTable | None = None,
    *,
    ax: Axes | None = None,
) -> Axes:
    """Transfer predictions of runs not (yet) trained, against the true curves where known.

    Parameters
    ----------
    predictions : mapping of str to TransferPrediction, or sequence of TransferPrediction
        :func:`bayesgrpo.questions.transfer.predict_new_run` outputs; a mapping's keys name them, else each
        is named by its run id (the ``run_id`` of its metadata).
    truth_table : RunsTable, optional
        Logged runs to draw: a run whose id names a prediction is drawn in its colour (the
        truth it predicts); the others in grey, as context.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes
        Per prediction a band (the widest quantiles of its table) and a mean line.
    """
    items = (
        list(predictions.items())
        if isinstance(predictions, Mapping)
        else [(p.curve_draws.run_ids[0], p) for p in predictions]
    )
    if not items:
        raise BayesGRPOError("no transfer predictions to draw")
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.4))
    names = [str(name) for name, _ in items]
    truth_ids = set(truth_table.run_ids) if truth_table is not None else set()
    handles: list[Any] = []
    labels: list[str] = []
    end = 0.0
    for i, (name, prediction) in enumerate(items):
        table = prediction.table
        quantiles = sorted(
            (c for c in table.columns if c.startswith("q") and c[1:].replace(".", "").isdigit()),
            key=lambda c: float(c[1:]),
        )
        color = f"C{i % 10}"
        handle: list[Any] = []
        what = "mean"
        if len(quantiles) >= 2:
            low, high = quantiles[0], quantiles[-1]
            handle.append(
                ax.fill_between(table["step"], table[low], table[high], color=color, alpha=0.2, linewidth=0)
            )
            what = f"mean, {float(low[1:]):g}-{float(high[1:]):g}%"
        (line,) = ax.plot(table["step"], table["mean"], color=color, linewidth=1.6)
        handle.append(line)
        handles.append(tuple(handle))
        labels.append(f"{short_label(name, 40)} ({what})")
        end = max(end, float(table["step"].max()))
        if name in truth_ids:
            points = truth_table.run(name)  # type: ignore[union-attr]  # checked not None above
            (logged,) = ax.plot(points["step"], points["reward"], ".", color=color, markersize=2.5, alpha=0.8)
            handles.append(logged)
            labels.append(f"{short_label(name, 40)}: logged")
            end = max(end, float(points["step"].max()))
    if truth_table is not None:
        context = [r for r in truth_table.run_ids if r not in names]
        for k, run_id in enumerate(context):
            points = truth_table.run(run_id)
            (line,) = ax.plot(
                points["step"], points["reward"], "-", color="0.65", linewidth=0.6, alpha=0.6, zorder=0
            )
            if k == 0:
                handles.append(line)
                labels.append("other logged runs")
    ax.set_xlim(0.0, end)
    ax.set_xlabel("step")
    ax.set_ylabel("reward")
    ax.legend(handles, labels, fontsize=6, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("transfer: predicted curves of new runs", fontsize=9)
    return ax


def plot_shrinkage(
    model: RewardModel,
    *,
    param: str = "asymptote",
    unpooled: Any = None,
    table: Any = None,
    ax: Axes | None = None,
) -> Axes:
    """Pooling shrinkage: each run's own estimate, an arrow to its partially pooled posterior.

    Parameters
    ----------
    model : RewardModel
        Fitted with ``pooling="partial"``.
    param : str
        ``"asymptote"``, ``"r1"``, ``"r0"`` or a shape parameter (``"tau"``, ``"k"``...).
    unpooled : RewardModel or mapping, optional
        A ``pooling="none"`` fit of the same runs, or ``shrinkage.laplace_modes(model)``
        (default: each run's Laplace fit alone, computed here).
    table : DataFrame, optional
        :func:`bayesgrpo.questions.shrinkage.shrinkage_table`'s output, if already computed.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes
        One row per run (sorted by its pooled value): a hollow marker at its own estimate, a
        filled one (family colour) at its pooled posterior median with the interval, one quiver
        of arrows between them, a tick at the population location it is pulled toward, and the
        population mean as a dashed line.
    """
    frame = shrinkage_table(model, param, unpooled=unpooled) if table is None else table
    frame = frame.sort_values("pooled", kind="stable").reset_index(drop=True)
    plt = pyplot()
    n_runs = len(frame)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 1.2 + 0.16 * n_runs))
    y = np.arange(n_runs, dtype=float)
    colors = family_colors(list(frame["family"]))
    run_colors = [colors[family_of(f)] for f in frame["family"]]
    log = param not in ("r0", "r1", "asymptote")
    ax.hlines(y, frame["pooled_lower"], frame["pooled_upper"], colors=run_colors, linewidth=1, alpha=0.6)
    ax.quiver(
        frame["unpooled"],
        y,
        frame["pooled"] - frame["unpooled"],
        np.zeros(n_runs),
        angles="xy",
        scale_units="xy",
        scale=1.0,
        width=0.003,
        color="0.35",
        alpha=0.8,
    )
    ax.scatter(
        frame["unpooled"],
        y,
        s=14,
        facecolors="none",
        edgecolors="0.3",
        linewidths=0.8,
        label="own fit (unpooled)",
        zorder=3,
    )
    ax.scatter(frame["pooled"], y, s=14, c=run_colors, zorder=4)
    ax.scatter(
        frame["target"],
        y,
        marker="|",
        s=40,
        color="k",
        linewidths=1,
        label="pulled toward (family, task, size)",
        zorder=5,
    )
    ax.axvline(
        float(frame["population"].iloc[0]), color="k", linestyle="--", linewidth=0.8, label="population mean"
    )
    values = np.concatenate([frame["unpooled"], frame["pooled"], frame["target"]])
    if log:
        ax.set_xscale("log")
    ax.set_xlim(*robust_limits(values, log=log))
    ax.set_yticks(y)
    ax.set_yticklabels([short_label(r, 45) for r in frame["run_id"]], fontsize=6 if n_runs > 20 else 8)
    ax.set_ylim(n_runs - 0.5, -0.5)
    ax.set_xlabel(param_label(param))
    handles, labels = ax.get_legend_handles_labels()
    handles.insert(1, Line2D([], [], marker="o", color="0.3", markersize=4, linewidth=1))
    labels.insert(1, "partially pooled (median, 90%)")
    families = [f for f in colors if f in {family_of(v) for v in frame["family"]}]
    handles += [Line2D([], [], marker="o", linestyle="", color=colors[f], markersize=4) for f in families]
    labels += [plain_label(f) for f in families]
    ax.legend(handles, labels, fontsize=6, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.set_title(f"shrinkage of {param} by partial pooling", fontsize=9)
    return ax


def plot_scaling(
    model: RewardModel,
    *,
    param: str = "asymptote",
    interval: float = 0.9,
    ax: Axes | None = None,
) -> Axes:
    """A parameter's run-level posteriors against model size, with the population's size curve.

    Parameters
    ----------
    model : RewardModel
        A fitted model (its ``<p>_size_slope`` variables give the curve).
    param : str
        ``"asymptote"``, ``"r1"``, ``"r0"`` or a shape parameter.
    interval : float
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes
        Runs of known size as points with their interval (family colours, sizes jittered
        slightly so that runs of one size do not hide each other), the population curve
        (median line and its band) when the model has size slopes; log size axis.
    """
    scaling = scaling_table(model, param, interval=interval)
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.6))
    runs = scaling.runs
    assert model.data is not None
    colors = family_colors(list(model.data.families))  # the colours of the other figures, whatever is shown
    # a multiplicative jitter, fixed per run so figures are reproducible
    jitter = np.exp(0.06 * np.sin(np.arange(len(runs)) * 2.399963))
    for family in sorted({family_of(f) for f in runs["family"]}):
        part = runs[[family_of(f) == family for f in runs["family"]]]
        x = part["size_b"].to_numpy() * jitter[part.index]
        median = part["median"].to_numpy()
        ax.errorbar(
            x,
            median,
            yerr=[median - part["lower"].to_numpy(), part["upper"].to_numpy() - median],
            fmt="o",
            color=colors[family],
            markersize=3,
            elinewidth=0.8,
            alpha=0.8,
            capsize=0,
            label=plain_label(family),
        )
    values = [runs["median"].to_numpy()]
    if scaling.line is not None:
        line = scaling.line
        band = ax.fill_between(
            line["size_b"], line["lower"], line["upper"], color="k", alpha=0.12, linewidth=0
        )
        (mean_line,) = ax.plot(line["size_b"], line["median"], color="k", linewidth=1.5)
        values.append(line["median"].to_numpy())
    ax.set_xscale("log")
    sizes = runs["size_b"].to_numpy(dtype=float)
    if scaling.line is not None:  # the curve may reach sizes no shown run has (runs left out of a level)
        sizes = np.concatenate([sizes, scaling.line["size_b"].to_numpy(dtype=float)])
    if sizes.size:
        ticks = [
            s for s in (0.5, 1, 2, 4, 8, 20, 32, 70, 140, 400) if sizes.min() / 1.3 <= s <= sizes.max() * 1.3
        ]
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{s:g}" for s in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(*robust_limits(np.concatenate(values), pad=0.15, log=param not in ("r0", "r1", "asymptote")))
    if param not in ("r0", "r1", "asymptote"):
        ax.set_yscale("log")
    ax.set_xlabel("model size (B parameters)")
    ax.set_ylabel(param_label(param))
    shown = [param, "r0"] if param != "asymptote" else ["r1", "r0"]
    rows = scaling.slopes.set_index("name")
    note = ", ".join(
        f"{p}_size_slope {rows.loc[f'{p}_size_slope', 'mean']:+.2f} "
        f"[{rows.loc[f'{p}_size_slope', 'lower']:+.2f}, {rows.loc[f'{p}_size_slope', 'upper']:+.2f}]"
        for p in dict.fromkeys(shown)
        if f"{p}_size_slope" in rows.index
    )
    if scaling.line is None:
        note = "no size slope in this model"
    if scaling.n_unknown_size:
        note += ("; " if note else "") + f"{scaling.n_unknown_size} runs of unknown size not shown"
    if scaling.n_own_range:
        note += ("; " if note else "") + f"{scaling.n_own_range} runs on their own reward range not shown"

    ax.set_title("\n".join([f"{param} by model size", *textwrap.wrap(note, 80)]), fontsize=8)
    artists, labels = ax.get_legend_handles_labels()
    handles: list[Any] = list(artists)
    if scaling.line is not None:
        handles.insert(0, (band, mean_line))
        labels.insert(0, f"population (average family), {interval:.0%}")
    ax.legend(handles, labels, fontsize=6, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return ax
