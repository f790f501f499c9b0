"""The TRL / transformers callback: reading the trainer's history, the logged forecast, stopping.

Fast tests drive the callback with fake trainer state and a scripted forecaster whose curves are
known, so every logged number has a closed form. The slow tests train a tiny random GPT-2 with a
real ``transformers.Trainer`` (and TRL's ``GRPOTrainer``) on CPU and read the metrics back from
TensorBoard event files and ``trainer_state.json`` with bayesgrpo's own readers.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import subprocess
import sys
import textwrap
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from bayesgrpo.errors import BayesGRPOError, ForecastDepartureWarning, UnknownMetricError
from bayesgrpo.logs.readers import load_runs
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.questions.live import LiveForecaster, LiveUpdate
from bayesgrpo.questions.live import forecaster as live_module
from bayesgrpo.questions.stopping import CurveDraws, GuardedBudgetRule, PlateauRule, default_rule

#: What the callback logs from an update that carries curve draws only (a scripted forecaster),
#: asked by the default rule (whose rise guard says whether it held a stop)
METRICS = (
    "p_plateau",
    "expected_gain",
    "forecast_final",
    "forecast_final_curve_low",
    "forecast_final_curve_high",
    "held_while_rising",
    "stop",
)
#: and what a real live update adds: the predictive band, the importance-weight diagnostic and
#: whether the run's latest points have left the band (and, from five points in the run's latest
#: tenth on, their rise: ``recent_rise``)
LIVE_METRICS = (
    *METRICS,
    "forecast_final_predictive_low",
    "forecast_final_predictive_high",
    "pareto_k",
    "departed",
)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


# --------------------------------------------------------------------------------------------
# optional dependency: never imported by bayesgrpo, a clear error when missing
# --------------------------------------------------------------------------------------------


def test_import_bayesgrpo_never_imports_transformers_trl_or_torch():
    result = _run(
        """
        import sys
        import bayesgrpo, bayesgrpo.integrations, bayesgrpo.questions.live
        import bayesgrpo.questions.stopping, bayesgrpo.logs.readers
        bayesgrpo.LiveForecaster, bayesgrpo.PlateauRule, bayesgrpo.load_runs
        heavy = sorted(m for m in ("transformers", "trl", "torch", "accelerate") if m in sys.modules)
        print("HEAVY", heavy)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "HEAVY []" in result.stdout


def test_importing_the_callback_without_transformers_names_the_extra():
    result = _run(
        """
        import sys
        sys.modules["transformers"] = None  # as if not installed
        try:
            import bayesgrpo.integrations.trl
        except ImportError as exc:
            print("ERROR", exc)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "ERROR" in result.stdout and "pip install 'bayesgrpo[trl]'" in result.stdout


# --------------------------------------------------------------------------------------------
# fakes: trainer state, control, arguments, and a forecaster with known curves
# --------------------------------------------------------------------------------------------


@pytest.fixture
def trl_module():
    pytest.importorskip("transformers")
    import bayesgrpo.integrations.trl as module

    return module


@dataclass
class FakeState:
    log_history: list[dict[str, Any]] = field(default_factory=list)
    global_step: int = 0
    max_steps: int = 100
    logging_steps: int = 2
    num_train_epochs: int = 1
    train_batch_size: int = 4


@dataclass
class FakeControl:
    should_training_stop: bool = False


@dataclass
class GRPOConfig:  # named like TRL's config: the callback reads its fields by name
    run_name: str = "fake-run"
    output_dir: str = "out/fake-run"
    report_to: list[str] = field(default_factory=list)
    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 2
    world_size: int = 1
    num_generations: int = 4
    learning_rate: float = 1e-6


def _exp_draws(r0: float, asymptote: np.ndarray, tau: np.ndarray, horizon: float) -> Any:
    n = len(tau)
    params = {"r0": np.full(n, r0), "asymptote": np.asarray(asymptote, float), "tau": np.asarray(tau, float)}
    return CurveDraws("exp", params, step_scale=horizon, horizon_step=horizon, run_ids=("fake-run",))


class ScriptedForecaster:
    """Stands in for LiveForecaster: exp curves R(s) = 0.2 + 0.6 (1 - exp(-s / (tau H)))."""

    def __init__(self, tau: float | np.ndarray, fail: bool = False):
        self.tau = np.atleast_1d(np.asarray(tau, dtype=float))
        self.fail = fail
        self.calls: list[tuple[Any, float]] = []

    def update(self, table: Any, *, horizon: float) -> Any:
        self.calls.append((table, horizon))
        if self.fail:
            raise RuntimeError("scripted failure")
        step = float(table.points["step"].max())
        draws = _exp_draws(0.2, np.full(len(self.tau), 0.8), self.tau, horizon)
        return LiveUpdate(
            run_id="fake-run", step=step, horizon_step=float(horizon), posterior=None, curve_draws=draws
        )


def _train_row(step: int, reward: float | None = None, **more: float) -> dict[str, Any]:
    row: dict[str, Any] = {"loss": 0.5, "learning_rate": 1e-6, "grad_norm": 1.0, "epoch": step / 1000}
    if reward is not None:
        row["reward"] = reward
    row.update(more)
    return row


def _log(cb: Any, state: FakeState, args: Any, logs: dict[str, Any], step: int) -> FakeControl:
    """What Trainer.log does: append a copy with the step, then call on_log with the dict."""
    state.global_step = step
    state.log_history.append({**logs, "step": step})
    control = FakeControl()
    returned = cb.on_log(args, state, control, logs=logs)
    assert returned is control
    return control


def _callback(module: Any, forecaster: Any, **kwargs: Any) -> Any:
    # the callback's mechanics, tested with a posterior rule (the default is a fixed budget)
    kwargs.setdefault("rule", GuardedBudgetRule())
    cb = module.BayesStopCallback(**kwargs)
    cb._forecaster = forecaster  # skip loading a population: the forecaster is scripted
    return cb


# --------------------------------------------------------------------------------------------
# log_history -> runs table
# --------------------------------------------------------------------------------------------


def _history() -> list[Any]:
    return [
        {**_train_row(2, 0.30), "step": 2},
        {**_train_row(4, 0.35), "step": 4, "bayesgrpo/p_plateau": 0.1},
        {"eval_loss": 0.4, "eval_reward": 0.33, "epoch": 0.004, "step": 4},
        "not a dict",
        {**_train_row(6, 0.41, **{"completions/mean_length": 120.0}), "step": 6},
        {**_train_row(6, 0.42), "step": 6},  # the same step logged again (a resumed run): latest wins
        {**_train_row(8, 0.44), "step": 8},
        {
            "train_runtime": 12.5,
            "train_loss": 0.5,
            "train_samples_per_second": 3.0,
            "epoch": 0.008,
            "step": 8,
        },
    ]


def test_log_history_is_read_as_the_trainer_state_reader_reads_it(trl_module, tmp_path):
    history = _history()
    top = {
        "max_steps": 400,
        "logging_steps": 2,
        "num_train_epochs": 1,
        "train_batch_size": 4,
        "global_step": 8,
    }
    folder = tmp_path / "run-a"
    folder.mkdir()
    clean = [
        e if not isinstance(e, dict) else {k: v for k, v in e.items() if not k.startswith("bayesgrpo/")}
        for e in history
    ]
    (folder / "trainer_state.json").write_text(
        json.dumps({**top, "log_history": clean}, indent=2, sort_keys=True)
    )
    expected = load_runs(folder / "trainer_state.json", warn=False)
    got = trl_module.log_history_table(history, run_id="run-a", state_values=top)
    columns = sorted(expected.points.columns)
    assert sorted(got.points.columns) == columns
    assert got.points[columns].reset_index(drop=True).equals(expected.points[columns].reset_index(drop=True))
    np.testing.assert_allclose(got.points["reward"], [0.30, 0.35, 0.42, 0.44])
    for key in ("total_steps", "logging_steps", "train_runtime", "reward_key"):
        assert got.runs.loc[0, key] == expected.runs.loc[0, key], key
    assert got.runs.loc[0, "total_steps"] == 400


@pytest.mark.parametrize(
    ("extra", "reward_key", "expected"),
    [
        ({}, None, "reward"),  # GRPO / RLOO
        ({"objective/scores": 0.7}, None, "reward"),  # 'reward' first, as the reader
        ({"my_score": 0.9}, "my_score", "my_score"),  # the user's key wins
    ],
)
def test_reward_is_chosen_as_the_reader_chooses_it(trl_module, extra, reward_key, expected):
    history = [{**_train_row(s, 0.1 * s, **extra), "step": s} for s in (1, 2, 3)]
    table = trl_module.log_history_table(
        history, reward_key=reward_key, keep=trl_module.forecast_keys(reward_key)
    )
    assert table.runs.loc[0, "reward_key"] == expected
    want = [0.1 * s for s in (1, 2, 3)] if expected == "reward" else [extra[expected]] * 3
    np.testing.assert_allclose(table.points["reward"], want)


def test_ppo_score_is_the_reward_when_no_reward_is_logged(trl_module):
    history = [{"loss": 1.0, "objective/scores": 0.2 * s, "step": s} for s in (1, 2, 3)]
    table = trl_module.log_history_table(history, keep=trl_module.forecast_keys())
    assert table.runs.loc[0, "reward_key"] == "objective/scores"
    np.testing.assert_allclose(table.points["reward"], [0.2, 0.4, 0.6])


def test_kept_keys_leave_out_everything_a_forecast_does_not_use(trl_module):
    table = trl_module.log_history_table(_history(), keep=trl_module.forecast_keys())
    assert sorted(table.points.columns) == ["completion_length", "reward", "run_id", "step"]
    assert table.points["step"].tolist() == [2, 4, 6, 8]


def test_a_missing_reward_names_every_logged_metric(trl_module):
    history = [{"loss": 1.0, "grad_norm": 2.0, "step": s} for s in (1, 2)]
    with pytest.raises(UnknownMetricError, match="grad_norm") as info:
        trl_module.log_history_table(history, keep=trl_module.forecast_keys())
    assert "reward_key=" in str(info.value)
    with pytest.raises(UnknownMetricError, match="grad_norm"):
        trl_module.log_history_table(history, reward_key="acc", keep=trl_module.forecast_keys("acc"))


def test_trainer_arguments_become_metadata(trl_module):
    meta = trl_module.trainer_metadata(GRPOConfig())
    assert meta == {"samples_per_step": 16.0, "group_size": 4.0, "learning_rate": 1e-6, "algorithm": "grpo"}
    assert trl_module.trainer_metadata(object()) == {}


# --------------------------------------------------------------------------------------------
# the logged numbers, against closed forms
# --------------------------------------------------------------------------------------------


def test_forecast_metrics_match_the_closed_form(trl_module):
    horizon, step = 200.0, 50.0
    tau = np.linspace(0.05, 0.6, 400)  # in units of the horizon
    asymptote = np.linspace(0.7, 0.9, 400)
    draws = _exp_draws(0.2, asymptote, tau, horizon)
    update = LiveUpdate("r", step, horizon, None, draws)
    decision = PlateauRule(eps=0.02, prob=0.9).decide(draws, step_now=step, horizon_step=horizon)[0]
    metrics = trl_module.forecast_metrics(update, decision, eps=0.02)

    final = 0.2 + (asymptote - 0.2) * (1 - np.exp(-1.0 / tau))
    now = 0.2 + (asymptote - 0.2) * (1 - np.exp(-(step / horizon) / tau))
    assert metrics["bayesgrpo/p_plateau"] == pytest.approx(np.mean(final - now < 0.02))
    assert metrics["bayesgrpo/expected_gain"] == pytest.approx(np.mean(final - now))
    assert metrics["bayesgrpo/forecast_final"] == pytest.approx(final.mean())
    assert metrics["bayesgrpo/forecast_final_curve_low"] == pytest.approx(np.quantile(final, 0.05))
    assert metrics["bayesgrpo/forecast_final_curve_high"] == pytest.approx(np.quantile(final, 0.95))
    assert "bayesgrpo/forecast_final_predictive_low" not in metrics  # this update carries no noise
    assert "bayesgrpo/recent_rise" not in metrics  # nor the run's own rise
    assert metrics["bayesgrpo/stop"] == float(decision.stop)
    assert all(type(v) is float for v in metrics.values())  # what TensorBoard's add_scalar takes


def test_forecast_metrics_log_the_rise_that_held_a_stop(trl_module):
    horizon, step = 200.0, 150.0
    flat = _exp_draws(0.5, np.full(400, 0.5 + 1e-6), np.full(400, 0.1), horizon)
    rising = dataclasses.replace(flat, recent_rise=np.array([0.05]), recent_rise_se=np.array([0.01]))
    for draws, held in ((flat, None), (rising, 1.0)):
        update = LiveUpdate("r", step, horizon, None, draws)
        decision = GuardedBudgetRule().decide(draws, step_now=step, horizon_step=horizon)[0]
        metrics = trl_module.forecast_metrics(update, decision, eps=0.01, relative=True)
        assert metrics.get("bayesgrpo/held_while_rising") == (held if held else 0.0)
        assert metrics["bayesgrpo/stop"] == (0.0 if held else 1.0)
        assert ("bayesgrpo/recent_rise" in metrics) == (held is not None)
    assert metrics["bayesgrpo/recent_rise"] == 0.05
    assert "bayesgrpo/stopped_flat" not in metrics  # the guarded budget asks no flat stop unless told


def test_forecast_metrics_log_a_flat_stop_where_the_rule_asks_for_one(trl_module):
    horizon, step = 200.0, 60.0
    # a curve still expected to rise (tau 0.5 of the horizon), and logged points that no longer do
    draws = _exp_draws(0.2, np.full(400, 0.8), np.full(400, 0.5), horizon)
    flat = dataclasses.replace(draws, long_rise=np.array([0.0]), long_rise_se=np.array([0.002]))
    update = LiveUpdate("r", step, horizon, None, flat)
    rule = GuardedBudgetRule(flat_eps=0.02)
    decision = rule.decide(flat, step_now=step, horizon_step=horizon)[0]
    metrics = trl_module.forecast_metrics(update, decision, eps=0.01, relative=True)
    assert metrics["bayesgrpo/stopped_flat"] == 1.0 and metrics["bayesgrpo/stop"] == 1.0
    decision = default_rule().decide(flat, step_now=step, horizon_step=horizon)[0]
    assert trl_module.forecast_metrics(update, decision, eps=0.01, relative=True)["bayesgrpo/stop"] == 0.0


# --------------------------------------------------------------------------------------------
# the callback with fake trainer state
# --------------------------------------------------------------------------------------------


def _rewards(n: int) -> list[float]:
    return [0.2 + 0.6 * (1 - math.exp(-s / 10)) for s in range(1, n + 1)]


def test_forecasts_every_n_training_logs_and_writes_the_metrics_where_trainers_read_them(trl_module):
    forecaster = ScriptedForecaster(tau=0.9)  # still rising at the horizon: continue
    cb = _callback(trl_module, forecaster, every=3, min_points=2)
    state, args = FakeState(max_steps=100), GRPOConfig()
    updated = []
    for step, reward in enumerate(_rewards(9), start=1):
        logs = _train_row(step, reward)
        _log(cb, state, args, logs, step)
        if step == 4:  # evaluation and summary logs are not training logs: they do not count
            _log(cb, state, args, {"eval_loss": 0.1, "epoch": 0.1}, step)
        if "bayesgrpo/p_plateau" in logs:
            updated.append(step)
            assert state.log_history[-1]["bayesgrpo/p_plateau"] == logs["bayesgrpo/p_plateau"]
            assert set(METRICS) == {k.removeprefix("bayesgrpo/") for k in logs if k.startswith("bayesgrpo/")}
    assert updated == [3, 6, 9]
    assert [h for _, h in forecaster.calls] == [100.0, 100.0, 100.0]  # horizon = state.max_steps
    table = forecaster.calls[-1][0]
    np.testing.assert_allclose(table.points["reward"], _rewards(9))  # own metrics not read back
    assert table.runs.loc[0, "group_size"] == 4 and table.runs.loc[0, "run_id"] == "fake-run"
    assert [r.step for r in cb.history] == [3.0, 6.0, 9.0]
    assert cb.last_decision.decision == "continue" and cb.stopped_at is None
    frame = cb.history_frame()
    assert list(frame["step"]) == [3.0, 6.0, 9.0] and "p_plateau" in frame and (frame["seconds"] > 0).all()


@pytest.mark.parametrize(
    ("mode", "tau", "stops"),
    [
        ("stop", 0.003, True),  # plateaued long before the horizon
        ("stop", 0.9, False),  # still rising
        ("advise", 0.003, False),  # would stop, only says so
    ],
)
def test_stop_and_advise(trl_module, caplog, mode, tau, stops):
    cb = _callback(trl_module, ScriptedForecaster(tau=tau), every=1, mode=mode, min_points=3)
    state, args = FakeState(max_steps=100), GRPOConfig()
    controls = []
    with caplog.at_level(logging.INFO, logger="bayesgrpo"):
        for step, reward in enumerate(_rewards(5), start=1):
            controls.append(_log(cb, state, args, _train_row(step, reward), step).should_training_stop)
    assert controls == [False, False, stops, stops, stops]
    assert (cb.stopped_at is not None) == stops
    plateau = tau < 0.1
    assert [r.decision.stop for r in cb.history] == [plateau] * 3
    assert [r.acted for r in cb.history] == [stops] * 3
    if plateau:
        word = "stopping training at step" if mode == "stop" else "(advise): the rule would stop"
        assert word in caplog.text and "on its plateau" in caplog.text


def test_no_stop_is_acted_on_at_the_horizon_itself(trl_module):
    cb = _callback(trl_module, ScriptedForecaster(tau=0.9), every=1, min_points=1, horizon=3)
    state, args = FakeState(max_steps=3), GRPOConfig()
    controls = [
        _log(cb, state, args, _train_row(s, r), s).should_training_stop for s, r in enumerate(_rewards(3), 1)
    ]
    assert controls == [False, False, False]
    assert cb.history[-1].decision.stop and not cb.history[-1].acted  # "no steps remain"


def test_a_failing_update_never_stops_training_warns_once_and_is_counted(trl_module, caplog):
    cb = _callback(trl_module, ScriptedForecaster(tau=0.1, fail=True), every=1, min_points=1)
    state, args = FakeState(), GRPOConfig()
    with caplog.at_level(logging.DEBUG, logger="bayesgrpo"):
        for step in (1, 2, 3):
            logs = _train_row(step, 0.5)
            assert not _log(cb, state, args, logs, step).should_training_stop
            assert not any(k.startswith("bayesgrpo/") for k in logs)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "scripted failure" in warnings[0].getMessage()
    assert cb.failures == 3 and isinstance(cb.last_error, RuntimeError) and cb.history == []


def test_a_run_without_reward_is_a_counted_failure_not_a_crash(trl_module):
    cb = _callback(trl_module, ScriptedForecaster(tau=0.1), every=1, min_points=1)
    state, args = FakeState(), GRPOConfig()
    _log(cb, state, args, {"loss": 1.0, "epoch": 0.1}, 1)
    assert cb.failures == 1 and isinstance(cb.last_error, UnknownMetricError)


def test_too_few_points_is_no_forecast_and_no_failure(trl_module):
    forecaster = ScriptedForecaster(tau=0.1)
    cb = _callback(trl_module, forecaster, every=1, min_points=4)
    state, args = FakeState(), GRPOConfig()
    for step, reward in enumerate(_rewards(3), start=1):
        _log(cb, state, args, _train_row(step, reward), step)
    assert forecaster.calls == [] and cb.failures == 0


def test_the_reporting_order_is_explained_once_unless_attached(trl_module, caplog):
    from transformers.trainer_callback import DefaultFlowCallback

    class Reporter:  # stands in for TensorBoardCallback
        pass

    args = GRPOConfig(report_to=["tensorboard"])
    cb = _callback(trl_module, ScriptedForecaster(tau=0.9), every=1, min_points=1)
    state = FakeState()
    with caplog.at_level(logging.WARNING, logger="bayesgrpo"):
        for step in (1, 2):
            _log(cb, state, args, _train_row(step, 0.3), step)
    assert caplog.text.count("callback.attach(trainer)") == 1

    flow, reporter = DefaultFlowCallback(), Reporter()

    trainer = SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[flow, reporter, cb]))

    assert cb.attach(trainer) is cb
    assert trainer.callback_handler.callbacks == [flow, cb, reporter]
    caplog.clear()
    attached = _callback(trl_module, ScriptedForecaster(tau=0.9), every=1, min_points=1).attach(trainer)
    with caplog.at_level(logging.WARNING, logger="bayesgrpo"):
        _log(attached, FakeState(), args, _train_row(1, 0.3), 1)
    assert "attach" not in caplog.text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"every": 0}, "every"),
        ({"every": 2.5}, "every"),
        ({"mode": "maybe"}, "mode"),
        ({"horizon": -5}, "horizon"),
        ({"horizon": "soon"}, "horizon"),
        ({"min_points": 0}, "min_points"),
        ({"rule": "plateau"}, "decide"),
        ({"prior": "/no/such/population.nc"}, "does not exist"),
        ({"prior": 42}, "RewardModel"),
    ],
)
def test_bad_settings_fail_at_construction(trl_module, kwargs, message):
    with pytest.raises(BayesGRPOError, match=message):
        trl_module.BayesStopCallback(**kwargs)


def test_no_horizon_is_a_clear_failure(trl_module):
    cb = _callback(trl_module, ScriptedForecaster(tau=0.1), every=1, min_points=1)
    _log(cb, FakeState(max_steps=0), GRPOConfig(), _train_row(1, 0.3), 1)
    assert cb.failures == 1 and "horizon" in str(cb.last_error)


def test_the_prior_is_loaded_lazily_once_by_its_kind(trl_module, monkeypatch, tmp_path):
    loads: list[Any] = []
    monkeypatch.setattr(live_module, "bundled_population", lambda: loads.append("bundled") or "POP")
    monkeypatch.setattr(RewardModel, "load", classmethod(lambda cls, path: loads.append(Path(path)) or "POP"))

    class Forecaster(ScriptedForecaster):
        def __init__(self, population: Any, n_draws: int, random_seed: int):
            assert population == "POP" and random_seed == 0
            super().__init__(tau=0.9)

    monkeypatch.setattr(trl_module, "LiveForecaster", Forecaster)
    saved = tmp_path / "pop.nc"
    saved.write_text("")
    for prior, expected in ((None, "bundled"), (saved, saved), (str(saved), saved)):
        loads.clear()
        cb = trl_module.BayesStopCallback(prior=prior, every=1, min_points=1)
        assert loads == []  # nothing at construction
        state, args = FakeState(), GRPOConfig()
        for step in (1, 2, 3):
            _log(cb, state, args, _train_row(step, 0.3), step)
        assert loads == [expected] and cb.failures == 0


def test_a_prior_that_fails_to_load_is_not_retried(trl_module, monkeypatch):
    calls = []

    def missing() -> Any:
        calls.append(1)
        raise BayesGRPOError("no fitted population")

    monkeypatch.setattr(live_module, "bundled_population", missing)
    cb = trl_module.BayesStopCallback(every=1, min_points=1)
    state, args = FakeState(), GRPOConfig()
    for step in (1, 2, 3):
        assert not _log(cb, state, args, _train_row(step, 0.3), step).should_training_stop
    assert calls == [1] and cb.failures == 3 and "could not be loaded" in str(cb.last_error)


def test_a_fitted_model_is_used_as_is(trl_module, population):
    model, _ = population
    cb = trl_module.BayesStopCallback(
        rule=GuardedBudgetRule(),
        prior=model,
        every=1,
        min_points=3,
        metadata={"reward_min": 0.0, "reward_max": 1.0},
    )
    state, args = FakeState(max_steps=60), GRPOConfig()
    for step, reward in enumerate(_rewards(4), start=1):
        _log(cb, state, args, _train_row(step, reward), step)
    assert isinstance(cb._forecaster, LiveForecaster) and cb._forecaster.population is model
    assert cb.failures == 0 and len(cb.history) == 2
    record = cb.history[-1]
    assert record.n_points == 4 and record.horizon_step == 60.0
    metrics = record.metrics
    assert set(LIVE_METRICS) == {k.removeprefix("bayesgrpo/") for k in metrics}
    low, mid, high = (metrics[f"bayesgrpo/forecast_final{s}"] for s in ("_curve_low", "", "_curve_high"))
    assert low <= mid <= high
    # the band of a logged reward is the curve's band widened by the noise; after 4 points of 60 the
    # curve's band spans most of the range (0.09 .. 0.98 here), and the 5-95% quantiles of resampled
    # draws move by a few hundredths from one set of draws to the next, more than the noise adds
    predictive = (
        metrics["bayesgrpo/forecast_final_predictive_low"],
        metrics["bayesgrpo/forecast_final_predictive_high"],
    )
    assert predictive[0] < mid < predictive[1]
    assert predictive[1] - predictive[0] > 0.9 * (high - low)
    # the range eps was a share of: stated in the metadata here
    assert record.range_note.startswith("eps is a share of the reward range 0 .. 1 stated")
    assert cb.history_frame()["range_note"].iloc[-1] == record.range_note


# --------------------------------------------------------------------------------------------
# end to end: a real transformers.Trainer, TensorBoard and trainer_state.json read back
# --------------------------------------------------------------------------------------------

MAX_STEPS = 120


def _scripted_reward(kind: str, step: int) -> float:
    noise = 0.01 * np.random.default_rng(step).standard_normal()
    if kind == "plateau":
        return 0.2 + 0.6 * (1.0 - math.exp(-step / 10.0)) + noise
    return 0.1 + 0.7 * step / MAX_STEPS + noise  # rises linearly to the horizon


def _tiny_trainer(kind: str, output_dir: Path, callback: Any, attach: bool) -> Any:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    class RandomTokens(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 100_000

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            ids = torch.randint(0, 16, (8,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids}

    class ScriptedRewardTrainer(Trainer):
        def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
            if "loss" in logs:  # a training log: add the scripted reward, as GRPOTrainer adds its own
                logs["reward"] = _scripted_reward(kind, self.state.global_step)
            super().log(logs, start_time)

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=16, n_positions=8, n_embd=8, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
    )
    args = TrainingArguments(
        output_dir=str(output_dir),
        max_steps=MAX_STEPS,
        logging_steps=2,
        per_device_train_batch_size=2,
        report_to=["tensorboard"],
        save_strategy="steps",
        save_steps=40,
        disable_tqdm=True,
        use_cpu=True,
        seed=0,
    )
    trainer = ScriptedRewardTrainer(
        model=GPT2LMHeadModel(config),
        args=args,
        train_dataset=RandomTokens(),
        callbacks=None if attach else [callback],
    )
    if attach:
        callback.attach(trainer)
    return trainer


@pytest.fixture(scope="module")
def population_file(population, tmp_path_factory):
    model, _ = population
    return model.save(tmp_path_factory.mktemp("population") / "pop.nc")


def _tensorboard_values(output_dir: Path) -> Any:
    return load_runs(output_dir / "runs", format="tensorboard", warn=False).points


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "mode", "attach", "stops"),
    [
        ("plateau", "stop", True, True),
        ("rising", "stop", False, False),
        ("plateau", "advise", True, False),
    ],
)
def test_a_real_trainer_is_stopped_on_its_plateau_only(population_file, tmp_path, kind, mode, attach, stops):
    pytest.importorskip("transformers")
    pytest.importorskip("torch")
    from bayesgrpo.integrations.trl import BayesStopCallback

    callback = BayesStopCallback(  # a posterior rule: the default fixed budget stops any run at 65%
        rule=GuardedBudgetRule(),
        every=2,
        prior=population_file,
        mode=mode,
        metadata={"reward_min": 0.0, "reward_max": 1.0},
    )
    trainer = _tiny_trainer(kind, tmp_path, callback, attach)
    trainer.train()
    steps = trainer.state.global_step

    assert callback.failures == 0, callback.last_error
    assert (steps < MAX_STEPS) == stops and (
        callback.stopped_at == steps if stops else callback.stopped_at is None
    )
    if kind == "plateau":
        assert any(r.decision.stop for r in callback.history)  # advise mode saw it too, and only said so
    else:
        assert not any(r.decision.stop for r in callback.history[:-1])
        # a line rising to the horizon: the forecast of its end is near where the line ends
        assert abs(callback.history[-2].metrics["bayesgrpo/forecast_final"] - 0.8) < 0.1

    # the metrics are in the trainer's own history, at the steps of the updates
    logged = {e["step"]: e for e in trainer.state.log_history if "bayesgrpo/p_plateau" in e}
    assert sorted(logged) == [int(r.step) for r in callback.history]
    for record in callback.history:
        entry = logged[int(record.step)]
        assert "reward" in entry
        for key, value in record.metrics.items():
            assert entry[key] == value

    # ... in trainer_state.json of a checkpoint, read back by the TRL reader
    checkpoint = max(tmp_path.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    saved = load_runs(checkpoint / "trainer_state.json", warn=False).points.set_index("step")
    for record in callback.history:
        if record.step <= int(checkpoint.name.split("-")[1]):
            assert saved.loc[int(record.step), "bayesgrpo/p_plateau"] == pytest.approx(
                record.metrics["bayesgrpo/p_plateau"]
            )

    # ... and in TensorBoard when the callback runs before the TensorBoard callback (attach)
    board = _tensorboard_values(tmp_path).set_index("step")
    tag = "train/bayesgrpo/p_plateau"
    if attach:
        for record in callback.history:
            # float32 in the event file
            assert board.loc[int(record.step), tag] == pytest.approx(
                record.metrics["bayesgrpo/p_plateau"], abs=1e-6
            )
    else:
        # callbacks=[...] puts it after the reporting callbacks: this is why attach() exists
        assert tag not in board.columns
        assert "reward" in board.columns


def tiny_gpt2() -> tuple[Any, Any]:
    """A word-level tokenizer of 16 words and a one-layer GPT-2 config for it (torch seeded)."""
    import torch
    from transformers import GPT2Config, PreTrainedTokenizerFast

    words = ["<pad>", "<eos>", "<unk>", *(f"w{i}" for i in range(13))]
    word_level = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    word_level.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=word_level, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(words), n_positions=32, n_embd=8, n_layer=1, n_head=2,
        bos_token_id=1, eos_token_id=1, pad_token_id=0,
    )  # fmt: skip
    return tokenizer, config


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::FutureWarning")  # transformers 5 renames gradient_checkpointing
def test_grpo_trainer_logs_the_forecast(population_file, tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("datasets")
    from datasets import Dataset
    from transformers import GPT2LMHeadModel
    from trl import GRPOConfig as TRLGRPOConfig
    from trl import GRPOTrainer

    from bayesgrpo.integrations.trl import BayesStopCallback

    tokenizer, config = tiny_gpt2()
    prompts = Dataset.from_dict(
        {"prompt": [" ".join(f"w{(i + j) % 13}" for j in range(3)) for i in range(32)]}
    )

    def longer_is_better(completions: list[str], **_: Any) -> list[float]:
        return [len(c.split()) / 6.0 for c in completions]

    args = TRLGRPOConfig(
        output_dir=str(tmp_path),
        max_steps=5,
        logging_steps=1,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=6,
        report_to=["tensorboard"],
        save_strategy="no",
        disable_tqdm=True,
        use_cpu=True,
        gradient_checkpointing=False,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=GPT2LMHeadModel(config),
        reward_funcs=longer_is_better,
        args=args,
        train_dataset=prompts,
        processing_class=tokenizer,
    )
    callback = BayesStopCallback(
        every=1,
        prior=population_file,
        min_points=3,
        mode="advise",
        metadata={"reward_min": 0.0, "reward_max": 1.0},
    ).attach(trainer)
    trainer.train()

    assert callback.failures == 0, callback.last_error
    assert [r.step for r in callback.history] == [3.0, 4.0, 5.0]
    forecast = [e for e in trainer.state.log_history if "bayesgrpo/p_plateau" in e]
    assert [e["step"] for e in forecast] == [3, 4, 5] and all("reward" in e for e in forecast)
    assert callback.last_update.curve_draws.run_ids == (Path(tmp_path).name,)  # the output folder's name
    board = _tensorboard_values(tmp_path)
    assert board.dropna(subset=["train/bayesgrpo/forecast_final"])["step"].tolist() == [3, 4, 5]


def test_what_reading_the_log_history_repaired_is_said_once_per_kind(trl_module, caplog):
    cb = _callback(trl_module, ScriptedForecaster(tau=0.9), every=1, min_points=2)
    state, args = FakeState(max_steps=100), GRPOConfig()
    rewards = _rewards(6)
    rewards[2] = float("nan")  # a NaN reward, as a diverging step logs it
    with caplog.at_level(logging.WARNING, logger="bayesgrpo.integrations.trl"):
        for step, reward in enumerate(rewards, start=1):
            _log(cb, state, args, _train_row(step, reward), step)
    said = [r.getMessage() for r in caplog.records if "repaired or dropped" in r.getMessage()]
    assert len(said) == 1 and "kept" in said[0]
    assert cb.repairs is not None and "kept 5 of 6" in cb.repairs


def test_a_repair_whose_count_grows_is_not_said_again(trl_module, caplog):
    cb = _callback(trl_module, ScriptedForecaster(tau=0.9), every=1, min_points=2)
    state, args = FakeState(max_steps=100), GRPOConfig()
    rewards = _rewards(8)
    rewards[2] = rewards[5] = float("nan")  # the same kind of repair, met twice as training logs
    with caplog.at_level(logging.WARNING, logger="bayesgrpo.integrations.trl"):
        for step, reward in enumerate(rewards, start=1):
            _log(cb, state, args, _train_row(step, reward), step)
    said = [r.getMessage() for r in caplog.records if "repaired or dropped" in r.getMessage()]
    assert len(said) == 1
    assert cb.repairs is not None and "kept 6 of 8" in cb.repairs


def test_a_run_that_leaves_its_forecast_is_said_once_and_logged_at_every_forecast(trl_module, caplog):
    """The shipped population; 200 logged rewards whose last 40 jump twenty noise sds: every
    forecast from then on logs bayesgrpo/departed = 1, the log says it once.
    """
    cb = trl_module.BayesStopCallback(every=1, min_points=3, mode="advise")
    state, args = FakeState(max_steps=400), GRPOConfig()
    steps = np.arange(1, 203)
    rewards = 0.2 + 0.5 * (1 - np.exp(-steps / 40.0)) + 0.03 * np.random.default_rng(4).standard_normal(202)
    rewards[160:] += 0.6
    with caplog.at_level("WARNING", logger="bayesgrpo"), warnings.catch_warnings():
        warnings.simplefilter("error", ForecastDepartureWarning)  # not raised at each forecast
        for step in steps[:198]:
            state.log_history.append({**_train_row(int(step), float(rewards[step - 1])), "step": int(step)})
        for step in steps[198:]:
            _log(cb, state, args, _train_row(int(step), float(rewards[step - 1])), int(step))
    assert cb.failures == 0 and len(cb.history) == 4
    assert [record.metrics["bayesgrpo/departed"] for record in cb.history] == [1.0] * 4
    said = [r.getMessage() for r in caplog.records if "left every curve" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("bayesgrpo: at step 199 of the last")
