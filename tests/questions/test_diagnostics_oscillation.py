"""Oscillation diagnostic: the LOO decision rule on fake results (fast), the model's log density
against its closed form, the wiring into ``diagnose`` and the CLI, and real fits (slow).
"""

from __future__ import annotations

import json
import math

import arviz as az
import jax
import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayesgrpo.model.datasets
from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.interfaces.cli import main
from bayesgrpo.logs.table import RunsTable, coerce_metadata
from bayesgrpo.model.curves import reward_curve
from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.questions.diagnostics import by_run
from bayesgrpo.questions.diagnostics import oscillation as dg

STEPS = np.arange(1, 121, dtype=float)
T = (STEPS - 1) / 119  # progress as fit_oscillation sees it (horizon = last logged step)


def _ringing(zeta: float = 0.2, period: float = 0.3) -> np.ndarray:
    """Oscillator step response 0.2 -> 0.7 with a period of ``period`` spans (36 steps)."""
    omega = 2 * np.pi / (period * np.sqrt(1 - zeta**2))
    return reward_curve("oscillator", T, 0.2, 0.7, tau=2 * zeta / omega, zeta=zeta)


# --------------------------------------------------------------------------------------------
# The decision rule on fake LOO results
# --------------------------------------------------------------------------------------------


def _fake_idata(loglik: np.ndarray) -> az.InferenceData:
    return az.from_dict(posterior={"a": np.zeros(loglik.shape[:2])}, log_likelihood={"y": loglik})


def test_loo_difference_matches_arviz_compare():
    rng = np.random.default_rng(0)
    better = rng.normal(-1.0, 0.3, (2, 200, 40))
    worse = better - rng.gamma(1.0, 0.4, (1, 1, 40)) + rng.normal(0, 0.05, (2, 200, 40))
    loo_better = az.loo(_fake_idata(better), pointwise=True)
    loo_worse = az.loo(_fake_idata(worse), pointwise=True)
    diff, se = dg.loo_difference(loo_better.loo_i.values, loo_worse.loo_i.values)
    table = az.compare({"better": _fake_idata(better), "worse": _fake_idata(worse)})
    assert table.index[0] == "better"
    assert diff == pytest.approx(table.loc["worse", "elpd_diff"])
    assert se == pytest.approx(table.loc["worse", "dse"])


def test_loo_difference_by_hand():
    diff, se = dg.loo_difference([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    assert diff == 6.0 and se == pytest.approx(math.sqrt(3 * 2 / 3))  # var([1, 2, 3]) = 2/3


def test_loo_difference_rejects_unpaired_points():
    with pytest.raises(BayesGRPOError, match="one length"):
        dg.loo_difference(np.zeros(5), np.zeros(4))


@pytest.mark.parametrize(
    ("elpd_diff", "se", "prob_underdamped", "clear"),
    [
        (10.0, 2.0, 0.99, True),
        (6.0, 2.9, 1.0, True),  # 6 > 4 and > 5.8
        (6.0, 3.1, 1.0, False),  # within two standard errors
        (3.9, 0.5, 1.0, False),  # below the minimum difference
        (4.0, 0.5, 1.0, False),  # strictly greater is needed
        (10.0, 1.0, 0.85, False),  # the oscillator fit does not clearly ring
        (-8.0, 1.0, 1.0, False),  # the overdamped family is better
    ],
)
def test_oscillation_decision_rule(elpd_diff, se, prob_underdamped, clear):
    assert dg.oscillation_is_clear(elpd_diff, se, prob_underdamped) is clear


def test_oscillator_summary_closed_forms():
    zeta = np.array([0.2, 0.5, 1.5])
    period_t = 0.25
    omega = np.array([2 * np.pi / (period_t * np.sqrt(1 - z**2)) if z < 1 else 10.0 for z in zeta])
    tau = 2 * zeta / omega
    out = dg.oscillator_summary(
        tau, zeta, np.full(3, 0.1), np.full(3, 0.6), steps_per_unit=200.0, reward_range=2.0
    )
    assert out["period"][:2] == pytest.approx([50.0, 50.0])  # 0.25 spans of 200 steps
    assert np.isinf(out["period"][2]) and out["overshoot"][2] == 0.0
    expected = np.exp(-np.pi * zeta[:2] / np.sqrt(1 - zeta[:2] ** 2))  # 0.527, 0.163
    assert out["overshoot"][:2] == pytest.approx(expected)
    # g(1) is within 1% of 1 here (envelope exp(-zeta omega) <= exp(-5.1)), so the gain is
    # r1 - r0 = 0.5 to within 1%
    assert out["overshoot_reward"][:2] == pytest.approx(expected * 0.5 * 2.0, rel=0.01)


# --------------------------------------------------------------------------------------------
# Data and model plumbing (no sampling)
# --------------------------------------------------------------------------------------------


def test_one_run_data_is_padded_normalised_and_binned():
    (t, y, scale, mask), steps_per_unit, reward_range, n = dg._one_run_data(STEPS, 2.0 + 0.5 * T, 0.0, 4.0)
    assert all(len(a) == dg.OSC_MAX_POINTS for a in (t, y, scale, mask))
    assert n <= dg.OSC_MAX_POINTS and mask.sum() == n and not mask[n:].any()
    assert steps_per_unit == 119.0 and reward_range == 4.0
    assert t[0] == 0.0 and t[n - 1] == pytest.approx(1.0, abs=0.05)
    assert y[:n] == pytest.approx((2.0 + 0.5 * t[:n]) / 4.0)  # linear: bin means stay on the line
    assert scale[0] == 1.0 and scale[n - 1] < 1.0  # early points kept, late ones binned
    short, _, _, n_short = dg._one_run_data(STEPS[:30], np.zeros(30), None, None)
    assert n_short == 30 and short[3].sum() == 30


def test_single_run_log_density_is_student_t():
    data, *_ = dg._one_run_data(STEPS, 0.3 + 0.4 * (1 - np.exp(-T / 0.2)), 0.0, 1.0)
    with jax.enable_x64(True):
        names, _, log_density = dg._compiled_fit("exp", dg.OSC_MAX_POINTS, 4, 4)
        point = {
            "logit_r0": -0.5,
            "logit_r1": 0.8,
            "log_tau": math.log(0.2),
            "log_sigma": -3.0,
            "nu_minus_one_log__": math.log(4.0),
        }
        x = np.array([[point[n] for n in names]])
        logp = float(np.asarray(log_density(x, *data))[0])
    t, y, scale, mask = data
    r0, r1 = 1 / (1 + np.exp(0.5)), 1 / (1 + np.exp(-0.8))
    mean = reward_curve("exp", t, r0, r0 + (r1 - r0) / (1 - np.exp(-1 / 0.2)), tau=0.2)
    sigma = np.sqrt(np.exp(-6.0) + dg.OSC_NOISE_FLOOR**2) * scale
    loglik = stats.t.logpdf(y, df=5.0, loc=mean, scale=sigma)[mask > 0].sum()
    prior = (
        stats.norm.logpdf(-0.5, -0.5, 1.5)
        + stats.norm.logpdf(0.8, 0.5, 1.5)
        + stats.norm.logpdf(math.log(0.2), math.log(0.3), dg.OSC_TAU_LOG_SCALE)
        + stats.norm.logpdf(-3.0, -3.0, 1.0)
        + stats.gamma.logpdf(4.0, 2.0, scale=10.0)
        + math.log(4.0)
    )  # log-Jacobian of nu - 1
    assert logp == pytest.approx(loglik + prior, rel=1e-9)


def test_short_series_are_not_fitted():
    assert dg.detect_oscillation(STEPS[:10], _ringing()[:10]) == []
    with pytest.raises(BayesGRPOError, match="at least 20"):
        dg.fit_oscillation(STEPS[:10], _ringing()[:10])


# --------------------------------------------------------------------------------------------
# The finding, from a fake fit
# --------------------------------------------------------------------------------------------


def _fake_fit(elpd_diff: float, zeta: float = 0.2) -> dg.OscillationFit:
    rng = np.random.default_rng(0)
    z = zeta * np.exp(rng.normal(0, 0.05, 600))
    ringing = {
        "zeta": z,
        "period": 36.0 * np.exp(rng.normal(0, 0.02, 600)),
        "overshoot": np.full(600, 0.5),
        "overshoot_reward": np.full(600, 0.25),
    }
    return dg.OscillationFit(
        elpd={"oscillator": 120.0, "exp": 120.0 - elpd_diff - 5, "weibull": 120.0 - elpd_diff},
        elpd_se={f: 8.0 for f in dg.OSC_FAMILIES},
        rival="weibull",
        elpd_diff=elpd_diff,
        elpd_diff_se=3.0,
        prob_underdamped=float(np.mean(z < 1)),
        ringing=ringing,
        pareto_k_bad={"oscillator": 1, "exp": 0, "weibull": 0},
        divergences={f: 0 for f in dg.OSC_FAMILIES},
        n_points=52,
        seconds=1.0,
    )


@pytest.mark.parametrize(("elpd_diff", "fires"), [(30.0, True), (5.0, False)])
def test_detect_oscillation_reports_the_evidence(monkeypatch, elpd_diff, fires):
    monkeypatch.setattr(dg, "fit_oscillation", lambda *a, **k: _fake_fit(elpd_diff))
    found = dg.detect_oscillation(STEPS, _ringing(), run_id="ring")
    assert bool(found) is fires
    if fires:
        (f,) = found
        assert (f.name, f.severity, f.first_step, f.last_step) == ("oscillation", "warning", 1, 120)
        ev = f.evidence
        assert (ev["rival"], ev["elpd_diff"], ev["elpd_diff_se"]) == ("weibull", 30.0, 3.0)
        assert ev["zeta_low"] < 0.2 < ev["zeta_high"] and ev["zeta"] == pytest.approx(0.2, rel=0.02)
        assert ev["period_low"] < 36.0 < ev["period_high"]
        assert ev["overshoot"] == 0.5 and ev["pareto_k_bad"] == "oscillator: 1 of 52"
        assert "period about 36 steps" in f.action


def _tiny_table() -> RunsTable:
    points = pd.DataFrame({"run_id": "ring", "step": STEPS.astype("int64"), "reward": _ringing()})
    return RunsTable(points=points, runs=coerce_metadata(pd.DataFrame({"run_id": ["ring"]})))


def _fake_detect(steps, reward, **kwargs):
    ev = {"elpd_diff": 30.0, "zeta": 0.2, "period": 36.0}
    return [dg.Finding(kwargs["run_id"], "oscillation", "warning", 1, 120, ev, "lower the LR")]


def test_diagnose_runs_oscillation_only_when_asked(monkeypatch):
    monkeypatch.setattr(by_run, "detect_oscillation", _fake_detect)
    assert "oscillation" not in set(by_run.diagnose(_tiny_table())["name"])
    table = by_run.diagnose(_tiny_table(), oscillation=True)
    assert list(table.loc[table["name"] == "oscillation", "run_id"]) == ["ring"]


def test_cli_diagnose_prints_and_dumps_oscillation(monkeypatch, capsys):
    monkeypatch.setattr(by_run, "detect_oscillation", _fake_detect)
    monkeypatch.setattr(bayesgrpo.model.datasets, "load_bundled", lambda warn=False: _tiny_table())
    assert main(["diagnose", "--bundled", "--oscillation"]) == 0
    out = capsys.readouterr().out
    assert "[warning] oscillation (steps 1-120)" in out and "zeta=0.2" in out
    assert main(["diagnose", "--bundled", "--oscillation", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["evidence"]["period"]) for r in rows if r["name"] == "oscillation"] == [
        ("oscillation", 36.0)
    ]
    assert main(["diagnose", "--bundled"]) == 0
    assert "oscillation" not in capsys.readouterr().out


# --------------------------------------------------------------------------------------------
# Real fits (slow): simulated ringing, Weibull and exp runs; a real run where the oscillator
# wins by LOO without ringing
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_ringing_run_is_found_with_its_damping_ratio_and_period():
    y = _ringing(zeta=0.2, period=0.3) + np.random.default_rng(1).normal(0, 0.04, len(T))
    (f,) = dg.detect_oscillation(STEPS, y, lower=0.0, upper=1.0, run_id="ring")
    ev = f.evidence
    assert ev["elpd_diff"] > dg.OSC_MIN_ELPD_DIFF and ev["elpd_diff"] > dg.OSC_SE_MULT * ev["elpd_diff_se"]
    assert ev["zeta_low"] <= 0.2 <= ev["zeta_high"]
    assert ev["period_low"] <= 0.3 * 119 <= ev["period_high"]
    assert ev["overshoot_low"] <= np.exp(-np.pi * 0.2 / np.sqrt(0.96)) <= ev["overshoot_high"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "mean",
    [
        reward_curve("weibull", T, 0.2, 0.7, tau=0.3, k=2.0),
        reward_curve("exp", T, 0.2, 0.7, tau=0.2),
    ],
    ids=["weibull", "exp"],
)
def test_overdamped_runs_raise_no_oscillation(mean):
    y = mean + np.random.default_rng(2).normal(0, 0.04, len(T))
    fit = dg.fit_oscillation(STEPS, y, lower=0.0, upper=1.0)
    assert not fit.clear and fit.elpd_diff < dg.OSC_MIN_ELPD_DIFF


@pytest.mark.slow
def test_real_delayed_start_beats_weibull_without_ringing():
    # verl PPO, Qwen2.5-0.5B: flat for ~20 steps, then a sharp rise to a plateau. The oscillator
    # (critically damped: zeta > 1) predicts it better than weibull by LOO, yet does not ring

    table = load_bundled(warn=False)
    (run_id,) = [r for r in table.run_ids if r.endswith("prompt1024-resp512-0.567")]
    frame = table.run(run_id)
    fit = dg.fit_oscillation(frame["step"], frame["reward"], lower=0.0, upper=1.0)
    assert fit.prob_underdamped < dg.OSC_PROB_UNDERDAMPED and not fit.clear
    assert dg.detect_oscillation(frame["step"], frame["reward"], lower=0.0, upper=1.0) == []
