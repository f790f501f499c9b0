"""Reward curves and forecasts: runs by family, one run's or many runs' forecast, fan charts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import ListedColormap, LogNorm

from bayesgrpo.errors import BayesGRPOError, NotFittedError, UnknownMetricError
from bayesgrpo.interfaces.plotting.style import (
    UNKNOWN_LABEL,
    family_colors,
    family_of,
    plain_label,
    pyplot,
    short_label,
    wrapped_label,
)
from bayesgrpo.model.draws import band_draws, check_band

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.reward_model import RewardModel


#: The legend's name of a fan chart's central line.
CENTRE_LABEL = "forecast median"


def plot_forecast(
    model: RewardModel,
    run_id: str,
    *,
    observed: RunsTable | None = None,
    ax: Axes | None = None,
    steps: Sequence[float] | np.ndarray | None = None,
    intervals: Sequence[float] = (0.5, 0.9),
    band: str = "predictive",
    include_noise: bool | None = None,
    color: str = "C0",
    title: str | None = None,
    random_seed: int | None = 0,
) -> Axes:
    """Fan chart of one run: observed rewards, forecast median and central intervals.

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
    band : {"predictive", "curve"}
        Bands of a logged reward, noise included (default: where logged points should fall), or
        of the expected reward (narrower). The legend names it.
    include_noise : bool, optional
        The older spelling of ``band``: True is ``"predictive"``, False ``"curve"``.
    color : str
    title : str, optional
    random_seed : int, optional
        Of the predictive band's noise.

    Returns
    -------
    matplotlib Axes
    """
    if include_noise is not None:
        band = "predictive" if include_noise else "curve"
    check_band(band)
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.2))
    data = model.data
    if data is None:
        raise NotFittedError("plot_forecast needs a fitted model")
    index = list(data.run_ids).index(run_id)
    if steps is None:
        steps = np.linspace(0, float(data.horizon_step[index]), 80)
    quantiles = sorted({q for mass in intervals for q in (0.5 - mass / 2, 0.5 + mass / 2)} | {0.5})
    forecast = model.forecast(
        steps=steps,
        runs=[run_id],
        quantiles=quantiles,
        include_noise=band == "predictive",
        random_seed=random_seed,
    )
    table = forecast.table
    for mass, alpha in zip(
        sorted(intervals, reverse=True), np.linspace(0.15, 0.35, len(intervals)), strict=True
    ):
        low = np.quantile(forecast.draws.sel(run=run_id).to_numpy(), 0.5 - mass / 2, axis=0)
        high = np.quantile(forecast.draws.sel(run=run_id).to_numpy(), 0.5 + mass / 2, axis=0)
        ax.fill_between(
            table["step"], low, high, color=color, alpha=alpha, linewidth=0, label=band_label(mass, band)
        )
    # the median, not the mean: with Student-t noise one draw far out moved the predictive mean
    # of the bundled runs by up to 17 at a step (issue 75)
    ax.plot(table["step"], table["q50"], color=color, linewidth=1.5, label=CENTRE_LABEL)
    if observed is not None and run_id in set(observed.run_ids):
        points = observed.run(run_id)
        ax.plot(
            points["step"], points["reward"], ".", color="0.25", markersize=2.5, alpha=0.7, label="logged"
        )
    fitted_until = (
        data.t[index, data.mask[index]].max() * data.progress_scale[index] / data.step_to_progress[index]
    )
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
    panel_size: tuple[float, float] | None = None,
    **kwargs: Any,
) -> Figure:
    """Fan charts of many runs on one figure (one panel per run); returns the figure.

    The figure is sized to the runs: one run is one readable chart, not one panel of a wide
    grid; panel titles are the whole run ids, wrapped to their panel, the axes are labelled once
    for the figure, and the legend wraps to the figure's width.

    Parameters
    ----------
    model : RewardModel
        A fitted model.
    run_ids : sequence of str, optional
        The runs to draw (default: every fitted run).
    observed : RunsTable, optional
        The logged points to draw.
    ncols : int
        Panels per row at most.
    panel_size : (float, float), optional
        Inches per panel (default: 6 x 3.6 for one run, 4 x 2.6 for two to four, 3.2 x 2.2 beyond).
    **kwargs
        Passed to :func:`plot_forecast` (``band``, ``intervals``...).

    Returns
    -------
    matplotlib Figure
    """
    plt = pyplot()
    assert model.data is not None
    run_ids = list(run_ids) if run_ids is not None else list(model.data.run_ids)
    ncols = max(1, min(ncols, len(run_ids)))
    if panel_size is None:
        panel_size = (6.0, 3.6) if len(run_ids) == 1 else (4.0, 2.6) if len(run_ids) <= 4 else (3.2, 2.2)
    nrows = int(np.ceil(len(run_ids) / ncols))
    title_chars = max(16, int(panel_size[0] * 11))  # fontsize 7: about 11 characters an inch
    title_lines = max(wrapped_label(r, title_chars).count("\n") + 1 for r in run_ids)
    panel_size = (panel_size[0], panel_size[1] + 0.12 * (title_lines - 1))
    figure, axes = plt.subplots(
        nrows, ncols, figsize=(panel_size[0] * ncols, panel_size[1] * nrows + 0.6), squeeze=False
    )
    for ax, run_id in zip(axes.ravel()[: len(run_ids)], run_ids, strict=True):
        plot_forecast(model, run_id, observed=observed, ax=ax, **kwargs)
        # the whole name, wrapped: run ids often differ only in their middle or at their end
        ax.set_title(wrapped_label(run_id, title_chars), fontsize=7 if len(run_ids) > 1 else 9)
        if len(run_ids) > 1:
            ax.set_xlabel("")
            ax.set_ylabel("")
            ax.tick_params(labelsize=6)
    if len(run_ids) > 1:  # one label an axis, for every panel
        figure.supxlabel("step", fontsize=9)
        figure.supylabel("reward", fontsize=9)
    for ax in axes.ravel()[len(run_ids) :]:
        ax.set_visible(False)
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    per_row = max(1, min(len(labels), int(panel_size[0] * ncols / 2.4)))  # a label is about 2.4 in
    rows = int(np.ceil(len(labels) / per_row))
    figure.legend(handles, labels, loc="upper center", ncol=per_row, fontsize=8, frameon=False)
    top = 1.0 - (0.12 + 0.18 * rows) / (panel_size[1] * nrows + 0.6)
    figure.tight_layout(rect=(0, 0, 1, top))
    return figure


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
    if color_by not in ("family", "size_b"):
        raise BayesGRPOError(f"color_by={color_by!r}; choose 'family' or 'size_b'")
    if metric not in table.points.columns:
        raise UnknownMetricError(metric, table.metrics, "the runs table")
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.6))
    meta = table.runs.set_index("run_id")
    grouped = dict(tuple(table.points.groupby("run_id", sort=False)))
    if color_by == "family":
        colors = family_colors(list(meta["family"]))
    else:
        norm, cmap = _size_colors(np.asarray(meta["size_b"], dtype=float))
    labelled: set[str] = set()
    for run_id in table.run_ids:
        frame = grouped.get(run_id)
        if frame is None:
            continue
        frame = frame[np.isfinite(frame[metric].to_numpy(dtype=float))].sort_values("step")
        if frame.empty:
            continue
        y = _curve_values(frame[metric], smooth)
        if normalise:
            y = _on_its_range(y, float(meta.loc[run_id, "reward_min"]), float(meta.loc[run_id, "reward_max"]))
        style = "-"
        if color_by == "family":
            key = family_of(meta.loc[run_id, "family"])
            color = colors[key]
        else:
            size = float(meta.loc[run_id, "size_b"])
            if np.isfinite(size) and size > 0:
                key, color = "_size", cmap(norm(size))
            else:
                key, color, style = f"size {UNKNOWN_LABEL}", "0.55", "--"
        label = plain_label(key) if key not in labelled and not key.startswith("_") else "_nolegend_"
        labelled.add(key)
        ax.plot(frame["step"], y, style, color=color, linewidth=linewidth, alpha=alpha, label=label)
    if color_by == "size_b":
        mappable = ScalarMappable(norm=norm, cmap=cmap)
        ax.figure.colorbar(mappable, ax=ax, label="model size (B parameters)")
    _sorted_legend(ax, title="family" if color_by == "family" else None)
    if logx:
        ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel("step")
    ax.set_ylabel(f"{metric} (share of its range)" if normalise else metric)
    ax.set_title(f"{len(table.run_ids)} runs", fontsize=9)
    return ax


def _size_colors(sizes: np.ndarray) -> tuple[LogNorm, ListedColormap]:
    """A log colour scale over the known model sizes (viridis without its palest yellows)."""
    known = sizes[np.isfinite(sizes) & (sizes > 0)]
    low, high = (known.min(), known.max()) if known.size else (1.0, 10.0)
    if high <= low:
        low, high = low / 2.0, high * 2.0
    # viridis without its palest yellows, which vanish on white
    return LogNorm(vmin=low, vmax=high), ListedColormap(colormaps["viridis"](np.linspace(0.0, 0.85, 256)))


def _curve_values(values: pd.Series, smooth: float) -> np.ndarray:
    """A run's values, smoothed by a centred rolling mean over ``smooth`` of its points when > 0."""
    y = values.to_numpy(dtype=float)
    if smooth <= 0:
        return y
    window = max(1, round(smooth * len(y)))
    return values.rolling(window, center=True, min_periods=max(1, window // 2)).mean().to_numpy(dtype=float)


def _on_its_range(y: np.ndarray, low: float, high: float) -> np.ndarray:
    """Values as shares of the run's stated reward range (its own range when none is stated)."""
    if not (np.isfinite(low) and np.isfinite(high) and high > low):
        low, high = float(y.min()), float(y.max())
    return (y - low) / (high - low) if high > low else y - low


def _sorted_legend(ax: Axes, title: str | None) -> None:
    """The legend sorted by label, unknown last, its lines drawn thick and opaque."""
    handles, labels = ax.get_legend_handles_labels()
    if not labels:
        return
    order = sorted(range(len(labels)), key=lambda i: (labels[i].endswith(UNKNOWN_LABEL), labels[i].lower()))
    legend = ax.legend(
        [handles[i] for i in order],
        [labels[i] for i in order],
        fontsize=7,
        frameon=False,
        title=title,
        title_fontsize=7,
    )
    for line in legend.get_lines():
        line.set_linewidth(2.0)
        line.set_alpha(1.0)


def _one_run(cd: Any, index: int) -> Any:
    """The curve draws of one run of a ``CurveDraws`` (its noise with it)."""
    return cd.select([cd.run_ids[index]])


def band_label(mass: float, band: str) -> str:
    """A legend entry that says which band it is: ``90% predictive band (a logged reward)``."""
    what = "a logged reward" if band == "predictive" else "the expected reward"
    return f"{mass:.0%} {band} band ({what})"


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
    band: str | None = None,
    random_seed: int | None = 0,
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
    band : {"predictive", "curve"}, optional
        Bands of a logged reward (noise included) or of the expected reward; default predictive
        when the draws carry the noise (``CurveDraws.has_noise``), else curve. The legend names it.
    random_seed : int, optional
        Of the predictive band's noise.

    Returns
    -------
    matplotlib Axes
    """
    band = check_band(band if band is not None else ("predictive" if curve_draws.has_noise else "curve"))
    run_ids = list(curve_draws.run_ids)
    run_id = run_ids[0] if run_id is None else str(run_id)
    if run_id not in run_ids:
        raise BayesGRPOError(f"run {run_id!r} is not in the curve draws; they hold {run_ids[:5]}...")
    one = _one_run(curve_draws, run_ids.index(run_id))
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.2))
    points = observed.run(run_id) if observed is not None and run_id in set(observed.run_ids) else None
    end = float(one.horizon_step[0]) if one.horizon_step is not None else None
    if end is None or end <= 0:
        end = (
            float(points["step"].max()) if points is not None else float(one.step_scale[0] + one.step_offset)
        )
    steps = np.linspace(0.0, end, n_steps)
    values = band_draws(one, steps, band, random_seed)[:, 0, :]
    for mass, alpha in zip(
        sorted(intervals, reverse=True), np.linspace(0.15, 0.35, len(intervals)), strict=True
    ):
        low, high = np.quantile(values, [0.5 - mass / 2, 0.5 + mass / 2], axis=0)
        ax.fill_between(steps, low, high, color=color, alpha=alpha, linewidth=0, label=band_label(mass, band))
    ax.plot(steps, np.median(values, axis=0), color=color, linewidth=1.5, label=CENTRE_LABEL)
    if points is not None:
        ax.plot(
            points["step"], points["reward"], ".", color="0.25", markersize=2.5, alpha=0.7, label="logged"
        )
    if step_now is not None:
        ax.axvline(float(step_now), color="0.4", linestyle=":", linewidth=1, label="now")
    ax.set_xlim(0.0, end)
    ax.set_xlabel("step")
    ax.set_ylabel("reward")
    ax.set_title(title if title is not None else short_label(run_id, 50), fontsize=8)
    return ax
