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
    from bayesgrpo.table import RunsTable


def _pyplot() -> Any:
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline") and not _interactive():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _interactive() -> bool:
    import sys

    return hasattr(sys, "ps1") or "ipykernel" in sys.modules


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
