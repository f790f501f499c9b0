"""Transfer evaluation helpers, on simulated runs with a mocked population (prior draws)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.evaluate.backtest.cuts import BacktestError
from bayesgrpo.evaluate.transfer_eval.metadata import (
    known_reward_bounds,
    population_mean_metadata,
    prefix_label,
    zero_shot_metadata,
)
from bayesgrpo.evaluate.transfer_eval.populations import (
    run_out_populations,
    size_groups,
    size_out_populations,
)
from bayesgrpo.evaluate.transfer_eval.scoring import WHOLE_CURVE, transfer_scores
from bayesgrpo.evaluate.transfer_eval.summary import improvement_over, transfer_summary
from bayesgrpo.logs.table import RunsTable
from bayesgrpo.model.simulate import simulate_runs

# --------------------------------------------------------------------------------------------
# Pure helpers
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"reward_min": 0.0, "reward_max": 1.0}, (0.0, 1.0)),
        ({"reward_min": -2, "reward_max": "3"}, (-2.0, 3.0)),
        ({"reward_min": 0.0}, None),
        ({"reward_min": pd.NA, "reward_max": 1.0}, None),
        ({"reward_min": np.nan, "reward_max": 1.0}, None),
        ({"reward_min": 1.0, "reward_max": 1.0}, None),
        ({"reward_min": 2.0, "reward_max": 1.0}, None),
    ],
)
def test_known_reward_bounds(metadata, expected):
    assert known_reward_bounds(metadata) == expected


def test_zero_shot_metadata_keeps_covariates_and_range_and_nothing_of_the_data():
    row = {
        "run_id": "r",
        "family": "Qwen",
        "size_b": 7.0,
        "task": pd.NA,
        "group_size": 5,
        "batch_size": np.nan,
        "reward_min": 0.0,
        "reward_max": 1.0,
        "total_steps": 300,
        "source": "x",
        "manifest_n_points": 99,
    }
    meta = zero_shot_metadata(row)
    assert meta == {
        "run_id": "r",
        "family": "Qwen",
        "size_b": 7.0,
        "group_size": 5,
        "reward_min": 0.0,
        "reward_max": 1.0,
    }
    assert zero_shot_metadata(row, initial_reward=0.25)["initial_reward"] == 0.25
    assert population_mean_metadata(row) == {"run_id": "r", "reward_min": 0.0, "reward_max": 1.0}


@pytest.mark.parametrize(("fraction", "label"), [(0.05, "5pct"), (0.1, "10pct"), (0.25, "25pct")])
def test_prefix_label(fraction, label):
    assert prefix_label(fraction) == label


def _sized_table(sizes) -> RunsTable:
    sim = simulate_runs(n_runs=len(sizes), n_steps=30, random_seed=0)
    runs = sim.table.runs.copy()
    runs["size_b"] = pd.array(sizes, dtype="Float64")
    return RunsTable(points=sim.table.points, runs=runs, report=sim.table.report)


def test_size_groups_drop_unknown_sizes_and_small_groups():
    table = _sized_table([7.0, 0.5, 7.0, None, 0.5, 14.0, 7.0])
    ids = table.run_ids
    assert size_groups(table) == {0.5: [ids[1], ids[4]], 7.0: [ids[0], ids[2], ids[6]]}
    assert size_groups(table, min_runs=3) == {7.0: [ids[0], ids[2], ids[6]]}
    assert size_groups(table, min_runs=1)[14.0] == [ids[5]]


def test_improvement_over_is_relative_to_the_baseline_on_shared_runs():
    rows = [
        # run a: zero_shot 0.1 vs mean 0.2; run b: 0.3 vs 0.2; run c: baseline only
        ("a", "zero_shot", 0.1, 0.05),
        ("a", "population_mean", 0.2, 0.10),
        ("b", "zero_shot", 0.3, 0.05),
        ("b", "population_mean", 0.2, 0.10),
        ("c", "population_mean", 9.0, 9.0),
    ]
    frame = pd.DataFrame(rows, columns=["run_id", "method", "crps", "final_abs_error"]).assign(
        split="s", window=WHOLE_CURVE
    )
    out = improvement_over(frame).set_index("method").loc["zero_shot"]
    assert out["runs"] == 2
    assert out["crps_mean_gain"] == pytest.approx(1 - 0.2 / 0.2)
    assert out["final_err_mean_gain"] == pytest.approx(0.5)
    assert out["crps_wins"] == "1/2"


# --------------------------------------------------------------------------------------------
# Scores on the mocked population (tests/conftest.py `population`)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scored(population):
    model, sim = population
    table = sim.table.select(sim.table.run_ids[:3])
    runs = table.runs.copy()
    runs.loc[runs["run_id"] == table.run_ids[2], ["reward_min", "reward_max"]] = np.nan  # no known range
    table = RunsTable(points=table.points, runs=runs, report=table.report)
    populations = {run_id: model for run_id in table.run_ids}
    frame = transfer_scores(
        table, populations, split="test", prefixes=(0.05, 0.1), n_draws=200, random_seed=0
    )
    return table, frame


def test_transfer_scores_rows_methods_and_windows(scored):
    table, frame = scored
    with_range, without = table.run_ids[:2], table.run_ids[2]
    windows = {WHOLE_CURVE, "after_5pct", "after_10pct"}
    for run_id in with_range:
        part = frame[frame["run_id"] == run_id]
        # 3 zero-shot methods x 3 windows + 2 prefix methods x 1 window x 2 prefixes
        assert len(part) == 3 * 3 + 2 * 2
        assert set(part["window"]) == windows
        by_window = part.groupby("window")["method"].apply(set)
        assert by_window[WHOLE_CURVE] == {"zero_shot", "zero_shot_initial", "population_mean"}
        assert by_window["after_5pct"] == {
            "zero_shot",
            "zero_shot_initial",
            "population_mean",
            "after_5pct",
            "run_alone_5pct",
        }
    part = frame[frame["run_id"] == without]
    assert set(part["method"]) == {"after_5pct", "run_alone_5pct", "after_10pct", "run_alone_10pct"}
    assert (frame["split"] == "test").all()
    assert frame["crps"].notna().all() and (frame["crps"] > 0).all()


def test_windows_score_the_right_points(scored):
    table, frame = scored
    n = len(table.points[table.points["run_id"] == table.run_ids[0]])  # 201 points on steps 0..200
    part = frame[frame["run_id"] == table.run_ids[0]].groupby("window")["n_scored"].unique()
    assert list(part[WHOLE_CURVE]) == [n - 1]
    assert list(part["after_5pct"]) == [n - 11]  # steps 0..10 observed
    assert list(part["after_10pct"]) == [n - 21]


def test_a_prefix_update_beats_the_population_mean_after_it(scored):
    _, frame = scored
    mean = frame[frame["window"] == "after_10pct"].groupby("method")["crps"].mean()
    assert mean["after_10pct"] < mean["population_mean"]


def test_summary_and_improvement_cover_every_group(scored):
    _, frame = scored
    summary = transfer_summary(frame)
    assert len(summary) == frame.groupby(["split", "window", "method"]).ngroups
    gains = improvement_over(frame)
    assert set(gains["window"]) == {WHOLE_CURVE, "after_5pct", "after_10pct"}
    assert "population_mean" not in set(gains["method"])
    with pytest.raises(BacktestError):
        transfer_summary(frame.iloc[:0])


def test_transfer_scores_rejects_bad_prefixes(scored):
    table, _ = scored
    with pytest.raises(BacktestError, match="prefix"):
        transfer_scores(table, {}, split="s", prefixes=(0.0,))


# --------------------------------------------------------------------------------------------
# Leave one size out never fits on the held-out size
# --------------------------------------------------------------------------------------------


def test_size_out_populations_never_fit_the_held_out_size(mocked):
    table = _sized_table([0.5, 7.0, 0.5, 7.0, None, 3.0])
    populations = size_out_populations(table, fit_kwargs={"draws": 10}, random_seed=1)
    sizes = dict(zip(table.run_ids, pd.to_numeric(table.runs["size_b"]).astype(float), strict=True))
    assert set(populations) == {r for r, s in sizes.items() if s in (0.5, 7.0)}
    assert len({id(m) for m in populations.values()}) == 2
    for run_id, model in populations.items():
        fitted = set(model.data.run_ids)
        same_size = {r for r, s in sizes.items() if s == sizes[run_id]}
        assert fitted == set(table.run_ids) - same_size  # the unknown-size and 3B runs stay in


def test_size_out_populations_rejects_sizes_without_a_group():
    table = _sized_table([0.5, 7.0, 0.5])
    with pytest.raises(BacktestError, match="fewer than 2 runs"):
        size_out_populations(table, sizes=[7.0])
    with pytest.raises(BacktestError, match="no model size"):
        size_out_populations(table, min_runs=5)


def test_run_out_populations_hold_out_each_stated_run_alone(mocked):
    table = _sized_table([0.5, 7.0, 3.0, 7.0])
    runs = table.runs.copy()
    runs.loc[[1, 3], ["reward_min", "reward_max"]] = np.nan  # two runs state no range
    table = RunsTable(points=table.points, runs=runs, report=table.report)
    populations = run_out_populations(table, fit_kwargs={"draws": 10}, random_seed=1)
    stated = [table.run_ids[0], table.run_ids[2]]
    assert sorted(populations) == sorted(stated)
    for run_id, model in populations.items():
        assert set(model.data.run_ids) == set(table.run_ids) - {run_id}
    with pytest.raises(BacktestError, match="not in the table"):
        run_out_populations(table, ["nope"])
