"""Cross-model transfer: a new run's curve from the population (sampling mocked)."""

from __future__ import annotations

import pytest

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.logs.table import RunsTable
from bayesgrpo.questions.transfer import predict_new_run

BOUNDS = {"reward_min": 0.0, "reward_max": 1.0}


def test_zero_shot_prediction_is_a_curve_with_ordered_quantiles(population):
    model, _ = population
    prediction = predict_new_run(
        model, {"family": "qwen", "size_b": 7.0, **BOUNDS}, horizon=300, random_seed=0
    )
    table = prediction.table
    assert len(table) == 50 and table["step"].iloc[0] == 1 and table["step"].iloc[-1] == 300
    assert (table["step"] == table["step"].round()).all()  # a run's steps are whole numbers
    short = predict_new_run(model, {"family": "qwen", "size_b": 7.0, **BOUNDS}, horizon=20, random_seed=0)
    assert short.table["step"].tolist() == list(range(1, 21))  # no step twice
    assert (table["q05"] <= table["q50"]).all() and (table["q50"] <= table["q95"]).all()
    assert table[["q05", "q95"]].to_numpy().min() >= 0.0 and table[["q05", "q95"]].to_numpy().max() <= 1.0
    assert prediction.posterior.n_points == 0
    assert prediction.curve_draws.n_runs == 1


def test_initial_reward_pins_the_start(population):
    model, _ = population
    free = predict_new_run(model, {"family": "qwen", **BOUNDS}, horizon=300, steps=[1.0], random_seed=0).table
    pinned = predict_new_run(
        model, {"family": "qwen", "initial_reward": 0.62, **BOUNDS}, horizon=300, steps=[1.0], random_seed=0
    ).table
    assert abs(pinned["q50"].iloc[0] - 0.62) < 0.1
    assert (pinned["q95"] - pinned["q05"]).iloc[0] < (free["q95"] - free["q05"]).iloc[0]


def test_a_new_family_is_less_certain_than_a_known_one(population):
    model, _ = population
    known = predict_new_run(
        model, {"family": "qwen", **BOUNDS}, horizon=300, steps=[300.0], random_seed=0
    ).table
    new = predict_new_run(
        model, {"family": "a family never trained", **BOUNDS}, horizon=300, steps=[300.0], random_seed=0
    ).table
    assert (new["q95"] - new["q05"]).iloc[0] > (known["q95"] - known["q05"]).iloc[0]


def test_first_points_sharpen_the_prediction(population):
    model, sim = population
    run_id = sim.table.run_ids[0]
    one = sim.table.select([run_id])
    horizon = float(one.points["step"].max())
    first = one.points[one.points["step"] <= 0.2 * horizon].reset_index(drop=True)
    zero_shot = predict_new_run(
        model, one.runs.iloc[0].to_dict(), horizon=horizon, steps=[horizon], random_seed=0
    )
    updated = predict_new_run(
        model,
        one.runs.iloc[0].to_dict(),
        horizon=horizon,
        steps=[horizon],
        random_seed=0,
        first_points=RunsTable(points=first, runs=one.runs, report=one.report),
    )
    assert updated.posterior.n_points > 0

    def width(t):
        return float((t["q95"] - t["q05"]).iloc[0])

    assert width(updated.table) < width(zero_shot.table)


def test_zero_shot_needs_the_reward_range(population):
    model, _ = population
    with pytest.raises(BayesGRPOError, match="reward_min and reward_max"):
        predict_new_run(model, {"family": "qwen"}, horizon=300)
    with pytest.raises(BayesGRPOError, match="horizon"):
        predict_new_run(model, {"family": "qwen", **BOUNDS}, horizon=1)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"initial_reward": "high"}, "initial_reward must be a number"),
        ({"initial_reward": 0.3, "initial_reward_sd": "tiny"}, "initial_reward_sd must be a number"),
        ({"initial_reward": 0.3, "initial_reward_sd": 0.0}, "must be positive"),
    ],
)
def test_a_bad_initial_reward_is_an_error_not_ignored(population, extra, message):
    model, _ = population
    with pytest.raises(BayesGRPOError, match=message):
        predict_new_run(model, {"family": "qwen", **BOUNDS, **extra}, horizon=300, random_seed=0)
    # a missing one (None, NaN, as a table row gives it) is simply not used
    predict_new_run(
        model, {"family": "qwen", "initial_reward": float("nan"), **BOUNDS}, horizon=300, random_seed=0
    )
