"""Plots of runs and forecasts. Functions take ``ax=`` (or ``axes=``) and return what they drew on.

matplotlib is imported here only, so nothing else in the package needs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.logs.table import RunsTable


def _pyplot() -> Any:
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline") and not _interactive():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _interactive() -> bool:
    import sys

    return hasattr(sys, "ps1") or "ipykernel" in sys.modules


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] = (5.0, 3.2), **kwargs: Any) -> tuple[Figure, Any]:
    """A new figure and its axes (``matplotlib.pyplot.subplots``), for modules that must not
    import matplotlib themselves."""
    return _pyplot().subplots(nrows, ncols, figsize=figsize, **kwargs)


def figure_png(figure: Figure, *, dpi: int = 72) -> bytes:
    """The figure as PNG bytes (tight bounding box); the figure is closed."""
    import io

    buffer = io.BytesIO()
    try:
        figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    finally:
        _pyplot().close(figure)
    return buffer.getvalue()


def plot_forecast(
    model: RewardModel,
    run_id: str,
    *,
    observed: RunsTable | None = None,
    ax: Axes | None = None,
    steps: Sequence[float] | np.ndarray | None = None,
    intervals: Sequence[float] = (0.5, 0.9),
    include_noise: bool = False,
    color: str = "C0",
    title: str | None = None,
) -> Axes:
    """Fan chart of one run: observed rewards, forecast mean and central intervals.

    Parameters
    ----------
    model : RewardModel
        A fitted model.
    run_id : str
    observed : RunsTable, optional
        The logged points to draw (the table the model was fitted on, or the full run).
    ax : matplotlib Axes, optional
    steps : array, optional
        Steps to forecast; default 0 to the run's horizon.
    intervals : sequence of float
        Central interval masses, drawn as nested bands.
    include_noise : bool
        Bands for a logged (noisy) reward instead of the expected reward.
    color : str
    title : str, optional

    Returns
    -------
    matplotlib Axes
    """
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.2))
    data = model.data
    if data is None:
        from bayesgrpo.model.reward_model import NotFittedError

        raise NotFittedError("plot_forecast needs a fitted model")
    index = list(data.run_ids).index(run_id)
    if steps is None:
        steps = np.linspace(0, float(data.horizon_step[index]), 80)
    quantiles = sorted({q for mass in intervals for q in (0.5 - mass / 2, 0.5 + mass / 2)} | {0.5})
    forecast = model.forecast(steps=steps, runs=[run_id], quantiles=quantiles, include_noise=include_noise)
    table = forecast.table
    for mass, alpha in zip(sorted(intervals, reverse=True), np.linspace(0.15, 0.35, len(intervals))):
        low = np.quantile(forecast.draws.sel(run=run_id).to_numpy(), 0.5 - mass / 2, axis=0)
        high = np.quantile(forecast.draws.sel(run=run_id).to_numpy(), 0.5 + mass / 2, axis=0)
        ax.fill_between(table["step"], low, high, color=color, alpha=alpha, linewidth=0, label=f"{mass:.0%} interval")
    ax.plot(table["step"], table["mean"], color=color, linewidth=1.5, label="forecast mean")
    if observed is not None and run_id in set(observed.run_ids):
        points = observed.run(run_id)
        ax.plot(points["step"], points["reward"], ".", color="0.25", markersize=2.5, alpha=0.7, label="logged")
    fitted_until = data.t[index, data.mask[index]].max() * data.progress_scale[index] / data.step_to_progress[index]
    ax.axvline(fitted_until, color="0.5", linestyle=":", linewidth=1, label="end of fitted data")
    ax.set_xlabel("step")
    ax.set_ylabel("reward")
    ax.set_title(title if title is not None else run_id[:50], fontsize=8)
    return ax


def plot_forecast_grid(
    model: RewardModel,
    run_ids: Sequence[str] | None = None,
    *,
    observed: RunsTable | None = None,
    ncols: int = 6,
    panel_size: tuple[float, float] = (3.2, 2.2),
    **kwargs: Any,
) -> Figure:
    """Fan charts of many runs on one figure (one panel per run); returns the figure."""
    plt = _pyplot()
    assert model.data is not None
    run_ids = list(run_ids) if run_ids is not None else list(model.data.run_ids)
    nrows = int(np.ceil(len(run_ids) / ncols))
    figure, axes = plt.subplots(nrows, ncols, figsize=(panel_size[0] * ncols, panel_size[1] * nrows), squeeze=False)
    for ax, run_id in zip(axes.ravel(), run_ids):
        plot_forecast(model, run_id, observed=observed, ax=ax, **kwargs)
        ax.set_xlabel("")
        ax.set_ylabel("")
        ax.tick_params(labelsize=6)
    for ax in axes.ravel()[len(run_ids) :]:
        ax.set_visible(False)
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="upper center", ncol=len(labels), fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, 0, 1, 0.97))
    return figure


# --------------------------------------------------------------------------------------------
# Runs, fan charts from curve draws, stopping, transfer, pooling
# --------------------------------------------------------------------------------------------

#: Colours of the phases of ``bayesgrpo.questions.stopping.PHASES``.
PHASE_COLORS: dict[str, str] = {"slow_start": "#6baed6", "rapid": "#fd8d3c", "plateau": "#41ab5d"}
#: Label of a run, family or size that the metadata leave unknown.
UNKNOWN_LABEL = "unknown"


def _plain(text: str) -> str:
    """Text from a log as matplotlib shows it literally: a ``$`` would start mathtext (and a
    malformed formula fails the whole figure)."""
    return str(text).replace("$", r"\$")


def _short(text: str, width: int = 40) -> str:
    """``text`` cut to ``width`` characters in the middle, keeping its start and its end (run ids
    often differ only in a suffix), made literal for matplotlib (:func:`_plain`)."""
    text = str(text)
    if len(text) > width:
        head = (width - 3) // 3
        text = text[:head] + "..." + text[len(text) - (width - 3 - head):]
    return _plain(text)


def _known(value: Any) -> bool:
    import pandas as pd

    return value is not None and not (not isinstance(value, str) and bool(pd.isna(value))) and str(value) not in ("", "<NA>", "nan")


def family_colors(families: Sequence[Any]) -> dict[str, Any]:
    """A colour per family, stable for a given set (sorted; ``tab10``, ``tab20`` beyond ten);
    :data:`UNKNOWN_LABEL` grey."""
    from matplotlib import colormaps

    names = sorted({str(f) for f in families if _known(f)})
    palette = colormaps["tab10" if len(names) <= 10 else "tab20"]
    colors: dict[str, Any] = {name: palette(i % palette.N) for i, name in enumerate(names)}
    colors[UNKNOWN_LABEL] = "0.6"
    return colors


def _family_of(value: Any) -> str:
    return str(value) if _known(value) else UNKNOWN_LABEL


def plot_runs(
    table: RunsTable,
    *,
    color_by: str = "family",
    metric: str = "reward",
    normalise: bool = False,
    smooth: float = 0.0,
    logx: bool = False,
    ax: Axes | None = None,
    linewidth: float = 0.8,
    alpha: float = 0.75,
) -> Axes:
    """The logged curves of every run of a table, coloured by family or by model size.

    Parameters
    ----------
    table : RunsTable
    color_by : {"family", "size_b"}
        Family: one colour per family, with a legend. Size: a log colour scale with a colour bar;
        runs of unknown size are grey and dashed.
    metric : str
        The metric column to draw.
    normalise : bool
        Draw each run's metric on its reward range: ``(value - reward_min) / (reward_max -
        reward_min)`` from the metadata, else from the run's own observed range (rewards of
        different tasks then share one axis).
    smooth : float
        Draw a centred rolling mean over this share of each run's points (0: the raw points);
        sparse or noisy rewards read far better with 0.05-0.1.
    logx : bool
        A log step axis (runs of very different lengths).
    ax : matplotlib Axes, optional
    linewidth, alpha : float

    Returns
    -------
    matplotlib Axes
    """
    from bayesgrpo.errors import BayesGRPOError, UnknownMetricError

    if color_by not in ("family", "size_b"):
        raise BayesGRPOError(f"color_by={color_by!r}; choose 'family' or 'size_b'")
    if metric not in table.points.columns:
        raise UnknownMetricError(metric, table.metrics, "the runs table")
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.6))
    meta = table.runs.set_index("run_id")
    grouped = dict(tuple(table.points.groupby("run_id", sort=False)))
    if color_by == "family":
        colors = family_colors(list(meta["family"]))
    else:
        from matplotlib import colormaps
        from matplotlib.colors import LogNorm

        sizes = np.asarray(meta["size_b"], dtype=float)
        known = sizes[np.isfinite(sizes) & (sizes > 0)]
        low, high = (known.min(), known.max()) if known.size else (1.0, 10.0)
        if high <= low:
            low, high = low / 2.0, high * 2.0
        norm = LogNorm(vmin=low, vmax=high)
        from matplotlib.colors import ListedColormap

        # viridis without its palest yellows, which vanish on white
        cmap = ListedColormap(colormaps["viridis"](np.linspace(0.0, 0.85, 256)))
    labelled: set[str] = set()
    for run_id in table.run_ids:
        frame = grouped.get(run_id)
        if frame is None:
            continue
        frame = frame[np.isfinite(frame[metric].to_numpy(dtype=float))].sort_values("step")
        if frame.empty:
            continue
        y = frame[metric].to_numpy(dtype=float)
        if smooth > 0:
            window = max(1, round(smooth * len(y)))
            y = frame[metric].rolling(window, center=True, min_periods=max(1, window // 2)).mean().to_numpy(dtype=float)
        if normalise:
            low_b, high_b = float(meta.loc[run_id, "reward_min"]), float(meta.loc[run_id, "reward_max"])
            if not (np.isfinite(low_b) and np.isfinite(high_b) and high_b > low_b):
                low_b, high_b = float(y.min()), float(y.max())
            y = (y - low_b) / (high_b - low_b) if high_b > low_b else y - low_b
        style = "-"
        if color_by == "family":
            key = _family_of(meta.loc[run_id, "family"])
            color = colors[key]
        else:
            size = float(meta.loc[run_id, "size_b"])
            if np.isfinite(size) and size > 0:
                key, color = "_size", cmap(norm(size))
            else:
                key, color, style = f"size {UNKNOWN_LABEL}", "0.55", "--"
        label = _plain(key) if key not in labelled and not key.startswith("_") else "_nolegend_"
        labelled.add(key)
        ax.plot(frame["step"], y, style, color=color, linewidth=linewidth, alpha=alpha, label=label)
    if color_by == "size_b":
        from matplotlib.cm import ScalarMappable

        mappable = ScalarMappable(norm=norm, cmap=cmap)
        ax.figure.colorbar(mappable, ax=ax, label="model size (B parameters)")
    handles, labels = ax.get_legend_handles_labels()
    if labels:
        order = sorted(range(len(labels)), key=lambda i: (labels[i].endswith(UNKNOWN_LABEL), labels[i].lower()))
        legend = ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=7, frameon=False,
                           title="family" if color_by == "family" else None, title_fontsize=7)
        for line in legend.get_lines():
            line.set_linewidth(2.0)
            line.set_alpha(1.0)
    if logx:
        ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel("step")
    ax.set_ylabel(f"{metric} (share of its range)" if normalise else metric)
    ax.set_title(f"{len(table.run_ids)} runs", fontsize=9)
    return ax


def _one_run(cd: Any, index: int) -> Any:
    """The curve draws of one run of a ``CurveDraws``."""
    from bayesgrpo.questions.stopping import CurveDraws

    horizon = None if cd.horizon_step is None else np.asarray(cd.horizon_step)[[index]]
    return CurveDraws(
        curve=cd.curve,
        params={name: value[:, [index]] for name, value in cd.params.items()},
        step_scale=np.asarray(cd.step_scale)[[index]],
        reward_scale=np.asarray(cd.reward_scale)[[index]],
        horizon_step=horizon,
        run_ids=(cd.run_ids[index],),
        step_offset=cd.step_offset,
    )


def plot_fan(
    curve_draws: Any,
    run_id: str | None = None,
    *,
    observed: RunsTable | None = None,
    step_now: float | None = None,
    intervals: Sequence[float] = (0.5, 0.9),
    n_steps: int = 80,
    color: str = "C0",
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Fan chart of one run from draws of its curve (a fitted model's or a live update's).

    Parameters
    ----------
    curve_draws : bayesgrpo.questions.stopping.CurveDraws
        E.g. ``model.curve_draws()``, ``LiveUpdate.curve_draws``, ``TransferPrediction.curve_draws``.
    run_id : str, optional
        The run to draw (default the first of ``curve_draws``).
    observed : RunsTable, optional
        Logged points to draw (those of ``run_id``).
    step_now : float, optional
        Marks the current step (where the forecast starts).
    intervals : sequence of float
        Central interval masses, nested bands.
    n_steps : int
        Steps from 0 to the run's horizon (or its last logged step).
    color : str
    ax : matplotlib Axes, optional
    title : str, optional

    Returns
    -------
    matplotlib Axes
    """
    from bayesgrpo.errors import BayesGRPOError
    from bayesgrpo.questions.stopping import reward_at

    run_ids = list(curve_draws.run_ids)
    run_id = run_ids[0] if run_id is None else str(run_id)
    if run_id not in run_ids:
        raise BayesGRPOError(f"run {run_id!r} is not in the curve draws; they hold {run_ids[:5]}...")
    one = _one_run(curve_draws, run_ids.index(run_id))
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.2))
    points = observed.run(run_id) if observed is not None and run_id in set(observed.run_ids) else None
    end = float(one.horizon_step[0]) if one.horizon_step is not None else None
    if end is None or end <= 0:
        end = float(points["step"].max()) if points is not None else float(one.step_scale[0] + one.step_offset)
    steps = np.linspace(0.0, end, n_steps)
    values = reward_at(one, steps)[:, 0, :]
    for mass, alpha in zip(sorted(intervals, reverse=True), np.linspace(0.15, 0.35, len(intervals))):
        low, high = np.quantile(values, [0.5 - mass / 2, 0.5 + mass / 2], axis=0)
        ax.fill_between(steps, low, high, color=color, alpha=alpha, linewidth=0, label=f"{mass:.0%} interval")
    ax.plot(steps, values.mean(axis=0), color=color, linewidth=1.5, label="forecast mean")
    if points is not None:
        ax.plot(points["step"], points["reward"], ".", color="0.25", markersize=2.5, alpha=0.7, label="logged")
    if step_now is not None:
        ax.axvline(float(step_now), color="0.4", linestyle=":", linewidth=1, label="now")
    ax.set_xlim(0.0, end)
    ax.set_xlabel("step")
    ax.set_ylabel("reward")
    ax.set_title(title if title is not None else _short(run_id, 50), fontsize=8)
    return ax


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
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch

    from bayesgrpo.errors import BayesGRPOError

    missing = [c for c in ("step", "p_stop", "phase", "p_phase") if c not in history]
    if missing:
        raise BayesGRPOError(f"history lacks columns {missing}; build it with bayesgrpo.questions.history.stop_history")
    if len(history) == 0:
        raise BayesGRPOError("history is empty: nothing to draw")
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.2))
    frame = history.sort_values("step")
    steps = frame["step"].to_numpy(dtype=float)
    horizon = float(frame["horizon_step"].max()) if "horizon_step" in frame else float(steps[-1])
    # the phase at a cut describes the run up to it: each bar spans from the previous cut (or 0)
    starts = np.concatenate([[0.0], steps[:-1]])
    ends = steps
    band_low, band_height = -0.2, 0.14
    for name in [p for p in PHASE_COLORS if p in set(frame["phase"])] + sorted(set(frame["phase"]) - set(PHASE_COLORS)):
        chosen = (frame["phase"] == name).to_numpy()
        base = PHASE_COLORS.get(name, "0.5")
        faces = [to_rgba(base, alpha=float(np.clip(p, 0.05, 1.0))) for p in frame["p_phase"].to_numpy(dtype=float)[chosen]]
        spans = list(zip(starts[chosen], ends[chosen] - starts[chosen]))
        ax.broken_barh(spans, (band_low, band_height), facecolors=faces, edgecolor="none", label=name.replace("_", " "))
    ax.plot(steps, frame["p_stop"], "-o", color=color, markersize=3, linewidth=1.2, label=_rule_probability_label(frame))
    if threshold is not None:
        ax.axhline(float(threshold), color="0.4", linestyle="--", linewidth=0.8, label=f"threshold {threshold:g}")
    if "decision" in frame:
        stops = steps[(frame["decision"] == "stop").to_numpy()]
        if stops.size:
            ax.axvline(stops[0], color="C3", linestyle=":", linewidth=1.2, label=f"first stop (step {stops[0]:.0f})")
    ax.axhline(0.0, color="0.8", linewidth=0.5)
    ax.set_ylim(-0.23, 1.04)
    ax.set_xlim(0.0, horizon)
    ax.set_yticks([band_low + band_height / 2, 0.0, 0.5, 1.0])
    ax.set_yticklabels(["phase", "0", "0.5", "1"])
    ax.set_xlabel("step")
    ax.set_ylabel("probability")
    handles, labels = ax.get_legend_handles_labels()
    # phase patches at full colour in the legend (the bars' opacity varies)
    handles = [Patch(color=PHASE_COLORS.get(label.replace(" ", "_"), "0.5"), label=label)
               if label.replace(" ", "_") in PHASE_COLORS else h for h, label in zip(handles, labels)]
    ax.legend(handles, labels, fontsize=6, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return ax


def _fraction_table(source: Any, fractions: Sequence[float], interval: float) -> Any:
    import pandas as pd

    from bayesgrpo.errors import BayesGRPOError
    from bayesgrpo.questions.stopping import CurveDraws, steps_to_fraction

    if isinstance(source, pd.DataFrame):
        needed = {"run_id", "fraction", "median", "lower", "upper", "horizon_step"}
        if not needed <= set(source.columns):
            raise BayesGRPOError(f"the table lacks {sorted(needed - set(source.columns))}; pass steps_to_fraction's output")
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
    plt = _pyplot()
    order = (table[table["fraction"] == table["fraction"].min()]
             .assign(_key=lambda f: f["median"] / (f["horizon_step"] if relative else 1.0))
             .sort_values("_key", kind="stable")["run_id"].tolist())
    n_runs = len(order)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 1.0 + 0.18 * n_runs))
    row = {run_id: i for i, run_id in enumerate(order)}
    horizons = table.drop_duplicates("run_id").set_index("run_id")["horizon_step"].astype(float)
    scale = horizons if relative else horizons * 0 + 1.0
    limit = max_ratio if relative else max_ratio * float(np.nanmax(horizons)) if np.isfinite(horizons).any() else np.inf
    chosen = sorted(table["fraction"].unique())
    offsets = np.linspace(-0.2, 0.2, len(chosen)) if len(chosen) > 1 else [0.0]
    beyond_labelled = False
    for j, (fraction, offset) in enumerate(zip(chosen, offsets)):
        part = table[table["fraction"] == fraction]
        y = part["run_id"].map(row).to_numpy(dtype=float) + offset
        s = part["run_id"].map(scale).to_numpy(dtype=float)
        median = part["median"].to_numpy(dtype=float) / s
        lower = part["lower"].to_numpy(dtype=float) / s
        upper = part["upper"].to_numpy(dtype=float) / s
        shown = np.minimum(median, limit)
        ax.errorbar(shown, y, xerr=[shown - np.minimum(lower, limit), np.minimum(upper, limit) - shown], fmt="o",
                    color=f"C{j}", markersize=3, elinewidth=1, capsize=0, label=f"{fraction:.0%} of the gain")
        over = median > limit
        if over.any():
            ax.plot(np.full(over.sum(), limit), y[over], ">", color=f"C{j}", markersize=5,
                    label="_nolegend_" if beyond_labelled else f"beyond {max_ratio:g}x the horizon")
            beyond_labelled = True
    if relative:
        ax.axvline(1.0, color="k", linewidth=1, linestyle="--", label="horizon")
        ax.set_xlabel(f"step / horizon (median and {interval:.0%} interval)")
        ax.set_xlim(0.0, limit * 1.02)
    else:
        ax.plot(horizons.reindex(order).to_numpy(), np.arange(n_runs), "|", color="k", markersize=8, label="horizon")
        ax.set_xlabel(f"step (median and {interval:.0%} interval)")
        ax.set_xlim(0.0, limit * 1.02 if np.isfinite(limit) else None)
    ax.set_yticks(np.arange(n_runs))
    ax.set_yticklabels([_short(r, 45) for r in order], fontsize=6 if n_runs > 20 else 8)
    ax.set_ylim(n_runs - 0.5, -0.5)
    ax.legend(fontsize=7, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.set_title("steps to " + ", ".join(f"{f:.0%}" for f in chosen) + " of each run's total gain", fontsize=9)
    return ax


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
    from collections.abc import Mapping

    from bayesgrpo.errors import BayesGRPOError

    items = list(predictions.items()) if isinstance(predictions, Mapping) else [(p.curve_draws.run_ids[0], p) for p in predictions]
    if not items:
        raise BayesGRPOError("no transfer predictions to draw")
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.4))
    names = [str(name) for name, _ in items]
    truth_ids = set(truth_table.run_ids) if truth_table is not None else set()
    handles: list[Any] = []
    labels: list[str] = []
    end = 0.0
    for i, (name, prediction) in enumerate(items):
        table = prediction.table
        quantiles = sorted((c for c in table.columns if c.startswith("q") and c[1:].replace(".", "").isdigit()),
                           key=lambda c: float(c[1:]))
        color = f"C{i % 10}"
        handle: list[Any] = []
        what = "mean"
        if len(quantiles) >= 2:
            low, high = quantiles[0], quantiles[-1]
            handle.append(ax.fill_between(table["step"], table[low], table[high], color=color, alpha=0.2, linewidth=0))
            what = f"mean, {float(low[1:]):g}-{float(high[1:]):g}%"
        (line,) = ax.plot(table["step"], table["mean"], color=color, linewidth=1.6)
        handle.append(line)
        handles.append(tuple(handle))
        labels.append(f"{_short(name, 40)} ({what})")
        end = max(end, float(table["step"].max()))
        if name in truth_ids:
            points = truth_table.run(name)  # type: ignore[union-attr]
            (logged,) = ax.plot(points["step"], points["reward"], ".", color=color, markersize=2.5, alpha=0.8)
            handles.append(logged)
            labels.append(f"{_short(name, 40)}: logged")
            end = max(end, float(points["step"].max()))
    if truth_table is not None:
        context = [r for r in truth_table.run_ids if r not in names]
        for k, run_id in enumerate(context):
            points = truth_table.run(run_id)
            (line,) = ax.plot(points["step"], points["reward"], "-", color="0.65", linewidth=0.6, alpha=0.6, zorder=0)
            if k == 0:
                handles.append(line)
                labels.append("other logged runs")
    ax.set_xlim(0.0, end)
    ax.set_xlabel("step")
    ax.set_ylabel("reward")
    ax.legend(handles, labels, fontsize=6, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("transfer: predicted curves of new runs", fontsize=9)
    return ax


def _robust_limits(values: np.ndarray, pad: float = 0.05, log: bool = False) -> tuple[float, float]:
    """Axis limits holding every value but far outliers (beyond 3 interquartile ranges of the
    quartiles, on a log scale when ``log``): a heavy-tailed asymptote does not flatten the rest."""
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite) & ((finite > 0) if log else True)]
    if finite.size == 0:
        return (0.1, 10.0) if log else (0.0, 1.0)
    scaled = np.log(finite) if log else finite
    q1, q3 = np.quantile(scaled, [0.25, 0.75])
    fence = 3.0 * (q3 - q1)
    kept = scaled[(scaled >= q1 - fence) & (scaled <= q3 + fence)] if fence > 0 else scaled
    low, high = float(kept.min()), float(kept.max())
    span = high - low if high > low else max(abs(high), 1.0)
    low, high = low - pad * span, high + pad * span
    return (float(np.exp(low)), float(np.exp(high))) if log else (low, high)


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
    from matplotlib.lines import Line2D

    from bayesgrpo.questions.shrinkage import param_label, shrinkage_table

    frame = shrinkage_table(model, param, unpooled=unpooled) if table is None else table
    frame = frame.sort_values("pooled", kind="stable").reset_index(drop=True)
    plt = _pyplot()
    n_runs = len(frame)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 1.2 + 0.16 * n_runs))
    y = np.arange(n_runs, dtype=float)
    colors = family_colors(list(frame["family"]))
    run_colors = [colors[_family_of(f)] for f in frame["family"]]
    log = param not in ("r0", "r1", "asymptote")
    ax.hlines(y, frame["pooled_lower"], frame["pooled_upper"], colors=run_colors, linewidth=1, alpha=0.6)
    ax.quiver(frame["unpooled"], y, frame["pooled"] - frame["unpooled"], np.zeros(n_runs), angles="xy",
              scale_units="xy", scale=1.0, width=0.003, color="0.35", alpha=0.8)
    ax.scatter(frame["unpooled"], y, s=14, facecolors="none", edgecolors="0.3", linewidths=0.8, label="own fit (unpooled)", zorder=3)
    ax.scatter(frame["pooled"], y, s=14, c=run_colors, zorder=4)
    ax.scatter(frame["target"], y, marker="|", s=40, color="k", linewidths=1, label="pulled toward (family, task, size)", zorder=5)
    ax.axvline(float(frame["population"].iloc[0]), color="k", linestyle="--", linewidth=0.8, label="population mean")
    values = np.concatenate([frame["unpooled"], frame["pooled"], frame["target"]])
    if log:
        ax.set_xscale("log")
    ax.set_xlim(*_robust_limits(values, log=log))
    ax.set_yticks(y)
    ax.set_yticklabels([_short(r, 45) for r in frame["run_id"]], fontsize=6 if n_runs > 20 else 8)
    ax.set_ylim(n_runs - 0.5, -0.5)
    ax.set_xlabel(param_label(param))
    handles, labels = ax.get_legend_handles_labels()
    handles.insert(1, Line2D([], [], marker="o", color="0.3", markersize=4, linewidth=1))
    labels.insert(1, "partially pooled (median, 90%)")
    families = [f for f in colors if f in {_family_of(v) for v in frame["family"]}]
    handles += [Line2D([], [], marker="o", linestyle="", color=colors[f], markersize=4) for f in families]
    labels += [_plain(f) for f in families]
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
    from bayesgrpo.questions.shrinkage import param_label, scaling_table

    scaling = scaling_table(model, param, interval=interval)
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.6))
    runs = scaling.runs
    assert model.data is not None
    colors = family_colors(list(model.data.families))  # the colours of the other figures, whatever is shown
    # a multiplicative jitter, fixed per run so figures are reproducible
    jitter = np.exp(0.06 * np.sin(np.arange(len(runs)) * 2.399963))
    for family in sorted({_family_of(f) for f in runs["family"]}):
        part = runs[[_family_of(f) == family for f in runs["family"]]]
        x = part["size_b"].to_numpy() * jitter[part.index]
        median = part["median"].to_numpy()
        ax.errorbar(x, median, yerr=[median - part["lower"].to_numpy(), part["upper"].to_numpy() - median], fmt="o",
                    color=colors[family], markersize=3, elinewidth=0.8, alpha=0.8, capsize=0, label=_plain(family))
    values = [runs["median"].to_numpy()]
    if scaling.line is not None:
        line = scaling.line
        band = ax.fill_between(line["size_b"], line["lower"], line["upper"], color="k", alpha=0.12, linewidth=0)
        (mean_line,) = ax.plot(line["size_b"], line["median"], color="k", linewidth=1.5)
        values.append(line["median"].to_numpy())
    ax.set_xscale("log")
    sizes = runs["size_b"].to_numpy(dtype=float)
    if scaling.line is not None:  # the curve may reach sizes no shown run has (runs left out of a level)
        sizes = np.concatenate([sizes, scaling.line["size_b"].to_numpy(dtype=float)])
    if sizes.size:
        from matplotlib.ticker import NullFormatter

        ticks = [s for s in (0.5, 1, 2, 4, 8, 20, 32, 70, 140, 400) if sizes.min() / 1.3 <= s <= sizes.max() * 1.3]
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{s:g}" for s in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(*_robust_limits(np.concatenate(values), pad=0.15, log=param not in ("r0", "r1", "asymptote")))
    if param not in ("r0", "r1", "asymptote"):
        ax.set_yscale("log")
    ax.set_xlabel("model size (B parameters)")
    ax.set_ylabel(param_label(param))
    shown = [param, "r0"] if param != "asymptote" else ["r1", "r0"]
    rows = scaling.slopes.set_index("name")
    note = ", ".join(
        f"{p}_size_slope {rows.loc[f'{p}_size_slope', 'mean']:+.2f} "
        f"[{rows.loc[f'{p}_size_slope', 'lower']:+.2f}, {rows.loc[f'{p}_size_slope', 'upper']:+.2f}]"
        for p in dict.fromkeys(shown) if f"{p}_size_slope" in rows.index
    )
    if scaling.line is None:
        note = "no size slope in this model"
    if scaling.n_unknown_size:
        note += ("; " if note else "") + f"{scaling.n_unknown_size} runs of unknown size not shown"
    if scaling.n_own_range:
        note += ("; " if note else "") + f"{scaling.n_own_range} runs on their own reward range not shown"
    import textwrap

    ax.set_title("\n".join([f"{param} by model size", *textwrap.wrap(note, 80)]), fontsize=8)
    handles, labels = ax.get_legend_handles_labels()
    if scaling.line is not None:
        handles.insert(0, (band, mean_line))
        labels.insert(0, f"population (average family), {interval:.0%}")
    ax.legend(handles, labels, fontsize=6, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return ax
