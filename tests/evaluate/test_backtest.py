"""Backtest machinery: cuts, folds, Bayesian forecasts of held-out runs, online stopping."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytensor
import pytest

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.evaluate.backtest.calibration import (
    _smoothed_gain_draws,
    calibration_table,
    stop_probability_calibration,
)
from bayesgrpo.evaluate.backtest.cuts import BacktestError, cut_points, planned_horizon, prefix_table
from bayesgrpo.evaluate.backtest.forecast import bayes_forecast_draws, forecast_backtest, logged_reward_draws
from bayesgrpo.evaluate.backtest.populations import fold_assignment, kfold_populations
from bayesgrpo.evaluate.backtest.smoothing import cross_validated_window, dip_at_stop, smoothed_reward
from bayesgrpo.evaluate.backtest.stopping import (
    FixedFraction,
    MedianPruning,
    Patience,
    frontier,
    oracle_stop_bound,
    stop_candidates,
    stopping_backtest,
)
from bayesgrpo.logs.table import RunsTable, coerce_metadata
from bayesgrpo.model import reward_model as module
from bayesgrpo.model.simulate import simulate_runs
from bayesgrpo.questions.live import LiveForecaster
from bayesgrpo.questions.stopping import Decision, PlateauRule, reward_at
from tests.conftest import fake_sample

pytestmark = pytest.mark.usefixtures("ray_lock")  # this module starts Ray: one at a time (conftest)


def _table(curves: dict[str, tuple[np.ndarray, np.ndarray]], **metadata: dict[str, object]) -> RunsTable:
    """A runs table from ``run_id -> (steps, rewards)``; metadata columns given per run."""
    points = pd.concat(
        [
            pd.DataFrame(
                {"run_id": run_id, "step": np.asarray(s, dtype="int64"), "reward": np.asarray(r, dtype=float)}
            )
            for run_id, (s, r) in curves.items()
        ],
        ignore_index=True,
    )
    runs = pd.DataFrame(
        {"run_id": list(curves), **{k: [v.get(r) for r in curves] for k, v in metadata.items()}}
    )
    return RunsTable(points=points, runs=coerce_metadata(runs))


# --------------------------------------------------------------------------------------------
# Cuts, horizons, folds, smoothing
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "first, last, fraction, n_observed",
    [
        (1, 100, 0.25, 25),  # cut at 1 + 0.25 * 99 = 25.75
        (1, 100, 0.1, 10),  # 10.9
        (0, 434, 0.1, 44),  # 43.4: steps 0..43
        (0, 434, 0.5, 218),  # 217: inclusive
        (1, 50, 0.5, 25),  # 25.5
    ],
)
def test_cut_points_is_exact(first, last, fraction, n_observed):
    steps = np.arange(first, last + 1)
    frame = pd.DataFrame({"step": steps[::-1], "reward": np.linspace(0, 1, steps.size)})  # unsorted input
    cut = cut_points(frame, fraction)
    assert cut.step == pytest.approx(first + fraction * (last - first))
    assert len(cut.observed) == n_observed
    assert len(cut.observed) + len(cut.held_out) == steps.size
    assert cut.observed["step"].max() <= cut.step < cut.held_out["step"].min()
    assert cut.observed["step"].is_monotonic_increasing and cut.held_out["step"].is_monotonic_increasing


def test_cut_points_on_uneven_steps():
    frame = pd.DataFrame({"step": [0, 10, 20, 50, 100], "reward": [0.0, 1, 2, 3, 4]})
    cut = cut_points(frame, 0.25)  # 25
    assert cut.observed["step"].tolist() == [0, 10, 20] and cut.held_out["step"].tolist() == [50, 100]


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5])
def test_cut_points_rejects_fractions_outside_zero_one(fraction):
    with pytest.raises(BacktestError, match="strictly between"):
        cut_points(pd.DataFrame({"step": [1, 2, 3], "reward": [0.0, 1.0, 2.0]}), fraction)


@pytest.mark.parametrize("total_steps, expected", [(250.0, 250.0), (80.0, 100.0), (None, 100.0)])
def test_planned_horizon(total_steps, expected):
    table = _table({"a": (np.arange(1, 101), np.zeros(100))}, total_steps={"a": total_steps})
    assert planned_horizon(table) == expected


def test_fold_assignment_mixes_sources_and_balances_folds():
    sources = ["verl"] * 11 + ["unsloth"] * 7 + ["toolformer"] * 4 + ["other"] * 3
    run_ids = [f"r{i:02d}" for i in range(len(sources))]
    table = _table(
        {r: ([1, 2], [0.0, 1.0]) for r in run_ids}, source=dict(zip(run_ids, sources, strict=True))
    )
    folds = fold_assignment(table, 5, random_seed=3)
    assert set(folds) == set(run_ids)
    sizes = np.bincount(list(folds.values()), minlength=5)
    assert sizes.max() - sizes.min() <= 1
    by_source = pd.DataFrame({"source": sources, "fold": [folds[r] for r in run_ids]})
    spread = by_source.groupby("source")["fold"].nunique()
    counts = by_source.groupby("source").size()
    # a source's runs go to distinct folds until every fold has one
    assert (spread == np.minimum(counts, 5)).all()
    assert folds == fold_assignment(table, 5, random_seed=3)
    assert folds != fold_assignment(table, 5, random_seed=4)
    loo = fold_assignment(table, len(run_ids))
    assert sorted(loo.values()) == list(range(len(run_ids)))
    for bad in (1, len(run_ids) + 1):
        with pytest.raises(BacktestError, match="n_folds"):
            fold_assignment(table, bad)


@pytest.mark.parametrize(
    "rewards, fraction, expected",
    [
        (np.arange(10.0), 0.3, [0.5, 1, 2, 3, 4, 5, 6, 7, 8, 8.5]),  # window 3
        (np.arange(10.0), 0.4, [1, 1.5, 2, 3, 4, 5, 6, 7, 7.5, 8]),  # window 4 -> 5
        (np.array([0.0, 3.0, 0.0]), 0.1, [0.0, 3.0, 0.0]),  # window 1: unchanged
    ],
)
def test_smoothed_reward_is_a_centred_rolling_mean(rewards, fraction, expected):
    np.testing.assert_allclose(smoothed_reward(rewards, fraction), expected)


# --------------------------------------------------------------------------------------------
# Stopping backtest of the baseline rules on hand-made runs (answers known)
# --------------------------------------------------------------------------------------------


def _hand_made() -> RunsTable:
    steps = np.arange(1, 101)
    return _table(
        {
            "linear": (steps, steps.astype(float)),  # still rising at its end
            "plateau": (steps, np.minimum(steps, 20).astype(float)),  # rises to step 20, flat after
            "flat": (steps, np.ones(100)),  # flat from the start
            "peak": (steps, np.concatenate([np.arange(50.0), np.arange(50.0, 0.0, -1.0)])),  # up, then down
        }
    )


def _row(frame: pd.DataFrame, run_id: str, rule: str) -> pd.Series:
    return frame[(frame["run_id"] == run_id) & (frame["rule"] == rule)].iloc[0]


def test_fixed_fraction_saves_its_share_and_gives_up_what_the_curve_says():
    rules = {"ff80": FixedFraction(0.8), "ff50": FixedFraction(0.5), "full": FixedFraction(1.0)}
    result = stopping_backtest(_hand_made(), None, rules)
    assert len(result) == 4 * 3
    ff80 = _row(result, "plateau", "ff80")
    assert ff80["stop_step"] == 80 and ff80["steps_saved"] == pytest.approx(0.2)
    assert ff80["reward_given_up"] == 0.0 and ff80["stopped"]
    # a linear run: the smoothed (window 5, cut at the ends) max is the mean of steps 98-100 = 99;
    # at step 50 it is 50; the range is 99
    linear = _row(result, "linear", "ff50")
    assert linear["steps_saved"] == pytest.approx(0.5)
    assert linear["reward_given_up"] == pytest.approx((99 - 50) / 99)
    assert linear["reward_vs_end"] == pytest.approx((99 - 50) / 99)
    full = result[result["rule"] == "full"]
    assert (full["steps_saved"] == 0).all() and not full["stopped"].any()
    assert (full[full["run_id"] != "peak"]["reward_given_up"] == 0).all()
    # running a peaked run to its end gives up what it lost after the peak; stopping halfway does not
    assert _row(result, "peak", "full")["reward_given_up"] > 0.9
    assert _row(result, "peak", "ff50")["reward_given_up"] < 0.03
    assert _row(result, "peak", "ff50")["reward_vs_end"] < -0.9


def test_dip_at_stop_by_hand():
    steps = np.arange(1.0, 101.0)
    flat = np.ones(100)
    assert dip_at_stop(steps, flat, 50.0) == 0.0  # constant: no range, no dip
    # one low point at step 50 in an otherwise flat run (range 1)
    reward = np.ones(100)
    reward[49] = 0.0
    # window 5 points: the smoothed reward at step 50 is 4/5, the mean of the 11 points around it 10/11
    assert dip_at_stop(steps, reward, 50.0) == pytest.approx(4 / 5 - 10 / 11)
    assert dip_at_stop(steps, reward, 50.5) == pytest.approx(4 / 5 - 10 / 11)  # the point at or before
    assert dip_at_stop(steps, reward, 20.0) == pytest.approx(0.0)  # far from the dip
    # a linear rise: the centred means agree, no dip mid-run
    assert dip_at_stop(steps, steps, 50.0) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(BacktestError, match="one length"):
        dip_at_stop(steps, reward[:10], 5.0)


def test_stopping_rows_carry_the_dip_at_each_stop():
    table = _hand_made()
    result = stopping_backtest(table, None, {"ff50": FixedFraction(0.5), "full": FixedFraction(1.0)})
    peak = _row(result, "peak", "ff50")
    steps = np.arange(1.0, 101.0)
    rewards = np.concatenate([np.arange(50.0), np.arange(50.0, 0.0, -1.0)])
    assert peak["dip"] == pytest.approx(dip_at_stop(steps, rewards, 50.0))
    assert peak["dip"] > 0  # stopped on the peak: above the level around it
    assert _row(result, "flat", "ff50")["dip"] == 0.0
    assert "dip_mean" in frontier(result).columns


def test_patience_stops_a_flat_run_early_at_no_cost():
    result = stopping_backtest(_hand_made(), None, {"patience": Patience(patience=0.1, window=0.05)})
    flat = _row(result, "flat", "patience")
    # the first point sets the best; 10 points without improvement later: step 11
    assert flat["stop_step"] == 11 and flat["steps_saved"] == pytest.approx(0.89)
    assert flat["reward_given_up"] == 0.0
    assert not _row(result, "linear", "patience")["stopped"]
    # flat from step 20: the trailing mean of 5 points reaches 20 at step 24, then 10 points of patience
    assert _row(result, "plateau", "patience")["stop_step"] == 34


def test_median_pruning_compares_a_run_with_its_source_only():
    steps = np.arange(1, 101)
    curves = {f"good{c}": (steps, c * steps / 100.0) for c in (1, 2, 3, 4, 5)}
    curves["bad"] = (steps, 0.1 * steps / 100.0)
    curves["alone"] = (steps, 0.1 * steps / 100.0)
    sources = {r: "study" for r in curves} | {"alone": "elsewhere"}
    table = _table(curves, source=sources)
    result = stopping_backtest(table, None, {"median": MedianPruning(warmup_fraction=0.1, check_every=0.05)})
    assert _row(result, "bad", "median")["stop_step"] == 10  # first check after the warmup
    assert not _row(result, "alone", "median")["stopped"]  # no peers: never pruned
    assert not _row(result, "good5", "median")["stopped"]


def test_stop_candidates_are_the_checks_and_the_end_scored_as_the_backtest_scores_them():
    table = _hand_made()
    candidates = stop_candidates(table, 0.25)
    linear = candidates[candidates["run_id"] == "linear"]
    # checks at 25%, 50%, 75% of the span (steps 25, 50, 75: the last point at or before 1 + k * 24.75)
    assert linear["stop_step"].tolist() == [25.0, 50.0, 75.0, 100.0]
    assert linear["steps_saved"].tolist() == pytest.approx([0.75, 0.5, 0.25, 0.0])
    fixed = stopping_backtest(table, None, {"ff50": FixedFraction(0.5)})
    assert linear.iloc[1]["reward_vs_end"] == pytest.approx(_row(fixed, "linear", "ff50")["reward_vs_end"])
    assert (candidates.groupby("run_id")["steps_saved"].min() == 0).all()


def test_oracle_bound_by_hand():
    # run a: stop at 0.5 saved for 0.1 given up, or run on; run b: flat, stopping early is free
    candidates = pd.DataFrame(
        {
            "run_id": ["a", "a", "b", "b"],
            "steps_saved": [0.5, 0.0, 0.9, 0.0],
            "reward_vs_end": [0.1, 0.0, 0.0, 0.0],
        }
    )
    # within a mean of 0.05 given up, a may stop (mean 0.05): (0.5 + 0.9) / 2
    tight = oracle_stop_bound(candidates, 0.05)
    assert tight.saved == pytest.approx(0.7) and tight.given_up == pytest.approx(0.05)
    assert tight.saved_bound == pytest.approx(0.7, abs=1e-3)
    # within 0.02 only b stops; the dual bound is the hull's (a stopped "0.4 of the time": a mean
    # of 0.1 * 0.4 / 2 = 0.02 given up for (0.5 * 0.4 + 0.9) / 2 = 0.55 saved)
    loose = oracle_stop_bound(candidates, 0.02)
    assert loose.saved == pytest.approx(0.45) and loose.given_up == pytest.approx(0.0)
    assert loose.saved_bound == pytest.approx(0.55, abs=1e-3)
    with pytest.raises(BacktestError):
        oracle_stop_bound(candidates.iloc[:0], 0.01)


def test_no_rule_of_the_backtest_saves_more_than_the_oracle_bound():
    table = _hand_made()
    rules = {f"ff{f}": FixedFraction(f) for f in (0.3, 0.5, 0.8)} | {"patience": Patience(0.1, 0.05)}
    result = frontier(stopping_backtest(table, None, rules))
    candidates = stop_candidates(table, 0.05)
    for row in result.itertuples(index=False):
        bound = oracle_stop_bound(candidates, row.vs_end_mean)
        # the fixed fractions stop between checks: allow the checks' spacing
        assert row.steps_saved_mean <= bound.saved_bound + 0.05 + 1e-9


def test_frontier_summarises_and_marks_dominated_rules():
    rows = []
    for rule, saved, lost in (
        ("a", [0.5, 0.5], [0.0, 0.02]),
        ("b", [0.3, 0.3], [0.02, 0.02]),
        ("c", [0.6, 0.6], [0.05, 0.05]),
    ):
        for i in range(2):
            rows.append(
                {
                    "run_id": f"r{i}",
                    "rule": rule,
                    "kind": "x",
                    "steps_saved": saved[i],
                    "reward_given_up": lost[i],
                    "reward_vs_end": 0.0,
                    "stopped": saved[i] > 0,
                }
            )
    table = frontier(pd.DataFrame(rows)).set_index("rule")
    assert table.loc["a", "steps_saved_mean"] == pytest.approx(0.5)
    assert table.loc["a", "given_up_mean"] == pytest.approx(0.01)
    assert table.loc["a", "given_up_p90"] == pytest.approx(0.018)
    assert table.loc["a", "given_up_max"] == pytest.approx(0.02)
    assert table["on_frontier"].to_dict() == {"c": True, "a": True, "b": False}
    assert list(table.index) == ["c", "a", "b"]


def test_unknown_rules_and_missing_populations_are_errors():
    with pytest.raises(BacktestError, match="unknown stopping rule"):
        stopping_backtest(_hand_made(), None, {"x": 0.8})
    with pytest.raises(BacktestError, match="need populations"):
        stopping_backtest(_hand_made(), None, {"plateau": PlateauRule(0.01, 0.9, relative=True)})
    with pytest.raises(BacktestError, match="unknown methods"):
        forecast_backtest(_hand_made(), None, methods=("prophet",))
    with pytest.raises(BacktestError, match="needs populations"):
        forecast_backtest(_hand_made(), None, methods=("bayesgrpo",))


# --------------------------------------------------------------------------------------------
# Bayesian parts, on simulated runs with a mocked population fit (prior draws for a posterior)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kfold():
    """Six simulated runs, two folds, each population 'fitted' by prior draws (mocked sampling)."""
    sim = simulate_runs(n_runs=6, curve="weibull", n_steps=60, random_seed=3)
    original = module.sample_model
    module.sample_model = fake_sample
    try:
        with pytensor.config.change_flags(mode="FAST_COMPILE"):
            populations = kfold_populations(sim.table, n_folds=2, fit_kwargs={"draws": 40}, random_seed=1)
    finally:
        module.sample_model = original
    return sim.table, populations


def test_kfold_populations_never_saw_the_run_they_score(kfold):
    table, populations = kfold
    assert set(populations) == set(table.run_ids)
    models = {id(m): m for m in populations.values()}
    assert len(models) == 2
    for run_id, model in populations.items():
        assert run_id not in model.data.run_ids
        assert len(model.data.run_ids) == 3  # every run but its fold's


@pytest.mark.filterwarnings("ignore::bayesgrpo.model.laplace.LiveUpdateWarning")
def test_bayes_forecast_draws_use_only_the_prefix(kfold):
    table, populations = kfold
    run_id = table.run_ids[0]
    run = table.select([run_id])
    target = np.array([40.0, 50.0, 60.0])
    draws = bayes_forecast_draws(populations[run_id], run, cut=20, target_steps=target, n_draws=400, seed=5)
    assert draws.shape == (400, 3) and np.isfinite(draws).all()
    np.testing.assert_array_equal(
        draws,
        bayes_forecast_draws(populations[run_id], run, cut=20, target_steps=target, n_draws=400, seed=5),
    )
    # rewrite everything after the cut: the forecast must not move
    points = run.points.copy()
    points.loc[points["step"] > 20, "reward"] += 5.0
    changed = RunsTable(points=points, runs=run.runs, report=run.report)
    np.testing.assert_array_equal(
        draws,
        bayes_forecast_draws(populations[run_id], changed, cut=20, target_steps=target, n_draws=400, seed=5),
    )
    # and the draws hold one logged point's noise on top of the curve's uncertainty

    prefix = RunsTable(points=run.points[run.points["step"] <= 20], runs=run.runs, report=run.report)
    update = LiveForecaster(populations[run_id], n_draws=400, random_seed=5).update(prefix, horizon=60.0)
    curve = reward_at(update.curve_draws, target)[:, 0, :]
    np.testing.assert_allclose(np.median(draws, axis=0), np.median(curve, axis=0), atol=0.1)
    noise_sd = float(np.median(update.posterior.natural()["sigma"]) * update.curve_draws.reward_scale[0])
    assert np.all(draws.std(axis=0) > curve.std(axis=0))
    assert np.all(draws.std(axis=0) > 0.8 * noise_sd)


def test_forecast_backtest_plumbing(kfold):
    table, populations = kfold
    sub = table.select(table.run_ids[:2])
    cuts = (0.1, 0.5)
    methods = ("bayesgrpo", "persistence", "exp_least_squares")
    result = forecast_backtest(
        sub,
        populations,
        cuts=cuts,
        methods=methods,
        baseline_options={"exp_least_squares": {"n_boot": 20}},
        n_draws=200,
        random_seed=0,
    )
    assert len(result) == 2 * len(cuts) * len(methods)
    assert set(result["method"]) == set(methods)
    scored = ["crps", "lpd", "cover50", "cover90", "width50", "width90", "final_abs_error", "seconds"]
    assert np.isfinite(result[scored].to_numpy(dtype=float)).all()
    assert result[["cover50", "cover90"]].stack().between(0, 1).all()
    assert (result["width90"] >= result["width50"]).all() and (result["crps"] >= 0).all()
    # 61 points per run (steps 0..60): cut 0.1 at step 6 leaves 7 observed, 54 held out; final: 4 points
    first = result[(result["cut"] == 0.1)].iloc[0]
    assert (first["n_observed"], first["n_held_out"], first["n_final"]) == (7, 54, 4)
    # whether the prefix had left its update's band: bayesgrpo's rows say, the baselines' are empty
    assert set(result.loc[result["method"] == "bayesgrpo", "departure"]) <= {"", "above", "below", "noise"}
    assert (result.loc[result["method"] != "bayesgrpo", "departure"] == "").all()
    again = forecast_backtest(
        sub,
        populations,
        cuts=cuts,
        methods=methods,
        baseline_options={"exp_least_squares": {"n_boot": 20}},
        n_draws=200,
        random_seed=0,
    )
    pd.testing.assert_frame_equal(result.drop(columns="seconds"), again.drop(columns="seconds"))


def test_forecast_backtest_skips_cuts_with_too_few_points():
    table = _table({"short": (np.arange(1, 11), np.linspace(0, 1, 10))})
    result = forecast_backtest(table, None, cuts=(0.1, 0.5), methods=("persistence",), n_draws=50)
    assert result["cut"].tolist() == [0.5]  # 0.1 keeps 1 point


class _StopAt:
    """A stub Bayesian rule: stop once the step reaches ``step``; records what it was asked."""

    def __init__(self, step: float):
        self.step = step
        self.calls: list[tuple[float, float, int]] = []

    def decide(self, cd, step_now, horizon_step=None):
        self.calls.append((float(step_now), float(horizon_step), cd.n_runs))
        stop = step_now >= self.step
        return [
            Decision(
                run_id=cd.run_ids[0],
                rule="stub",
                decision="stop" if stop else "continue",
                probability=0.99 if stop else 0.1,
                reason="stub",
                step=float(step_now),
                horizon_step=float(horizon_step),
                expected_gain=0.0,
                gain_lower=0.0,
                gain_upper=0.0,
            )
        ]


def test_bayesian_rules_are_asked_online_on_the_prefix_only(kfold, monkeypatch):
    table, populations = kfold
    run_id = table.run_ids[1]
    seen: list[float] = []
    original = LiveForecaster.update

    def recording_update(self, run, *, horizon=None):
        seen.append(float(run.points["step"].max()))
        return original(self, run, horizon=horizon)

    monkeypatch.setattr(LiveForecaster, "update", recording_update)
    stub = _StopAt(31.0)
    rules = {"stub": stub, "plateau": PlateauRule(0.01, 0.9, relative=True), "ff": FixedFraction(0.8)}
    result = stopping_backtest(
        table.select([run_id]), populations, rules, check_every_fraction=0.1, n_draws=200
    )
    # steps 0..60, checks at every 10% of the span: 6, 12, ... 54; the stub stops at the first >= 31
    stub_row = _row(result, run_id, "stub")
    assert stub_row["stop_step"] == 36 and stub_row["steps_saved"] == pytest.approx(24 / 60)
    assert stub_row["probability"] == 0.99
    assert [c[0] for c in stub.calls] == [6, 12, 18, 24, 30, 36]
    assert all(c[1] == 60 and c[2] == 1 for c in stub.calls)
    # one live update per check, each of the prefix logged so far, until every Bayesian rule stopped
    assert seen[: len(stub.calls)] == [6, 12, 18, 24, 30, 36]
    plateau = _row(result, run_id, "plateau")
    assert plateau["stop_step"] in {6, 12, 18, 24, 30, 36, 42, 48, 54, 60}
    assert _row(result, run_id, "ff")["stop_step"] == 48
    assert set(result["kind"]) == {"bayes", "fixed_fraction"}


def test_a_failed_live_update_is_recorded_not_fatal(kfold, monkeypatch):
    table, populations = kfold

    def failing_update(self, run, *, horizon=None):
        raise BayesGRPOError("odd prefix")

    monkeypatch.setattr(LiveForecaster, "update", failing_update)
    sub = table.select(table.run_ids[:1])
    result = forecast_backtest(
        sub, populations, cuts=(0.5,), methods=("bayesgrpo", "persistence"), n_draws=50
    )
    bayes = result[result["method"] == "bayesgrpo"].iloc[0]
    assert np.isnan(bayes["crps"]) and bayes["status"].startswith("live update failed")
    assert result[result["method"] == "persistence"]["status"].iloc[0] == "ok"
    stops = stopping_backtest(sub, populations, {"plateau": PlateauRule(0.01, 0.9, relative=True)}, 0.25)
    assert not stops["stopped"].iloc[0]  # no answer at any check: the run goes to its end


# --------------------------------------------------------------------------------------------
# Cross-validated smoothing and the reliability of the stop probability
# --------------------------------------------------------------------------------------------


def test_cross_validated_window_is_wide_for_noise_and_narrow_for_a_clean_rise():
    rng = np.random.default_rng(0)
    noise = rng.normal(0.0, 1.0, 101)
    assert cross_validated_window(noise) >= 51
    steps = np.linspace(0.0, 1.0, 101)
    rise = 1.0 - np.exp(-8.0 * steps) + rng.normal(0.0, 0.002, 101)
    assert cross_validated_window(rise) <= 11
    assert cross_validated_window(np.array([1.0, 2.0])) == 1


def test_cross_validated_window_minimises_the_leave_one_out_error():
    rewards = np.array([0.0, 1.0, 0.0, 1.0, 5.0, 6.0, 5.0])

    def loo_error(window: int) -> float:  # by hand: each point from the others of its window
        half = window // 2
        errors = []
        for i in range(len(rewards)):
            others = [rewards[j] for j in range(max(0, i - half), min(len(rewards), i + half + 1)) if j != i]
            errors.append((rewards[i] - np.mean(others)) ** 2)
        return float(np.mean(errors))

    best = min((3, 5, 7), key=loo_error)
    assert cross_validated_window(rewards) == best


def test_smoothed_reward_cv_uses_the_cross_validated_window():
    rewards = np.random.default_rng(1).normal(0.0, 1.0, 41)
    window = cross_validated_window(rewards)
    assert np.allclose(smoothed_reward(rewards, "cv"), smoothed_reward(rewards, window / len(rewards)))
    with pytest.raises(BacktestError, match="cv"):
        smoothed_reward(rewards, "wide")


def test_calibration_scores_every_check_against_what_the_run_then_did(kfold):
    table, populations = kfold
    sub = table.select(table.run_ids[:2])
    checks = stop_probability_calibration(
        sub, populations, eps_values=(0.01, 0.05), check_every_fraction=0.25, n_draws=200
    )
    # steps 0..60: checks at 15, 30, 45 for each run and eps
    assert len(checks) == 2 * 3 * 2
    assert sorted(checks["step"].unique()) == [15.0, 30.0, 45.0]
    assert checks["probability"].between(0, 1).all()
    assert (checks["below"] == (checks["realised_gain"] < checks["eps"])).all()
    # a larger eps is never less likely
    wide = checks.pivot_table(index=["run_id", "step"], columns="eps", values="probability")
    assert (wide[0.05] >= wide[0.01]).all()
    # the realised gain is the smoothed reward's gain to the last step over the update's bounds
    run_id = sub.run_ids[0]
    points = sub.points[sub.points["run_id"] == run_id].sort_values("step")
    smooth = smoothed_reward(points["reward"].to_numpy(), "cv")
    row = checks[(checks["run_id"] == run_id) & (checks["step"] == 30.0)].iloc[0]
    at = int(np.searchsorted(points["step"].to_numpy(), 30.0))
    assert row["realised_gain"] == pytest.approx(smooth[-1] - smooth[at])  # bounds 0..1: unit 1
    summary = calibration_table(checks)
    assert summary.groupby("eps")["checks"].sum().tolist() == [6, 6]


def test_calibration_reads_the_realised_gain_on_a_reference_curve_when_given_one(kfold):
    table, populations = kfold
    sub = table.select(table.run_ids[:1])
    run_id = sub.run_ids[0]
    n = int((sub.points["run_id"] == run_id).sum())
    truth = np.linspace(0.0, 0.5, n)  # a known curve: the gain from point i to the end is known
    checks = stop_probability_calibration(
        sub,
        populations,
        eps_values=(0.01,),
        check_every_fraction=0.25,
        n_draws=200,
        reference={run_id: truth},
    )
    steps = np.sort(sub.points.loc[sub.points["run_id"] == run_id, "step"].to_numpy())
    smooth = smoothed_reward(
        sub.points.sort_values("step").loc[lambda f: f["run_id"] == run_id, "reward"], "cv"
    )
    for row in checks.itertuples(index=False):
        i = int(np.searchsorted(steps, row.step))
        assert row.realised_gain == pytest.approx(truth[-1] - truth[i])  # bounds 0..1: unit 1
        assert row.smoothed_gain == pytest.approx(smooth[-1] - smooth[i])  # the outcome without one
    with pytest.raises(BacktestError, match="reference curve"):
        stop_probability_calibration(
            sub, populations, check_every_fraction=0.25, reference={run_id: truth[:3]}
        )


def test_calibration_table_by_hand():
    frame = pd.DataFrame(
        {
            "run_id": ["a", "a", "b", "b", "c"],
            "step": [1.0, 2.0, 1.0, 2.0, 1.0],
            "progress": [0.5] * 5,
            "eps": [0.01] * 5,
            "probability": [0.1, 0.15, 0.92, 1.0, 0.97],
            "realised_gain": [0.5, 0.0, 0.0, 0.0, 0.3],
            "below": [False, True, True, True, False],
        }
    )
    out = calibration_table(frame, bins=(0.0, 0.5, 0.9, 1.0)).set_index("bin")
    low, high = out.loc["[0.0, 0.5)"], out.loc["[0.9, 1.0)"]
    assert low["checks"] == 2 and low["observed_share"] == 0.5 and low["stated_mean"] == pytest.approx(0.125)
    assert high["checks"] == 3 and high["runs"] == 2  # P = 1 falls in the last bin
    assert high["observed_share"] == pytest.approx(2 / 3)
    assert high["brier"] == pytest.approx(((0.92 - 1) ** 2 + 0 + 0.97**2) / 3)
    with pytest.raises(BacktestError):
        calibration_table(frame.iloc[:0])


def test_predictive_probability_counts_the_noise_the_reference_keeps(kfold):
    """The predictive draws are the smoothed gain of the points logged up to the check and drawn
    (curve plus noise) after it, smoothed like the reference: checked by hand on one draw.
    """
    table, populations = kfold
    run_id = table.run_ids[0]
    checks = stop_probability_calibration(
        table.select([run_id]), populations, eps_values=(0.01,), check_every_fraction=0.25, n_draws=300
    )
    assert checks["predictive_probability"].between(0, 1).all()

    points = table.points[table.points["run_id"] == run_id].sort_values("step")
    steps, rewards = points["step"].to_numpy(float), points["reward"].to_numpy(float)
    run = table.select([run_id])

    update = LiveForecaster(populations[run_id], n_draws=300, random_seed=0).update(
        prefix_table(run, points.iloc[:31]), horizon=60.0
    )
    gains = _smoothed_gain_draws(update, rewards, steps, 30, 5, seed=7)
    future = logged_reward_draws(update, steps[31:], seed=7)
    # by hand, draw 0: window 5 around point 30 (points 28..32) and the last 3 points (58..60)
    around = np.concatenate([rewards[28:31], future[0, :2]]).mean()
    end = future[0, -3:].mean()
    assert gains[0] == pytest.approx(end - around)
    assert gains.std() > 0


@pytest.mark.slow
def test_backtests_on_ray_give_the_serial_rows(kfold):
    table, populations = kfold
    options = {"cuts": (0.25, 0.5), "methods": ("bayesgrpo", "persistence"), "n_draws": 200, "random_seed": 0}
    serial = forecast_backtest(table, populations, **options)
    on_ray = forecast_backtest(table, populations, **options, workers=2)
    pd.testing.assert_frame_equal(serial.drop(columns="seconds"), on_ray.drop(columns="seconds"))
    rules = {
        "plateau": PlateauRule(0.01, 0.9, relative=True),
        "median": MedianPruning(warmup_fraction=0.1, check_every=0.05, n_startup_trials=1),
        "fixed": FixedFraction(0.5),
    }
    serial = stopping_backtest(table, populations, rules, 0.2, n_draws=200)
    pd.testing.assert_frame_equal(
        serial, stopping_backtest(table, populations, rules, 0.2, n_draws=200, workers=2)
    )


def test_a_ready_forecaster_cannot_be_sent_to_ray_workers(kfold):
    table, populations = kfold
    ready = {run_id: LiveForecaster(model, n_draws=50) for run_id, model in populations.items()}
    with pytest.raises(BayesGRPOError, match="ready forecaster"):
        forecast_backtest(table, ready, cuts=(0.5,), methods=("bayesgrpo",), n_draws=50, workers=2)
