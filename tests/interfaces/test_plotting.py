"""Smoke tests of the plots (sampling mocked): they draw what they say on the axes given."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from bayesgrpo.interfaces.plotting import plot_forecast, plot_forecast_grid
from bayesgrpo.model.reward_model import NotFittedError, RewardModel
from bayesgrpo.model.simulate import simulate_runs


@pytest.fixture(scope="module")
def simulated():
    return simulate_runs(4, n_steps=60, observed_fraction=[1.0, 0.5], random_seed=2)


def test_fan_chart_draws_bands_mean_and_points_on_the_given_axes(mocked, simulated):
    model = RewardModel().fit(simulated.table)
    figure, ax = plt.subplots()
    returned = plot_forecast(model, "sim001", observed=simulated.table, ax=ax)
    assert returned is ax
    labels = [artist.get_label() for artist in ax.get_children()]
    bands = {"90% predictive band (a logged reward)", "50% predictive band (a logged reward)"}
    assert bands | {"forecast median", "logged", "end of fitted data"} <= set(labels)
    ax.clear()
    plot_forecast(model, "sim001", ax=ax, band="curve")
    assert "90% curve band (the expected reward)" in {artist.get_label() for artist in ax.get_children()}
    plt.close(figure)


def test_grid_has_one_visible_panel_per_run(mocked, simulated):
    model = RewardModel().fit(simulated.table)
    figure = plot_forecast_grid(model, observed=simulated.table, ncols=3)
    visible = [ax for ax in figure.axes if ax.get_visible()]
    assert len(visible) == 4
    plt.close(figure)


def test_unfitted_model_is_a_clear_error():
    with pytest.raises(NotFittedError):
        plot_forecast(RewardModel(), "x")


def _long_ids(table, prefix: str):
    """``table`` with run ids as long as real ones (notebook runs: 60-70 characters)."""
    rename = {r: f"{prefix}_{r}_GRPO_20250225_6a90f48_n68" for r in table.run_ids}
    points = table.points.assign(run_id=table.points["run_id"].map(rename))
    runs = table.runs.assign(run_id=table.runs["run_id"].map(rename))
    return type(table)(points, runs, table.report)


@pytest.mark.parametrize("n_runs", [1, 13])
def test_grid_is_readable_at_one_run_and_at_many(mocked, n_runs):
    table = _long_ids(
        simulate_runs(n_runs, n_steps=40, random_seed=4).table, "nb_unslothai_notebooks_Advanced_Llama3_1_8B"
    )
    model = RewardModel().fit(table)
    figure = plot_forecast_grid(model, observed=table)
    renderer = figure.canvas.get_renderer()
    figure.draw(renderer)
    visible = [ax for ax in figure.axes if ax.get_visible()]
    assert len(visible) == n_runs
    if n_runs == 1:  # one chart, not one small panel on a six-panel-wide canvas
        assert figure.get_size_inches()[0] <= 7
    for ax in visible:  # every title fits over its own panel, so none runs into a neighbour's
        title = ax.title.get_window_extent(renderer)
        panel = ax.get_window_extent(renderer)
        assert title.x0 >= panel.x0 - 15 and title.x1 <= panel.x1 + 15, ax.title.get_text()
    legend = figure.legends[0].get_window_extent(renderer)
    assert legend.x0 >= 0 and legend.x1 <= figure.bbox.x1  # the legend stays on the canvas
    # issue 75: every panel's whole run name, and the axes labelled (once, for many panels)
    for ax, run_id in zip(visible, model.data.run_ids, strict=True):
        assert ax.title.get_text().replace("\n", "") == run_id
    if n_runs > 1:
        assert figure.get_supxlabel() == "step" and figure.get_supylabel() == "reward"
    else:
        assert visible[0].get_xlabel() == "step" and visible[0].get_ylabel() == "reward"
    plt.close(figure)


def test_the_forecast_line_is_the_median_not_a_mean_one_draw_can_move(mocked, simulated):
    # issue 75: Student-t noise put a spike to -17 in the demo's predictive mean
    model = RewardModel().fit(simulated.table)
    figure, ax = plt.subplots()
    plot_forecast(model, "sim001", ax=ax, steps=np.linspace(0, 60, 7))
    line = next(line for line in ax.get_lines() if line.get_label() == "forecast median")
    table = model.forecast(
        steps=np.linspace(0, 60, 7),
        runs=["sim001"],
        quantiles=(0.05, 0.25, 0.5, 0.75, 0.95),
        include_noise=True,
        random_seed=0,
    ).table
    np.testing.assert_allclose(line.get_ydata(), table["q50"])
    plt.close(figure)
