"""The Optuna pruner on real studies (SQLite storage) whose trials replay bundled reward curves."""

from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys
import textwrap

import numpy as np
import optuna
import pytest

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.evaluate.backtest import source_groups
from bayesgrpo.integrations.optuna import ATTR, PRUNER_LIKELIHOOD_WEIGHT, RewardCurvePruner, trial_table
from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.questions.live import DEFAULT_LIKELIHOOD_WEIGHT, LiveForecaster

optuna.logging.set_verbosity(optuna.logging.WARNING)
SOURCE = "volcengine/verl (refs/pull/3389/head)"  # 7 runs of one recipe, 116 steps, accuracy 0..1


@pytest.fixture(scope="module")
def curves() -> list[np.ndarray]:
    """The rewards of the seven runs of one verl pull request, step by step (steps 1..116)."""
    table = load_bundled(warn=False)
    runs = source_groups(table)[SOURCE]
    return [table.run(r)["reward"].to_numpy(dtype=float) for r in runs]


def replay(curves, order, *, direction="maximize"):
    """An objective whose trial k reports curve ``order[k]`` step by step and returns its final
    reward (the mean of its last 10 values), as a training run evaluated at every step would.
    """
    spent = []

    def objective(trial):
        rewards = curves[order[trial.number]]
        for step, reward in enumerate(rewards, start=1):
            trial.report(1.0 - reward if direction == "minimize" else reward, step)  # a loss, minimised
            if trial.should_prune():
                spent.append(step)
                raise optuna.TrialPruned()
        spent.append(len(rewards))
        final = float(np.mean(rewards[-10:]))
        return final if direction == "maximize" else 1.0 - final

    return objective, spent


def pruner(**kwargs):
    settings = {
        "horizon": 116,
        "n_startup_trials": 2,
        "n_warmup_steps": 20,
        "interval_steps": 10,
        "metadata": {"reward_min": 0.0, "reward_max": 1.0},
        "min_prob_beat_best": 0.05,
        "random_seed": 0,
    }
    return RewardCurvePruner(**{**settings, **kwargs})


def best_first(curves):
    """The order best run first: every later trial has a best to lose against."""
    return list(np.argsort([-np.mean(c[-10:]) for c in curves]))


def test_a_study_on_sqlite_prunes_trials_that_cannot_win_and_stores_why(curves, tmp_path):
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(study_name="grpo-lr", storage=storage, direction="maximize", pruner=pruner())
    order = best_first(curves)
    objective, spent = replay(curves, order)
    study.optimize(objective, n_trials=len(curves))

    states = [t.state for t in study.trials]
    assert states[:2] == [optuna.trial.TrialState.COMPLETE] * 2  # the startup trials
    assert optuna.trial.TrialState.PRUNED in states
    assert study.best_trial.number == 0  # the best run is never pruned: it was run first here
    assert sum(spent) < 116 * len(curves)

    reloaded = optuna.load_study(study_name="grpo-lr", storage=storage)  # what the storage kept
    for trial in reloaded.trials:
        attrs = trial.user_attrs
        if trial.state == optuna.trial.TrialState.PRUNED:
            assert attrs[f"{ATTR}decision"] == "prune"
            assert attrs[f"{ATTR}p_beat_best"] < 0.05
            assert "P(final value beats the best trial's" in attrs[f"{ATTR}reason"]
            assert attrs[f"{ATTR}final_q05"] <= attrs[f"{ATTR}final_q50"] <= attrs[f"{ATTR}final_q95"]
        elif trial.number >= 2:
            assert attrs[f"{ATTR}decision"] == "continue"
        else:
            assert attrs[f"{ATTR}decision"] == "waiting" and "startup" in attrs[f"{ATTR}reason"]


def test_a_minimised_objective_is_pruned_as_the_same_reward_maximised(curves):
    order = best_first(curves)
    pruned = {}
    for direction in ("maximize", "minimize"):
        study = optuna.create_study(direction=direction, pruner=pruner())
        objective, _ = replay(curves, order, direction=direction)
        study.optimize(objective, n_trials=len(curves))
        pruned[direction] = [t.number for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    assert pruned["maximize"] == pruned["minimize"] and pruned["maximize"]


def test_startup_warm_up_and_interval_are_respected(curves):
    study = optuna.create_study(direction="maximize", pruner=pruner(n_startup_trials=3, n_warmup_steps=30))
    objective, _ = replay(curves, best_first(curves))
    study.optimize(objective, n_trials=len(curves))
    checked = study.pruner.checks
    assert {c.step for c in checked} <= {30 + 10 * k for k in range(10)}
    assert all(c.decision == "waiting" for c in checked if c.p_beat_best != c.p_beat_best)  # NaN: no forecast
    for trial in study.trials[:3]:
        assert trial.state == optuna.trial.TrialState.COMPLETE


def test_checks_fall_on_sparse_steps_and_default_to_shares_of_the_horizon(curves):
    """A trial reporting every 10 steps is checked at the first report on or past each check
    point (``interval_steps`` 25 never divides its steps from 20); by default from 10% of its
    horizon, every 5%: about 20 checks however long the trial.
    """

    def every_tenth(trial):
        for step, reward in enumerate(curves[0], start=1):
            trial.report(float(reward), 10 * step)
            trial.should_prune()
        return float(curves[0][-1])

    for kwargs, expected in (
        ({"n_warmup_steps": 20, "interval_steps": 25}, [20, 50, 70, 100, 120, 150]),
        ({"n_warmup_steps": None, "interval_steps": None}, [120, 180, 240, 290, 350, 410]),
    ):
        study = optuna.create_study(
            direction="maximize", pruner=pruner(horizon=1160, n_startup_trials=5, **kwargs)
        )
        study.optimize(every_tenth, n_trials=1)
        steps = [c.step for c in study.pruner.checks]
        assert steps[:6] == expected
        assert all(c.decision == "waiting" for c in study.pruner.checks)
    assert len(steps) == 19  # 116 .. 1160 every 58


def test_an_unreliable_forecast_is_not_acted_on_and_skips_the_mcmc_fallback(curves, monkeypatch):
    original = LiveForecaster.update
    asked = []

    def unreliable(self, run, **kwargs):
        asked.append(kwargs["mcmc_fallback"])
        update = original(self, run, **kwargs)
        return dataclasses.replace(update, posterior=dataclasses.replace(update.posterior, pareto_k=1.5))

    monkeypatch.setattr(LiveForecaster, "update", unreliable)
    study = optuna.create_study(direction="maximize", pruner=pruner())
    objective, spent = replay(curves, best_first(curves))
    study.optimize(objective, n_trials=4)
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    forecasts = [c for c in study.pruner.checks if c.decision != "waiting"]
    assert forecasts and all(c.decision == "undecided" and "Pareto k 1.50" in c.reason for c in forecasts)
    assert asked and not any(asked)


def test_a_failing_forecast_never_prunes_and_is_said_once(curves, monkeypatch, caplog):
    def broken(self, run, *, horizon=None, reach=None, mcmc_fallback=True):
        raise BayesGRPOError("the population file is damaged")

    monkeypatch.setattr(LiveForecaster, "update", broken)
    study = optuna.create_study(direction="maximize", pruner=pruner())
    objective, spent = replay(curves, best_first(curves))
    with caplog.at_level(logging.WARNING, logger="bayesgrpo.integrations.optuna"):
        study.optimize(objective, n_trials=4)
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    assert spent == [116] * 4
    errors = [c for c in study.pruner.checks if c.decision == "error"]
    assert errors and "damaged" in errors[0].reason
    assert study.trials[-1].user_attrs[f"{ATTR}decision"] == "error"
    assert sum("failed" in r.getMessage() for r in caplog.records) == 1


def test_a_late_riser_without_a_stated_range_is_read_on_the_studys_span():
    """The gpt-oss 2048-game notebook: its best run (1,000 steps) sits near 0 for its first tenth
    and climbs to 22; its other runs end at -1 to 5. Run last, after the others finished, with no
    reward range given: read on its own flat start it looks like a run whose range is its noise.
    """
    table = load_bundled(warn=False)
    source = next(s for s in source_groups(table) if "2048" in s)
    runs = source_groups(table)[source]
    rewards = [table.run(r)["reward"].to_numpy(dtype=float) for r in runs]
    lengths = [len(c) for c in rewards]
    order = list(np.argsort([np.mean(c[-max(1, len(c) // 10) :]) for c in rewards]))  # best last
    decisions = {}
    for reach in (True, False):
        study = optuna.create_study(
            direction="maximize",
            pruner=RewardCurvePruner(
                horizon=lambda trial: lengths[order[trial.number]],
                n_startup_trials=2,
                n_warmup_steps=26,
                interval_steps=13,
                min_prob_beat_best=0.05,
                study_reach=reach,
                random_seed=0,
            ),
        )
        objective, _ = replay(rewards, order)
        study.optimize(objective, n_trials=len(rewards))
        decisions[reach] = study.trials[-1].state
    assert decisions[False] in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    assert decisions[True] == optuna.trial.TrialState.COMPLETE
    # without the study's span the decision hangs on the population's draws: the shipped population
    # of 2026-11-26 pruned this run (what study_reach is for), its refit by the single-precision
    # sampler of 2026-11-27 lets it finish; the span makes it finish whatever the draws


def test_a_population_is_fitted_on_the_studys_finished_trials(curves, mocked, tmp_path):
    study = optuna.create_study(
        study_name="fit-on-trials",
        direction="maximize",
        # never prunes on probability: every trial finishes, the fits come at 3 and 6 finished
        pruner=pruner(
            fit_after=3, cache_dir=tmp_path, fit_kwargs={"draws": 50, "tune": 50}, min_prob_beat_best=0.0
        ),
    )
    objective, _ = replay(curves, best_first(curves))
    study.optimize(objective, n_trials=len(curves))
    assert sorted(p.name for p in tmp_path.glob("*.nc")) == [
        "population_fit-on-trials_3.nc",
        "population_fit-on-trials_6.nc",
    ]
    assert study.pruner._fitted_on == 6
    assert set(study.pruner._forecaster.population.data.run_ids) <= {f"trial_{i}" for i in range(7)}


def test_trial_values_become_a_curve_from_step_one():
    trial = optuna.trial.create_trial(
        state=optuna.trial.TrialState.RUNNING,
        intermediate_values={0: 0.1, 1: 0.2, 2: float("nan"), 3: 0.4},
    )
    table, kept, offset = trial_table(trial, -1.0, {"reward_min": 0.0, "reward_max": 1.0}, 10)
    assert (kept, offset) == (3, 1)
    assert table.points["step"].tolist() == [1, 2, 4]
    assert table.points["reward"].tolist() == [-0.1, -0.2, -0.4]
    row = table.runs.iloc[0]
    assert (row["reward_min"], row["reward_max"], row["total_steps"]) == (-1.0, 0.0, 11)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"horizon": 1}, "horizon"),
        ({"min_prob_beat_best": 1.5}, "min_prob_beat_best"),
        ({"interval_steps": 0}, "interval_steps"),
        ({"fit_after": 1}, "fit_after"),
        ({"final_points": 0}, "final_points"),
        ({"likelihood_weight": 0.0}, "likelihood_weight"),
        ({"likelihood_weight": 1.5}, "likelihood_weight"),
    ],
)
def test_bad_settings_fail_at_construction(kwargs, message):
    with pytest.raises(BayesGRPOError, match=message):
        pruner(**kwargs)


def test_the_pruner_tempers_its_live_update_unless_told(curves):
    """Its live update counts a trial's values for half (``PRUNER_LIKELIHOOD_WEIGHT``, where the
    live path counts them in full), and takes the weight it is given.
    """
    for given, expected in (({}, PRUNER_LIKELIHOOD_WEIGHT), ({"likelihood_weight": 1.0}, 1.0)):
        study = optuna.create_study(direction="maximize", pruner=pruner(**given))
        objective, _ = replay(curves, best_first(curves)[:3])
        study.optimize(objective, n_trials=3)
        assert study.pruner._forecaster is not None
        assert study.pruner._forecaster.likelihood_weight == expected
    assert PRUNER_LIKELIHOOD_WEIGHT == 0.5 and DEFAULT_LIKELIHOOD_WEIGHT == 1.0


def test_importing_without_optuna_names_the_extra():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["optuna"] = None
        try:
            import bayesgrpo.integrations.optuna
        except ImportError as error:
            print(error)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "bayesgrpo[optuna]" in out.stdout
