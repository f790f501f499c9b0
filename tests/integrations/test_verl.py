"""The verl stop hook, fed with the metrics dicts a real verl run logged (no verl installed)."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.integrations.verl import BACKEND_NAME, BayesStopHook, attach, install, stop_after_next_step
from bayesgrpo.logs.readers import load_runs
from bayesgrpo.logs.readers.verl.lines import parse_fields
from bayesgrpo.questions.live import LiveForecaster
from bayesgrpo.questions.stopping import CurveDraws, PlateauRule

VERL_LOG = (
    Path(__file__).resolve().parents[2] / "data" / "verl-console" / "verl_gpg_qwen2-7b_math_megatron.log"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STEP = re.compile(r"^(?:\([^)]*pid=\d+\)\s*)?step:(\d+) - (.*)$")


def verl_metrics() -> list[tuple[int, dict[str, float]]]:
    """(step, metrics) as the run passed them to ``Tracking.log``: its console lines parsed."""
    out = []
    for line in VERL_LOG.read_text(encoding="utf-8").splitlines():
        match = _STEP.match(_ANSI.sub("", line).strip())
        if match:
            names, values, _ = parse_fields(match.group(2))
            out.append(
                (
                    int(match.group(1)),
                    {n: v for n, v in zip(names, values, strict=True) if isinstance(v, float)},
                )
            )
    return out


class StubForecaster:
    """Exponential saturation with known draws (see tests/interfaces/test_watch.py)."""

    def __init__(self, asymptote: float = 0.6) -> None:
        self.asymptote = np.linspace(asymptote - 0.05, asymptote + 0.05, 51)
        self.tables = []

    def update(self, run, *, horizon):
        self.tables.append(run)
        n = len(self.asymptote)
        draws = CurveDraws(
            "exp",
            {"r0": np.full(n, 0.1), "asymptote": self.asymptote, "tau": np.full(n, 30.0)},
            horizon_step=horizon,
            run_ids=(run.run_ids[0],),
        )
        return SimpleNamespace(curve_draws=draws, posterior=SimpleNamespace(pareto_k=0.1))


class FakeTracking:
    """verl's ``Tracking`` as far as backends go (verl/utils/tracking.py, v0.9.1, lines 191-194)."""

    def __init__(self, project_name, experiment_name, default_backend="console", config=None):
        self.logger = {}

    def log(self, data, step, backend=None):
        for default_backend, logger_instance in self.logger.items():
            if backend is None or default_backend in backend:
                logger_instance.log(data=data, step=step)


def fake_fit(trainer, tracking: FakeTracking, metrics: dict[int, dict]) -> tuple[list[int], list[int]]:
    """Verl's V1 ``PPOTrainer.fit`` loop reduced to its control flow (trainer_base.py 465-530)."""
    global_steps, done, saved = 1, [], []
    while global_steps <= trainer.total_training_steps:
        is_last_step = global_steps >= trainer.total_training_steps
        if is_last_step:
            saved.append(global_steps)  # save_freq > 0 and is_last_step: checkpoint
        tracking.log(data=metrics[global_steps], step=global_steps)
        done.append(global_steps)
        global_steps += 1
        if is_last_step:
            break
    return done, saved


def test_metrics_as_verl_logs_them():
    logged = verl_metrics()
    assert logged[0][0] == 0 and "critic/score/mean" not in logged[0][1]  # validation before training
    assert "val-core/openai/gsm8k/reward/mean@1" in logged[0][1]
    assert (
        logged[1][0] == 1 and 0 <= logged[1][1]["critic/score/mean"] <= 1 and "actor/entropy" in logged[1][1]
    )


def test_hook_records_what_the_reader_reads_and_decides_when_due():
    stub = StubForecaster()
    hook = BayesStopHook(prior=stub, horizon=105, min_points=5, every=10)
    decided = {step: hook(metrics, step) for step, metrics in verl_metrics()[:61]}
    assert decided[0] is None  # step 0 logs no train reward
    assert [s for s, d in decided.items() if d is not None] == [5, 15, 25, 35, 45, 55]
    assert hook.reward == "critic/score/mean" and len(stub.tables) == 6
    read = load_runs(VERL_LOG, warn=False).points.dropna(subset=["reward"])
    table = hook.table()
    np.testing.assert_array_equal(table.points["step"], read["step"].to_numpy()[:60])
    np.testing.assert_allclose(table.points["reward"], read["reward"].to_numpy()[:60])
    # the decision is the rule's on the stub's closed-form curve at step 55
    a = stub.asymptote
    gain = (a - 0.1) * (np.exp(-55 / 30) - np.exp(-105 / 30))
    assert hook.last_decision.step == 55 and hook.last_decision.horizon_step == 105
    assert hook.last_decision.probability == pytest.approx((gain < 0.01).mean())  # reward_scale 1: eps 0.01


def test_real_population_answers_the_hook(population):
    model, _ = population
    rule = PlateauRule(eps=0.01, prob=0.9, relative=True)
    hook = BayesStopHook(rule=rule, prior=model, horizon=105, min_points=40, every=1000, random_seed=3)
    decisions = [hook(metrics, step) for step, metrics in verl_metrics()[:41]]
    (decision,) = [d for d in decisions if d is not None]
    update = LiveForecaster(model, random_seed=3).update(hook.table(), horizon=105)
    direct = rule.decide(update.curve_draws, 40, 105)[0]
    assert decision.step == 40 and decision.decision == direct.decision
    assert decision.probability == pytest.approx(direct.probability)
    assert decision.expected_gain == pytest.approx(direct.expected_gain)


def test_a_stop_says_which_range_its_eps_is_a_share_of(population, caplog):
    model, _ = population
    hook = BayesStopHook(
        PlateauRule(eps=0.9, prob=0.5, relative=True), prior=model, horizon=105, min_points=40, every=1000
    )
    with caplog.at_level(logging.WARNING, logger="bayesgrpo.integrations.verl"):
        decisions = [hook(metrics, step) for step, metrics in verl_metrics()[:41]]
    assert [d.decision for d in decisions if d is not None] == ["stop"]
    assert "stop advised at step 40" in caplog.text and "eps is a share of the reward range" in caplog.text


def test_stop_ends_verl_loop_after_one_more_step_with_its_checkpoint():
    trainer = SimpleNamespace(total_training_steps=105)
    stopped = []
    hook = BayesStopHook(
        PlateauRule(eps=1.0, prob=0.5),
        prior=StubForecaster(),
        horizon=105,
        min_points=8,
        on_stop=lambda d: (stopped.append(d), stop_after_next_step(trainer)(d)),
    )
    tracking = attach(hook, FakeTracking("p", "e"))
    done, saved = fake_fit(trainer, tracking, dict(verl_metrics()))
    assert len(stopped) == 1 and stopped[0].step == 8 and hook.stop_requested
    assert done == list(range(1, 10)) and saved == [9] and trainer.total_training_steps == 9


def test_tracking_backend_never_raises_into_training(caplog):
    hook = BayesStopHook(prior=StubForecaster(), min_points=2)  # no horizon
    tracking = attach(hook, FakeTracking("p", "e"))
    with caplog.at_level(logging.WARNING, logger="bayesgrpo.integrations.verl"):
        for step, metrics in verl_metrics()[:4]:
            tracking.log(data=metrics, step=step)
    assert "no horizon" in caplog.text and len(hook.points) == 3
    with pytest.raises(BayesGRPOError, match="no horizon"):
        hook(verl_metrics()[4][1], 4)
    hook.finish()


def test_install_adds_the_hook_to_every_tracking_until_undone():
    hook = BayesStopHook(prior=StubForecaster(), horizon=105)
    undo = install(hook, FakeTracking)
    try:
        assert FakeTracking("p", "e").logger[BACKEND_NAME] is hook
    finally:
        undo()
    assert BACKEND_NAME not in FakeTracking("p", "e").logger
    with pytest.raises(BayesGRPOError, match="no 'logger' dict"):
        attach(hook, object())
    assert "verl" not in sys.modules  # nothing here imported verl


def test_from_verl_config_reads_what_the_log_reader_reads():
    config = {
        "data": {"train_batch_size": 1024},
        "actor_rollout_ref": {
            "rollout": {"n": 5},
            "actor": {"optim": {"lr": 1e-6}},
            "model": {"path": "/cache/models--Qwen--Qwen2-7B-Instruct/snapshots/abc"},
        },
        "algorithm": {"adv_estimator": "gpg"},
        "trainer": {"experiment_name": "qwen2_7b_gpg", "total_training_steps": None, "total_epochs": 15},
    }
    hook = BayesStopHook.from_verl_config(config, horizon=105, prior=StubForecaster(), metadata={"size_b": 7})
    assert hook.run_id == "qwen2_7b_gpg" and hook.horizon == 105
    runs = hook.table().runs.iloc[0]
    assert (runs["group_size"], runs["batch_size"], runs["size_b"]) == (5, 1024, 7)
    assert runs["model"] == "Qwen/Qwen2-7B-Instruct" and runs["algorithm"] == "gpg"
    config["trainer"]["total_training_steps"] = 300
    assert BayesStopHook.from_verl_config(config).horizon == 300


class _Scalar:
    """A 0-d tensor as verl's metrics may hold: ``.item()`` gives the number."""

    def __init__(self, value: float) -> None:
        self.value = value

    def item(self) -> float:
        return self.value


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [
        ({"critic/score/mean": np.float64(0.4)}, 0.4),
        ({"critic/score/mean": _Scalar(0.25)}, 0.25),
        ({"critic/rewards/mean": 0.3}, 0.3),  # no score logged: the KL-penalised reward
        ({"critic/score/mean": float("nan")}, None),
        ({"critic/score/mean": "0.4"}, None),
        ({"val-core/openai/gsm8k/reward/mean@1": 0.5}, None),
    ],
)
def test_reward_values_as_verl_passes_them(metrics, expected):
    hook = BayesStopHook(prior=StubForecaster(), horizon=10, min_points=100)
    assert hook(metrics, 1) is None
    assert hook.points.get(1) == (pytest.approx(expected) if expected is not None else None)


def test_a_step_logged_again_keeps_its_latest_value():
    hook = BayesStopHook(prior=StubForecaster(), horizon=10, min_points=100)
    for step, value in [(1, 0.1), (2, 0.2), (3, 0.3), (2, 0.9)]:
        hook({"critic/score/mean": value}, step)
    assert hook.points == {1: 0.1, 2: 0.9, 3: 0.3}
    assert list(hook.table().points["step"]) == [1, 2, 3]
    assert isinstance(hook.table().points, pd.DataFrame)
