"""Tests of the curve families (bayesgrpo.model.curves): limits, closed forms, derivatives, inverses,
numpy/PyTensor agreement and gradients. Fast and table-driven; PyTensor graphs are compiled once
per family and reused.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pytensor.graph.basic import Variable

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model import curves
from bayesgrpo.model.curves import (
    CURVES,
    asymptote_from_levels,
    get_curve,
    reward_curve,
    reward_curve_by_levels,
    time_to_fraction,
)

# ------------------------------------------------------------------------------------------
# Parameter grids: rows of (family, shape dict), spanning each parameter's plausible range.
# ------------------------------------------------------------------------------------------

GRIDS: dict[str, dict[str, list[float]]] = {
    "exp": {"tau": [0.01, 0.3, 1.0, 10.0]},
    "weibull": {"tau": [0.05, 1.0, 10.0], "k": [0.3, 1.0, 2.5, 8.0]},
    "logistic": {"t_mid": [0.05, 1.0, 10.0], "B": [0.3, 1.0, 3.0, 10.0]},
    "power": {"tau": [0.05, 1.0, 10.0], "alpha": [0.2, 1.0, 5.0]},
    "oscillator": {"tau": [0.1, 1.0, 5.0], "zeta": [0.05, 0.3, 0.9, 0.999, 1.0, 1.001, 2.0, 50.0, 1e4]},
    "two_timescale": {"tau": [0.05, 1.0], "k": [0.5, 2.5], "odds": [0.01, 0.5, 5.0], "ratio": [0.5, 20.0]},
}


def grid_rows(family: str) -> list[dict[str, float]]:
    names = list(GRIDS[family])
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*GRIDS[family].values())]


ALL_ROWS = [(family, shape) for family in GRIDS for shape in grid_rows(family)]
ROW_IDS = [f"{family}-" + "-".join(f"{k}={v:g}" for k, v in shape.items()) for family, shape in ALL_ROWS]


def scale_of(family: str, shape: dict[str, float]) -> float:
    """A time scale of the curve (where most of the gain happens)."""
    return shape.get("tau", shape.get("t_mid"))


def test_grids_cover_every_family():
    assert set(GRIDS) == set(CURVES)
    for name, family in CURVES.items():
        assert tuple(GRIDS[name]) == family.shape_params


# ------------------------------------------------------------------------------------------
# Registry
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CURVES))
def test_registry_entry_is_complete(name):
    family = get_curve(name)
    assert family.name == name
    assert set(family.priors) == set(family.shape_params)
    for prior in family.priors.values():
        assert np.isfinite(prior.log_centre) and prior.log_scale > 0 and prior.meaning
    assert family.formula and family.citation and family.doc
    assert (family.inverse is None) == (name in ("oscillator", "two_timescale"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        family.name = "other"  # type: ignore[misc]


def test_unknown_family_lists_valid_names():
    with pytest.raises(BayesGRPOError, match="'exp'.*'weibull'.*'logistic'.*'power'.*'oscillator'"):
        get_curve("expo")
    with pytest.raises(BayesGRPOError, match="unknown curve family"):
        reward_curve("sigmoid", np.ones(3), 0.0, 1.0, tau=1.0)


@pytest.mark.parametrize(
    "family, shape, match",
    [
        ("exp", {"tua": 1.0}, r"missing \['tau'\] and unknown \['tua'\]"),
        ("weibull", {"tau": 1.0}, r"missing \['k'\]"),
        ("logistic", {"t_mid": 1.0, "B": 1.0, "k": 2.0}, r"unknown \['k'\]"),
    ],
)
def test_wrong_shape_parameters_raise(family, shape, match):
    with pytest.raises(BayesGRPOError, match=match):
        reward_curve(family, np.ones(3), 0.0, 1.0, **shape)


@pytest.mark.parametrize(
    "call",
    [
        lambda: curves.g_exp(np.array([0.0, 1.0]), -1.0),
        lambda: curves.g_weibull(np.array([0.0, 1.0]), 1.0, 0.0),
        lambda: curves.g_power(np.array([0.0, 1.0]), 1.0, np.nan),
        lambda: curves.g_oscillator(np.array([-1.0, 1.0]), 1.0, 1.0),
        lambda: time_to_fraction("exp", 1.0, tau=1.0),
        lambda: time_to_fraction("oscillator", 0.0, tau=1.0, zeta=0.5),
    ],
    ids=["tau<0", "k=0", "alpha=nan", "t<0", "q=1", "q=0"],
)
def test_invalid_values_raise(call):
    with pytest.raises(BayesGRPOError):
        call()


# ------------------------------------------------------------------------------------------
# Limits: g(0) = 0, g(inf) = 1; broadcasting
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family, shape", ALL_ROWS, ids=ROW_IDS)
def test_g_is_zero_at_zero_and_one_at_infinity(family, shape):
    g = get_curve(family).g
    assert g(np.array([0.0]), **shape)[0] == 0.0
    assert g(0.0, **shape) == 0.0
    assert abs(g(np.array([1e40]), **shape)[0] - 1.0) < 1e-6


@pytest.mark.parametrize("family", list(CURVES))
def test_broadcasting_draws_by_points(family):
    rows = grid_rows(family)[:3]
    shape = {name: np.array([[row[name]] for row in rows]) for name in GRIDS[family]}
    t = np.linspace(0.0, 2.0, 7)
    r0 = np.array([[0.1], [0.2], [0.3]])
    out = reward_curve(family, t, r0, 0.9, **shape)
    assert out.shape == (3, 7) and out.dtype == np.float64
    np.testing.assert_allclose(out[:, 0], r0[:, 0], rtol=0, atol=1e-15)
    for i, row in enumerate(rows):
        np.testing.assert_allclose(out[i], reward_curve(family, t, r0[i, 0], 0.9, **row), rtol=1e-14)
    slope = curves.reward_curve_dt(family, t[1:], r0, 0.9, **shape)
    assert slope.shape == (3, 6)
    assert np.shape(time_to_fraction(family, np.array([0.5, 0.8]), **shape)) == (3, 2)


# ------------------------------------------------------------------------------------------
# Closed forms against direct (naive) numpy
# ------------------------------------------------------------------------------------------


def naive_oscillator(t, tau, zeta):
    """Textbook step responses, one formula per regime (omega, zeta)."""
    w = 2.0 * zeta / tau
    if zeta < 1:
        wd = w * np.sqrt(1 - zeta**2)
        return 1 - np.exp(-zeta * w * t) * (np.cos(wd * t) + zeta / np.sqrt(1 - zeta**2) * np.sin(wd * t))
    if zeta == 1:
        return 1 - np.exp(-w * t) * (1 + w * t)
    r1 = w * (zeta - np.sqrt(zeta**2 - 1))
    r2 = w * (zeta + np.sqrt(zeta**2 - 1))
    return 1 - (r2 * np.exp(-r1 * t) - r1 * np.exp(-r2 * t)) / (r2 - r1)


NAIVE = {
    "exp": lambda t, tau: 1 - np.exp(-t / tau),
    "weibull": lambda t, tau, k: 1 - np.exp(-((t / tau) ** k)),
    "logistic": lambda t, t_mid, B: 1 / (1 + (t_mid / t) ** B),
    "power": lambda t, tau, alpha: 1 - (1 + t / tau) ** (-alpha),
    "oscillator": naive_oscillator,
    "two_timescale": lambda t, tau, k, odds, ratio: (
        (1 - odds / (1 + odds)) * (1 - np.exp(-((t / tau) ** k)))
        + odds / (1 + odds) * (1 - np.exp(-t / (tau * (1 + ratio))))
    ),
}


@pytest.mark.parametrize("family, shape", ALL_ROWS, ids=ROW_IDS)
def test_g_matches_naive_formula(family, shape):
    if family == "oscillator" and shape["zeta"] > 100:
        pytest.skip("the naive overdamped formula loses precision at large zeta (see the limit test)")
    t = scale_of(family, shape) * np.linspace(0.01, 6.0, 300)
    np.testing.assert_allclose(
        get_curve(family).g(t, **shape), NAIVE[family](t, **shape), rtol=1e-9, atol=1e-10
    )


@pytest.mark.parametrize("tau", [0.01, 0.5, 3.0])
def test_exp_equals_weibull_with_k_one(tau):
    t = np.linspace(0.0, 10 * tau, 101)
    np.testing.assert_allclose(curves.g_weibull(t, tau, 1.0), curves.g_exp(t, tau), rtol=1e-14, atol=0)
    np.testing.assert_allclose(
        curves.dg_dt_weibull(t[1:], tau, 1.0), curves.dg_dt_exp(t[1:], tau), rtol=1e-13
    )


@pytest.mark.parametrize("tau, k", [(0.05, 0.7), (0.5, 2.0)])
def test_two_timescale_without_slow_share_is_weibull(tau, k):
    t = np.linspace(0.0, 10 * tau, 101)
    np.testing.assert_allclose(
        curves.g_two_timescale(t, tau, k, 1e-300, 3.0), curves.g_weibull(t, tau, k), rtol=1e-14, atol=0
    )


def test_two_timescale_slow_term_keeps_climbing_after_the_fast_one():
    # share 1/3 on a time constant 10x the fast one: at t = 3 tau the fast term is done and the
    # curve sits at 2/3 + 1/3 (1 - e^-0.3); the rest comes on the slow term's clock
    tau, k, odds, ratio = 0.1, 2.0, 0.5, 9.0
    slow = (1 - np.exp(-0.3)) / 3
    assert curves.g_two_timescale(0.3, tau, k, odds, ratio) == pytest.approx(2 / 3 * (1 - np.exp(-9)) + slow)
    t80 = time_to_fraction("two_timescale", 0.8, tau=tau, k=k, odds=odds, ratio=ratio)
    # 0.8 = 2/3 + (1/3)(1 - exp(-t/1.0)) once the fast term is complete: t = -log(0.6)
    assert t80 == pytest.approx(-np.log(0.6), rel=1e-6)


@pytest.mark.parametrize("t_mid, B", [(0.05, 0.3), (1.0, 1.0), (7.0, 3.0), (100.0, 20.0)])
def test_logistic_is_half_at_t_mid(t_mid, B):
    assert curves.g_logistic(t_mid, t_mid, B) == pytest.approx(0.5, abs=1e-15)
    assert curves.inverse_logistic(0.5, t_mid, B) == pytest.approx(t_mid, rel=1e-15)


@pytest.mark.parametrize("c", [0.1, 1.0, 4.0])
def test_power_tends_to_exp(c):
    t = np.linspace(0.0, 8 * c, 200)
    errors = [
        np.max(np.abs(curves.g_power(t, alpha * c, alpha) - curves.g_exp(t, c))) for alpha in (1e2, 1e4, 1e6)
    ]
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 1e-6


# ------------------------------------------------------------------------------------------
# Oscillator
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tau", [0.05, 1.0, 20.0])
@pytest.mark.parametrize("zeta, tol", [(10.0, 1e-2), (1e3, 1e-6), (1e6, 1e-11), (1e12, 1e-14)])
def test_oscillator_overdamped_limit_is_exp(tau, zeta, tol):
    t = tau * np.linspace(0.0, 12.0, 400)
    np.testing.assert_allclose(curves.g_oscillator(t, tau, zeta), curves.g_exp(t, tau), rtol=0, atol=tol)
    np.testing.assert_allclose(
        curves.dg_dt_oscillator(t[1:], tau, zeta), curves.dg_dt_exp(t[1:], tau), rtol=0, atol=10 * tol / tau
    )
    q = np.array([0.1, 0.5, 0.8, 0.99])
    np.testing.assert_allclose(
        time_to_fraction("oscillator", q, tau=tau, zeta=zeta),
        time_to_fraction("exp", q, tau=tau),
        rtol=10 * tol,
    )


def test_oscillator_tau_is_area_above_curve():
    """Tau = int_0^inf (1 - g) dt for every zeta: the same meaning as exp's tau."""
    tau = 0.7
    t = np.linspace(0.0, 400 * tau, 400_001)
    for zeta in (0.2, 0.7, 1.0, 3.0):
        gap = 1.0 - curves.g_oscillator(t, tau, zeta)
        assert np.trapezoid(gap, t) == pytest.approx(tau, rel=1e-6)


@pytest.mark.parametrize("tau", [0.2, 1.0])
@pytest.mark.parametrize("zeta", [0.05, 0.2, 0.5, 0.9])
def test_oscillator_underdamped_overshoots_with_its_period(tau, zeta):
    omega = curves.oscillator_omega(tau, zeta)
    period = 2 * np.pi / (omega * np.sqrt(1 - zeta**2))
    t = np.linspace(0.0, 3.2 * period, 64_001)
    g = curves.g_oscillator(t, tau, zeta)
    assert g.max() > 1.0
    # Textbook overshoot: 1 + exp(-zeta pi / sqrt(1 - zeta^2)) at t = period / 2.
    assert g.max() == pytest.approx(1 + np.exp(-zeta * np.pi / np.sqrt(1 - zeta**2)), rel=1e-8)
    # Peaks (dg/dt from + to -) at 0.5, 1.5, 2.5 periods: one period apart, the first at half of one.
    dg = curves.dg_dt_oscillator(t, tau, zeta)
    peaks = t[1:][(dg[:-1] > 0) & (dg[1:] <= 0)]
    step = t[1] - t[0]
    np.testing.assert_allclose(peaks, period * np.array([0.5, 1.5, 2.5]), rtol=0, atol=2 * step)
    np.testing.assert_allclose(
        curves.dg_dt_oscillator(np.array([0.5, 1.5]) * period, tau, zeta), 0.0, atol=1e-12 / tau
    )


@pytest.mark.parametrize("tau", [0.1, 1.0, 10.0])
def test_oscillator_continuous_at_critical_damping(tau):
    t = tau * np.concatenate([np.linspace(0.0, 0.05, 50), np.linspace(0.05, 30.0, 500)])
    critical = 1 - np.exp(-2 * t / tau) * (1 + 2 * t / tau)  # zeta = 1: omega = 2 / tau
    np.testing.assert_allclose(curves.g_oscillator(t, tau, 1.0), critical, rtol=0, atol=1e-15)
    dg_critical = curves.dg_dt_oscillator(t, tau, 1.0)
    np.testing.assert_allclose(
        dg_critical, (2 / tau) ** 2 * t * np.exp(-2 * t / tau), rtol=1e-13, atol=1e-300
    )
    # Lipschitz in zeta from both sides (max |dg/dzeta| at zeta = 1 is about 0.26), down to 1e-12.
    for delta in (1e-2, 1e-4, 1e-6, 1e-9, 1e-12):
        for zeta in (1.0 - delta, 1.0 + delta):
            g = curves.g_oscillator(t, tau, zeta)
            dg = curves.dg_dt_oscillator(t, tau, zeta)
            assert np.all(np.isfinite(g)) and np.all(np.isfinite(dg))
            assert np.max(np.abs(g - critical)) <= 0.3 * delta + 1e-15
            assert np.max(np.abs(dg - dg_critical)) <= (0.7 * delta + 1e-15) / tau
    # Differentiable in zeta: the one-sided slopes agree.
    delta = 1e-5
    left = (critical - curves.g_oscillator(t, tau, 1.0 - delta)) / delta
    right = (curves.g_oscillator(t, tau, 1.0 + delta) - critical) / delta
    np.testing.assert_allclose(left, right, rtol=0, atol=1e-5)


def test_oscillator_smooth_across_its_branches():
    """The switch between series and closed forms leaves no step: g is smooth in t and zeta."""
    tau = 1.0
    for zeta in (1 - 1e-4, 1 + 1e-4, 0.99, 1.01):
        # y = (zeta^2 - 1) x^2 crosses the series band edge 1e-3 inside this range of t.
        x_edge = np.sqrt(1e-3 / abs(zeta**2 - 1))
        t = np.linspace(0.5, 1.5, 2001) * x_edge * tau / (2 * zeta)
        g = curves.g_oscillator(t, tau, zeta)
        second_difference = np.abs(np.diff(g, 2))
        assert second_difference.max() < 1e-6 * max(1.0, g.max())
    z = np.linspace(0.99, 1.01, 4001)[:, None]
    g = curves.g_oscillator(np.array([0.01, 0.3, 1.0, 3.0]), tau, z)
    assert np.abs(np.diff(g, 2, axis=0)).max() < 1e-9


def test_oscillator_parametrisation_helpers():
    assert curves.oscillator_omega(0.5, 0.25) == pytest.approx(1.0)
    assert curves.oscillator_tau(1.0, 0.25) == pytest.approx(0.5)


# ------------------------------------------------------------------------------------------
# Derivatives and inverses
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family, shape", ALL_ROWS, ids=ROW_IDS)
def test_derivative_matches_central_differences(family, shape):
    curve = get_curve(family)
    t = scale_of(family, shape) * np.linspace(0.05, 5.0, 60)
    h = 1e-5 * t
    fd = (curve.g(t + h, **shape) - curve.g(t - h, **shape)) / (2 * h)
    dg = curve.dg_dt(t, **shape)
    assert np.all(np.isfinite(dg))
    np.testing.assert_allclose(dg, fd, rtol=1e-5, atol=1e-7 * np.max(np.abs(dg)))


@pytest.mark.parametrize(
    "family, shape, expected",
    [
        ("exp", {"tau": 2.0}, 0.5),
        ("weibull", {"tau": 2.0, "k": 1.0}, 0.5),
        ("weibull", {"tau": 2.0, "k": 3.0}, 0.0),
        ("logistic", {"t_mid": 2.0, "B": 1.0}, 0.5),
        ("logistic", {"t_mid": 2.0, "B": 3.0}, 0.0),
        ("power", {"tau": 2.0, "alpha": 3.0}, 1.5),
        ("oscillator", {"tau": 2.0, "zeta": 0.3}, 0.0),
        ("oscillator", {"tau": 2.0, "zeta": 1.0}, 0.0),
        ("oscillator", {"tau": 2.0, "zeta": 40.0}, 0.0),
    ],
)
def test_derivative_at_zero(family, shape, expected):
    assert get_curve(family).dg_dt(np.array([0.0]), **shape)[0] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("family, shape", ALL_ROWS, ids=ROW_IDS)
def test_time_to_fraction_inverts_g(family, shape):
    curve = get_curve(family)
    q = np.array([1e-4, 0.05, 0.5, 0.8, 0.9, 0.95, 0.999])
    t_q = time_to_fraction(family, q, **shape)
    assert np.all(np.isfinite(t_q)) and np.all(np.diff(t_q) > 0)
    np.testing.assert_allclose(curve.g(t_q, **shape), q, rtol=1e-9, atol=1e-12)
    if family == "oscillator":
        # First crossing: g stays below q before t_q.
        for qi, ti in zip(q, t_q, strict=True):
            assert np.all(curve.g(ti * np.linspace(0.0, 0.999, 200), **shape) < qi)
    else:
        t = scale_of(family, shape) * np.array([0.01, 0.3, 1.0, 2.0])
        g = curve.g(t, **shape)
        keep = (g > 1e-12) & (g < 1 - 1e-6)  # inverse is ill-conditioned where g is flat
        np.testing.assert_allclose(time_to_fraction(family, g[keep], **shape), t[keep], rtol=1e-6)


def test_time_to_fraction_oscillator_vectorised_over_draws():
    rng = np.random.default_rng(0)
    tau = np.exp(rng.normal(np.log(0.3), 1.0, size=(500, 1)))
    zeta = np.exp(rng.normal(np.log(0.7), 0.75, size=(500, 1)))
    q = np.array([0.5, 0.8, 0.95])
    t_q = time_to_fraction("oscillator", q, tau=tau, zeta=zeta)
    assert t_q.shape == (500, 3)
    np.testing.assert_allclose(
        curves.g_oscillator(t_q, tau, zeta), np.broadcast_to(q, t_q.shape), rtol=1e-9, atol=1e-12
    )


# ------------------------------------------------------------------------------------------
# PyTensor: same values as numpy, finite gradients (one compiled function per family)
# ------------------------------------------------------------------------------------------

T_GRID = np.array([0.0, 1e-12, 1e-3, 0.1, 0.5, 1.0, 3.0, 10.0, 1e3, 1e8])
Q_GRID = np.array([0.05, 0.5, 0.8, 0.99])
_COMPILED: dict[str, object] = {}


def compiled(family: str):
    """f(t, q, r0, A, *shape) -> g, dg/dt, R, inverse, d sum g / d shape..., d sum R / d (r0, A)."""
    if family not in _COMPILED:
        curve = get_curve(family)
        t = pt.dvector("t")
        q = pt.dvector("q")
        column = {"shape": (None, 1), "dtype": "float64"}
        r0 = pt.tensor("r0", **column)
        asymptote = pt.tensor("asymptote", **column)
        shape = {name: pt.tensor(name, **column) for name in curve.shape_params}
        g = curve.g(t, **shape)
        dg = curve.dg_dt(t, **shape)
        reward = reward_curve(family, t, r0, asymptote, **shape)
        outputs = [g, dg, reward]
        outputs.append(curve.inverse(q, **shape) if curve.inverse is not None else pt.zeros((1, 1)))
        outputs += pytensor.grad(g.sum(), list(shape.values()))
        outputs += pytensor.grad(reward.sum(), [r0, asymptote])
        _COMPILED[family] = pytensor.function(
            [t, q, r0, asymptote, *shape.values()], outputs, on_unused_input="ignore"
        )
    return _COMPILED[family]


@pytest.mark.parametrize("family", list(CURVES))
def test_pytensor_matches_numpy_with_finite_gradients(family):
    curve = get_curve(family)
    rows = grid_rows(family)
    shape = {name: np.array([[row[name]] for row in rows]) for name in curve.shape_params}
    r0 = np.full((len(rows), 1), 0.2)
    asymptote = np.full((len(rows), 1), 0.7)
    f = compiled(family)
    g, dg, reward, inverse, *grads = f(T_GRID, Q_GRID, r0, asymptote, *shape.values())

    np.testing.assert_allclose(g, curve.g(T_GRID, **shape), rtol=1e-12, atol=1e-15)
    with np.errstate(over="ignore"):
        dg_np = curve.dg_dt(T_GRID, **shape)
    np.testing.assert_allclose(dg, dg_np, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(reward, reward_curve(family, T_GRID, r0, asymptote, **shape), rtol=1e-12)
    if curve.inverse is not None:
        np.testing.assert_allclose(inverse, time_to_fraction(family, Q_GRID, **shape), rtol=1e-12)
    assert g[:, 0].tolist() == [0.0] * len(rows)
    for name, grad in zip([*curve.shape_params, "r0", "asymptote"], grads, strict=True):
        assert grad.shape == (len(rows), 1)
        assert np.all(np.isfinite(grad)), f"non-finite gradient w.r.t. {name}"


@pytest.mark.parametrize("family", list(CURVES))
def test_pytensor_gradient_matches_finite_differences(family):
    curve = get_curve(family)
    rows = [row for row in grid_rows(family) if row.get("zeta", 1.0) < 100]
    shape = {name: np.array([[row[name]] for row in rows]) for name in curve.shape_params}
    t = np.array([0.0, 0.05, 0.3, 1.0, 4.0])
    ones = np.ones((len(rows), 1))
    _, _, _, _, *grads = compiled(family)(t, Q_GRID, 0 * ones, ones, *shape.values())
    for name, grad in zip(curve.shape_params, grads[: len(curve.shape_params)], strict=True):
        h = 1e-6 * shape[name]
        up = curve.g(t, **{**shape, name: shape[name] + h}).sum(axis=1, keepdims=True)
        down = curve.g(t, **{**shape, name: shape[name] - h}).sum(axis=1, keepdims=True)
        np.testing.assert_allclose(grad, (up - down) / (2 * h), rtol=1e-5, atol=1e-7)


def test_pytensor_dispatch_when_only_a_parameter_is_a_tensor():
    tau = pt.dscalar("tau")
    out = curves.g_exp(np.linspace(0.0, 1.0, 5), tau)
    assert isinstance(out, Variable)
    np.testing.assert_allclose(out.eval({tau: 0.5}), curves.g_exp(np.linspace(0.0, 1.0, 5), 0.5))
    with pytest.raises(BayesGRPOError, match="numpy arrays only"):
        time_to_fraction("oscillator", 0.5, tau=tau, zeta=0.5)


# ------------------------------------------------------------------------------------------
# Properties: g within [0, 1] and monotone (hypothesis)
# ------------------------------------------------------------------------------------------

log_uniform = st.floats(min_value=-5.0, max_value=5.0).map(np.exp)
shape_strategy = st.sampled_from(list(CURVES)).flatmap(
    lambda family: st.tuples(
        st.just(family),
        st.fixed_dictionaries({name: log_uniform for name in CURVES[family].shape_params}),
    )
)
t_strategy = st.lists(st.floats(min_value=0.0, max_value=1e6), min_size=2, max_size=40)


@settings(max_examples=300, deadline=None)
@given(family_shape=shape_strategy, t_values=t_strategy)
def test_g_bounded_and_monotone(family_shape, t_values):
    family, shape = family_shape
    t = np.sort(np.array(t_values))
    g = get_curve(family).g(t, **shape)
    dg = get_curve(family).dg_dt(t[t > 0], **shape)
    assert np.all(np.isfinite(g))
    assert np.all(g >= 0.0)
    if family == "oscillator" and shape["zeta"] < 1:
        overshoot = np.exp(-shape["zeta"] * np.pi / np.sqrt(1 - shape["zeta"] ** 2))
        assert np.all(g <= 1.0 + overshoot + 1e-12)
    else:
        assert np.all(g <= 1.0)
        assert np.all(np.diff(g) >= -1e-12)
        assert np.all(dg >= 0.0)


@pytest.mark.parametrize("family", sorted(CURVES))
def test_curve_by_levels_is_the_same_curve_and_passes_through_its_levels(family):
    shape = {name: np.array([0.3, 1.7])[:, None] for name in CURVES[family].shape_params}
    r0, r1 = np.array([[0.1], [0.6]]), np.array([[0.5], [0.4]])
    t = np.linspace(0, 3, 31)
    by_levels = reward_curve_by_levels(family, t, r0, r1, **shape)
    asymptote = asymptote_from_levels(family, r0, r1, **shape)
    np.testing.assert_allclose(
        by_levels, reward_curve(family, t, r0, asymptote, **shape), rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(by_levels[:, 0], r0[:, 0])
    np.testing.assert_allclose(by_levels[:, 10], r1[:, 0])  # t = 1


def test_curve_by_levels_stays_finite_when_the_knee_is_astronomically_late():
    value = reward_curve_by_levels("weibull", np.array([0.0, 0.5, 1.0]), 0.2, 0.2, tau=np.exp(40.0), k=5.0)
    assert np.isfinite(value).all() and np.allclose(value, 0.2)
