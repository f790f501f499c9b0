"""Stopping figures: the stop probability over a run's history, and the steps to a share of the gain."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from matplotlib.colors import to_rgba
from matplotlib.patches import Patch

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.interfaces.plotting.style import PHASE_COLORS, pyplot, short_label
from bayesgrpo.questions.stopping import CurveDraws, steps_to_fraction

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _rule_probability_label(history: Any) -> str:
    rule = str(history["rule"].iloc[0]) if "rule" in history and len(history) else ""
    return "P(gain < eps)" if rule.startswith("PlateauRule") else "probability behind the decision"


def plot_stop_probability(
    history: Any,
    *,
    threshold: float | None = None,
    ax: Axes | None = None,
    color: str = "k",
) -> Axes:
    """The stopping rule's probability over training, with the run's phase as a band beneath.

    Parameters
    ----------
    history : pandas.DataFrame
        :func:`bayesgrpo.questions.history.stop_history`: ``step, p_stop, phase, p_phase`` (and
        ``decision``, ``horizon_step``, ``rule`` when there). The phase at a cut describes the
        run up to that cut: its bar spans from the previous cut (the first from step 0).
    threshold : float, optional
        The rule's threshold (``PlateauRule.prob``), drawn as a dashed line.
    ax : matplotlib Axes, optional
    color : str

    Returns
    -------
    matplotlib Axes
        The probability on ``[0, 1]``; beneath it, in ``[-0.2, -0.06]``, one bar per step
        interval coloured by the most probable phase, its opacity that phase's probability.
    """
    missing = [c for c in ("step", "p_stop", "phase", "p_phase") if c not in history]
    if missing:
        raise BayesGRPOError(
            f"history lacks columns {missing}; build it with bayesgrpo.questions.history.stop_history"
        )
    if len(history) == 0:
        raise BayesGRPOError("history is empty: nothing to draw")
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.2))
    frame = history.sort_values("step")
    steps = frame["step"].to_numpy(dtype=float)
    horizon = float(frame["horizon_step"].max()) if "horizon_step" in frame else float(steps[-1])
    # the phase at a cut describes the run up to it: each bar spans from the previous cut (or 0)
    starts = np.concatenate([[0.0], steps[:-1]])
    ends = steps
    band_low, band_height = -0.2, 0.14
    for name in [p for p in PHASE_COLORS if p in set(frame["phase"])] + sorted(
        set(frame["phase"]) - set(PHASE_COLORS)
    ):
        chosen = (frame["phase"] == name).to_numpy()
        base = PHASE_COLORS.get(name, "0.5")
        faces = [
            to_rgba(base, alpha=float(np.clip(p, 0.05, 1.0)))
            for p in frame["p_phase"].to_numpy(dtype=float)[chosen]
        ]
        spans = list(zip(starts[chosen], ends[chosen] - starts[chosen], strict=True))
        ax.broken_barh(
            spans, (band_low, band_height), facecolors=faces, edgecolor="none", label=name.replace("_", " ")
        )
    ax.plot(
        steps,
        frame["p_stop"],
        "-o",
        color=color,
        markersize=3,
        linewidth=1.2,
        label=_rule_probability_label(frame),
    )
    if threshold is not None:
        ax.axhline(
            float(threshold), color="0.4", linestyle="--", linewidth=0.8, label=f"threshold {threshold:g}"
        )
    if "decision" in frame:
        stops = steps[(frame["decision"] == "stop").to_numpy()]
        if stops.size:
            ax.axvline(
                stops[0], color="C3", linestyle=":", linewidth=1.2, label=f"first stop (step {stops[0]:.0f})"
            )
    ax.axhline(0.0, color="0.8", linewidth=0.5)
    ax.set_ylim(-0.23, 1.04)
    ax.set_xlim(0.0, horizon)
    ax.set_yticks([band_low + band_height / 2, 0.0, 0.5, 1.0])
    ax.set_yticklabels(["phase", "0", "0.5", "1"])
    ax.set_xlabel("step")
    ax.set_ylabel("probability")
    handles, labels = ax.get_legend_handles_labels()
    # phase patches at full colour in the legend (the bars' opacity varies)
    handles = [
        Patch(color=PHASE_COLORS.get(label.replace(" ", "_"), "0.5"), label=label)
        if label.replace(" ", "_") in PHASE_COLORS
        else h
        for h, label in zip(handles, labels, strict=True)
    ]
    ax.legend(handles, labels, fontsize=6, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return ax


def _fraction_table(source: Any, fractions: Sequence[float], interval: float) -> Any:

    if isinstance(source, pd.DataFrame):
        needed = {"run_id", "fraction", "median", "lower", "upper", "horizon_step"}
        if not needed <= set(source.columns):
            raise BayesGRPOError(
                f"the table lacks {sorted(needed - set(source.columns))}; pass steps_to_fraction's output"
            )
        return source
    if isinstance(source, CurveDraws):
        return steps_to_fraction(source, fractions, interval=interval)
    if hasattr(source, "curve_draws"):
        return steps_to_fraction(source.curve_draws(), fractions, interval=interval)
    raise BayesGRPOError(
        f"plot_t80 takes a RewardModel, CurveDraws or steps_to_fraction table; got {type(source).__name__}"
    )


def plot_t80(
    source: Any,
    *,
    fractions: Sequence[float] = (0.8,),
    interval: float = 0.9,
    relative: bool = True,
    max_ratio: float = 3.0,
    ax: Axes | None = None,
) -> Axes:
    """Per run, the step at which a fraction (80%) of its total gain is reached, with its
    interval, against the run's horizon.

    Parameters
    ----------
    source : RewardModel, CurveDraws or DataFrame
        A fitted model, curve draws of runs, or the table of
        :func:`bayesgrpo.questions.stopping.steps_to_fraction` (e.g. live updates' tables concatenated).
    fractions : sequence of float
        Fractions of the total gain ``A - R0`` (one marker per fraction and run).
    interval : float
        Mass of the equal-tailed interval.
    relative : bool
        Steps as a share of each run's horizon (runs of different lengths on one axis, the
        horizon at 1); otherwise in steps, each run's horizon a black bar.
    max_ratio : float
        The axis ends at this many horizons; steps beyond it are drawn at the edge as ``>``.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes
        One row per run (sorted by the first fraction's median step), one errorbar container
        per fraction.
    """
    table = _fraction_table(source, fractions, interval)
    plt = pyplot()
    order = (
        table[table["fraction"] == table["fraction"].min()]
        .assign(_key=lambda f: f["median"] / (f["horizon_step"] if relative else 1.0))
        .sort_values("_key", kind="stable")["run_id"]
        .tolist()
    )
    n_runs = len(order)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 1.0 + 0.18 * n_runs))
    row = {run_id: i for i, run_id in enumerate(order)}
    horizons = table.drop_duplicates("run_id").set_index("run_id")["horizon_step"].astype(float)
    scale = horizons if relative else horizons * 0 + 1.0
    limit = (
        max_ratio
        if relative
        else max_ratio * float(np.nanmax(horizons))
        if np.isfinite(horizons).any()
        else np.inf
    )
    chosen = sorted(table["fraction"].unique())
    offsets = np.linspace(-0.2, 0.2, len(chosen)) if len(chosen) > 1 else [0.0]
    beyond_labelled = False
    for j, (fraction, offset) in enumerate(zip(chosen, offsets, strict=True)):
        beyond = None if beyond_labelled else f"beyond {max_ratio:g}x the horizon"
        beyond_labelled |= _draw_steps_to_fraction(
            ax, table[table["fraction"] == fraction], row, scale, limit, offset, j, fraction, beyond
        )
    _mark_horizons(ax, relative, horizons.reindex(order).to_numpy(), limit, interval)
    ax.set_yticks(np.arange(n_runs))
    ax.set_yticklabels([short_label(r, 45) for r in order], fontsize=6 if n_runs > 20 else 8)
    ax.set_ylim(n_runs - 0.5, -0.5)
    ax.legend(fontsize=7, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.set_title(
        "steps to " + ", ".join(f"{f:.0%}" for f in chosen) + " of each run's total gain", fontsize=9
    )
    return ax


def _draw_steps_to_fraction(
    ax: Axes,
    part: pd.DataFrame,
    row: Mapping[str, int],
    scale: pd.Series,
    limit: float,
    offset: float,
    j: int,
    fraction: float,
    beyond_label: str | None,
) -> bool:
    """One fraction's steps, a point and interval a run, cut at ``limit`` (an arrow beyond it);
    whether any arrow was drawn.
    """
    y = part["run_id"].map(row).to_numpy(dtype=float) + offset
    s = part["run_id"].map(scale).to_numpy(dtype=float)
    median = part["median"].to_numpy(dtype=float) / s
    lower = part["lower"].to_numpy(dtype=float) / s
    upper = part["upper"].to_numpy(dtype=float) / s
    shown = np.minimum(median, limit)
    ax.errorbar(
        shown,
        y,
        xerr=[shown - np.minimum(lower, limit), np.minimum(upper, limit) - shown],
        fmt="o",
        color=f"C{j}",
        markersize=3,
        elinewidth=1,
        capsize=0,
        label=f"{fraction:.0%} of the gain",
    )
    over = median > limit
    if not over.any():
        return False
    ax.plot(
        np.full(over.sum(), limit),
        y[over],
        ">",
        color=f"C{j}",
        markersize=5,
        label="_nolegend_" if beyond_label is None else beyond_label,
    )
    return True


def _mark_horizons(ax: Axes, relative: bool, horizons: np.ndarray, limit: float, interval: float) -> None:
    """The horizon: one dashed line at 1 on the relative axis, else a tick on each run's row."""
    if relative:
        ax.axvline(1.0, color="k", linewidth=1, linestyle="--", label="horizon")
        ax.set_xlabel(f"step / horizon (median and {interval:.0%} interval)")
        ax.set_xlim(0.0, limit * 1.02)
        return
    ax.plot(horizons, np.arange(len(horizons)), "|", color="k", markersize=8, label="horizon")
    ax.set_xlabel(f"step (median and {interval:.0%} interval)")
    ax.set_xlim(0.0, limit * 1.02 if np.isfinite(limit) else None)
