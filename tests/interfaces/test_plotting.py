"""Smoke tests of the plots (sampling mocked): they draw what they say on the axes given."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
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
    assert bands | {"forecast mean", "logged", "end of fitted data"} <= set(labels)
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
