"""Oscillation: the oscillator curve family against the overdamped ones, by LOO, on one run.

Each family is a single-run model sampled by numpyro's NUTS, compiled once per process and reused
for every run (a few seconds a run). PyMC, PyTensor, JAX and numpyro are imported only when a fit
runs. The finding is raised when the oscillator predicts the run clearly better
(:func:`oscillation_is_clear`), with the damping ratio, the period and the overshoot as evidence.
"""

from __future__ import annotations

import functools
import logging
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.logs.table import RunsTable, coerce_metadata
from bayesgrpo.model.curves import CURVES, asymptote_from_levels, oscillator_omega, reward_curve_by_levels
from bayesgrpo.model.data import prepare
from bayesgrpo.model.priors import default_priors
from bayesgrpo.model.structure import curve_params
from bayesgrpo.questions.diagnostics.finding import ACTIONS, Finding
from bayesgrpo.questions.diagnostics.trend import clean_series, edge_count, noise_level

logger = logging.getLogger(__name__)

# --- oscillation ------------------------------------------------------------------------------
#: Families fitted to one run: the oscillator and the overdamped families it must beat.
OSC_FAMILIES: tuple[str, ...] = ("oscillator", "exp", "weibull")
#: "Clearly better": the oscillator's ELPD exceeds the best overdamped family's by more than this
#: (a difference of a few units is within LOO's own noise: Sivula, Magnusson and Vehtari 2022) ...
OSC_MIN_ELPD_DIFF = 4.0
#: ... and by more than this many standard errors of the paired difference ...
OSC_SE_MULT = 2.0
#: ... with the oscillator ringing: ``P(zeta < 1)`` at least this.
OSC_PROB_UNDERDAMPED = 0.9
#: LOO points whose Pareto k exceeds ArviZ's threshold ``min(1 - 1/log10(S), PARETO_K_BAD)`` for
#: S draws (0.64 for 2 x 300) are unreliable (Vehtari et al. 2024); they are counted in the evidence.
PARETO_K_BAD = 0.7
#: Fewest finite points to look for oscillation.
OSC_MIN_POINTS = 20
#: Every run is fitted on this many points (binned by ``model.data.prepare`` when longer, padded
#: and masked when shorter), so one compiled model serves every run.
OSC_MAX_POINTS = 60
#: Prior scale of ``log tau`` in the single-run fits. The population model's (1, around 0.3 of
#: the span) puts a ringing run with several periods (``tau`` about 0.01: ``tau = 2 zeta /
#: omega``) three scales out; 2 reaches it. Used for every family, so the comparison is fair.
OSC_TAU_LOG_SCALE = 2.0
#: Smallest noise scale of one point, in normalised reward (as the population model's).
OSC_NOISE_FLOOR = 0.01
#: Sampler settings of each single-run fit.
OSC_DRAWS = 300
OSC_TUNE = 300
OSC_CHAINS = 2
OSC_TARGET_ACCEPT = 0.9

# --------------------------------------------------------------------------------------------
# Oscillation: the oscillator family against overdamped ones, by LOO
# --------------------------------------------------------------------------------------------


def loo_difference(pointwise_a: Any, pointwise_b: Any) -> tuple[float, float]:
    """ELPD difference of two models and its standard error, from pointwise LOO values.

    The paired estimate of ``arviz.compare``: ``sum(a_i - b_i)`` and ``sqrt(n * var(a_i - b_i))``
    (``var`` with divisor ``n``, as ArviZ).

    Parameters
    ----------
    pointwise_a, pointwise_b : array_like, shape (n,)
        Pointwise ``elpd_loo`` of the two models on the same points (``arviz.loo(...,
        pointwise=True).loo_i``).

    Returns
    -------
    elpd_diff, se : float
        Positive ``elpd_diff``: model ``a`` predicts left-out points better.
    """
    a = np.asarray(pointwise_a, dtype=float)
    b = np.asarray(pointwise_b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise BayesGRPOError(
            f"pointwise LOO values must be 1-d arrays of one length >= 2; got {a.shape} and {b.shape}."
        )
    diff = a - b
    return float(diff.sum()), float(math.sqrt(diff.size * np.var(diff)))


def oscillation_is_clear(elpd_diff: float, se: float, prob_underdamped: float) -> bool:
    """The decision rule: the oscillator predicts clearly better, and rings.

    ``elpd_diff > OSC_MIN_ELPD_DIFF`` and ``elpd_diff > OSC_SE_MULT * se`` (a difference of a
    few ELPD units is within LOO's own noise, and one within two standard errors may be chance),
    and ``P(zeta < 1) >= OSC_PROB_UNDERDAMPED`` (an oscillator fit that does not ring is no
    oscillation: with ``zeta >= 1`` it is another monotone curve).
    """
    return bool(
        elpd_diff > OSC_MIN_ELPD_DIFF
        and elpd_diff > OSC_SE_MULT * se
        and prob_underdamped >= OSC_PROB_UNDERDAMPED
    )


def oscillator_summary(
    tau: Any, zeta: Any, r0: Any, r1: Any, *, steps_per_unit: float, reward_range: float
) -> dict[str, np.ndarray]:
    """Ringing of oscillator draws: damping ratio, period and overshoot, per draw.

    Parameters
    ----------
    tau, zeta, r0, r1 : array_like, shape (S,)
        Draws of the oscillator's parameters (normalised progress and reward).
    steps_per_unit : float
        Steps per unit of normalised progress.
    reward_range : float
        Reward units per unit of normalised reward.

    Returns
    -------
    dict of str to ndarray, shape (S,)
        ``zeta``; ``period`` in steps, ``2 pi / (omega sqrt(1 - zeta^2))`` with
        ``omega = 2 zeta / tau`` (``inf`` where ``zeta >= 1``); ``overshoot``, the first peak's
        excess over the asymptote as a share of the gain, ``exp(-pi zeta / sqrt(1 - zeta^2))``
        (0 where ``zeta >= 1``); ``overshoot_reward``, the same in reward units.
    """
    tau, zeta, r0, r1 = (np.asarray(v, dtype=float) for v in (tau, zeta, r0, r1))
    under = zeta < 1.0
    root = np.sqrt(np.where(under, 1.0 - zeta**2, 1.0))
    omega = oscillator_omega(tau, zeta)
    period = np.where(under, 2.0 * np.pi / (omega * root), np.inf) * steps_per_unit
    overshoot = np.where(under, np.exp(-np.pi * zeta / root), 0.0)
    gain = asymptote_from_levels("oscillator", r0, r1, tau=tau, zeta=zeta) - r0
    return {
        "zeta": zeta,
        "period": period,
        "overshoot": overshoot,
        "overshoot_reward": overshoot * np.abs(gain) * reward_range,
    }


@dataclass(frozen=True)
class OscillationFit:
    """The oscillator and overdamped families fitted to one run, compared by LOO.

    Attributes
    ----------
    elpd : dict of str to float
        ``elpd_loo`` of each family.
    elpd_se : dict of str to float
    rival : str
        The overdamped family with the highest ``elpd_loo``.
    elpd_diff, elpd_diff_se : float
        ``elpd_loo(oscillator) - elpd_loo(rival)`` and its paired standard error.
    prob_underdamped : float
        Posterior ``P(zeta < 1)`` of the oscillator fit.
    ringing : dict of str to ndarray
        :func:`oscillator_summary` of the oscillator's draws.
    pareto_k_bad : dict of str to int
        Points whose Pareto k exceeds ArviZ's threshold (see :data:`PARETO_K_BAD`), per family:
        LOO is unreliable there.
    divergences : dict of str to int
    n_points : int
        Points fitted (after binning).
    seconds : float
        Wall time of the three fits and the LOO comparison.
    """

    elpd: dict[str, float]
    elpd_se: dict[str, float]
    rival: str
    elpd_diff: float
    elpd_diff_se: float
    prob_underdamped: float
    ringing: dict[str, np.ndarray]
    pareto_k_bad: dict[str, int]
    divergences: dict[str, int]
    n_points: int
    seconds: float

    @property
    def clear(self) -> bool:
        """:func:`oscillation_is_clear` of this fit."""
        return oscillation_is_clear(self.elpd_diff, self.elpd_diff_se, self.prob_underdamped)


def _shape_prior_scale(family: str, name: str) -> float:
    """Prior scale of a shape parameter's log in the single-run fits (see :data:`OSC_TAU_LOG_SCALE`)."""
    return OSC_TAU_LOG_SCALE if name == "tau" else CURVES[family].priors[name].log_scale


def _single_run_graph(family: str, n_points: int) -> tuple[list[str], list[Any], list[Any], Any]:
    """The single-run model of one family: PyMC variables, data inputs, outputs.

    ``logit r0, logit r1 ~`` the population model's default priors for a run (``r0_mu``,
    ``r1_mu``), log shape parameters as :data:`bayesgrpo.model.curves.CURVES` with ``tau``'s scale
    widened, ``log sigma`` and ``nu`` as the population model; ``y ~ StudentT(nu, R(t),
    sigma * scale)`` on the points where ``mask``.

    Returns
    -------
    names : list of str
        Names of the free (unconstrained) variables, in the order of ``value_vars``.
    value_vars : list of TensorVariable
    data_inputs : list of TensorVariable
        Symbolic ``t, y, scale, mask`` (length ``n_points``).
    outputs : tuple of TensorVariable
        The model's joint log density and the pointwise log-likelihood (0 where masked out).
    """
    import pymc as pm
    import pytensor.tensor as pt
    from pytensor.graph.replace import clone_replace

    priors = default_priors(family)
    spec = CURVES[family]
    with pm.Model() as model:
        shared = {name: pm.Data(name, np.zeros(n_points)) for name in ("t", "y", "scale", "mask")}
        values = {}
        for p in curve_params(family):
            if p in spec.shape_params:
                values[p] = pm.Normal(f"log_{p}", spec.priors[p].log_centre, _shape_prior_scale(family, p))
            else:
                values[p] = priors[f"{p}_mu"].create_variable(f"logit_{p}")
        log_sigma = priors["sigma_mu"].create_variable("log_sigma")
        nu = priors["nu"].create_variable("nu_minus_one") + 1.0
        shape = {name: pt.exp(values[name]) for name in spec.shape_params}
        mean = reward_curve_by_levels(
            family, shared["t"], pt.sigmoid(values["r0"]), pt.sigmoid(values["r1"]), **shape
        )
        sigma = pt.sqrt(pt.exp(2.0 * log_sigma) + OSC_NOISE_FLOOR**2) * shared["scale"]
        observed = shared["mask"] > 0
        pointwise = pt.where(
            observed, pm.logp(pm.StudentT.dist(nu=nu, mu=mean, sigma=sigma), shared["y"]), 0.0
        )
        pm.Potential("loglike", pointwise.sum())
    inputs = {name: pt.vector(name, dtype="float64") for name in shared}
    replace = {shared[name]: inputs[name] for name in shared}
    (pointwise_values,) = model.replace_rvs_by_values([pointwise])  # in terms of the free variables
    outputs = clone_replace([model.logp(), pointwise_values], replace=replace)
    names = [v.name for v in model.value_vars]
    return names, list(model.value_vars), list(inputs.values()), outputs


@functools.cache
def _compiled_fit(
    family: str, n_points: int, draws: int, tune: int
) -> tuple[list[str], Callable[..., Any], Callable[..., Any]]:
    """One family's single-run sampler, compiled once (JAX) and reused for every run.

    Call it, and what it returns, inside ``jax.enable_x64(True)``.

    Returns
    -------
    names : list of str
        The free variables, in the order of a point's coordinates.
    sample : callable
        ``sample(keys, x0, t, y, scale, mask) -> (draws, divergent, loglik)``: numpyro's NUTS
        (``tune`` warm-up iterations, then ``draws``), one chain per key, all chains vectorised;
        ``draws`` (chains, draws, P) unconstrained, ``loglik`` (chains, draws, n_points).
    log_density : callable
        ``log_density(xs, t, y, scale, mask)`` of a batch of points ``xs`` (B, P).
    """
    import jax
    from numpyro.infer.hmc import hmc
    from pymc.sampling.jax import get_jaxified_graph

    names, value_vars, data_inputs, outputs = _single_run_graph(family, n_points)
    n_params = len(names)
    jax_fn = get_jaxified_graph(inputs=[*value_vars, *data_inputs], outputs=outputs)

    def logp_and_pointwise(x: Any, data: tuple[Any, ...]) -> tuple[Any, Any]:
        logp, pointwise = jax_fn(*(x[i] for i in range(n_params)), *data)
        return logp, pointwise

    def one_chain(key: Any, x0: Any, *data: Any) -> tuple[Any, Any, Any]:
        init_kernel, sample_kernel = hmc(potential_fn=lambda x: -logp_and_pointwise(x, data)[0], algo="NUTS")
        state = init_kernel(x0, num_warmup=tune, target_accept_prob=OSC_TARGET_ACCEPT, rng_key=key)

        def step(state: Any, _: Any) -> tuple[Any, tuple[Any, Any]]:
            state = sample_kernel(state)
            return state, (state.z, state.diverging)

        _, (z, divergent) = jax.lax.scan(step, state, None, length=tune + draws)
        z, divergent = z[tune:], divergent[tune:]
        loglik = jax.vmap(lambda x: logp_and_pointwise(x, data)[1])(z)
        return z, divergent, loglik

    sample = jax.jit(jax.vmap(one_chain, in_axes=(0, 0, None, None, None, None)))
    log_density = jax.jit(
        jax.vmap(lambda x, *data: logp_and_pointwise(x, data)[0], in_axes=(0, None, None, None, None))
    )
    return names, sample, log_density


def _logit_clipped(value: float) -> float:
    """Logit of a normalised level, clipped into [0.02, 0.98]."""
    v = min(max(value, 0.02), 0.98)
    return math.log(v / (1.0 - v))


def _start_grid(names: list[str], y: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Candidate starting points (B, P): the run's edge levels and noise, shapes on a grid.

    Ringing fits are multimodal in the period; NUTS starts from the best of these.
    """
    obs = y[mask > 0]
    k = edge_count(len(obs))
    base = {
        "logit_r0": _logit_clipped(float(np.median(obs[:k]))),
        "logit_r1": _logit_clipped(float(np.median(obs[-k:]))),
        "log_sigma": math.log(max(noise_level(obs), OSC_NOISE_FLOOR)),
        "nu_minus_one_log__": math.log(10.0),
    }
    grids = {
        "log_tau": np.log(np.geomspace(0.003, 3.0, 16)),
        "log_zeta": np.log([0.08, 0.15, 0.3, 0.6, 1.2, 2.5]),
        "log_k": np.log([0.5, 1.0, 2.0, 4.0]),
    }
    axes = [grids[n] if n in grids else np.array([base[n]]) for n in names]
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=-1)


def _fit_family(
    family: str, data: tuple[np.ndarray, ...], *, draws: int, tune: int, chains: int, seed: int
) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """Sample one family's single-run model: (draws by name (chains, draws), loglik, divergences)."""
    import jax

    with jax.enable_x64(True):
        names, sample, log_density = _compiled_fit(family, len(data[0]), draws, tune)
        grid = _start_grid(names, data[1], data[3])
        scores = np.asarray(log_density(grid, *data))
        best = grid[int(np.nanargmax(np.where(np.isfinite(scores), scores, -np.inf)))]
        rng = np.random.default_rng(seed)
        x0 = best + rng.normal(0.0, 0.05, size=(chains, len(names)))
        keys = jax.random.split(jax.random.PRNGKey(seed), chains)
        z, divergent, loglik = sample(keys, x0, *data)
        z, loglik = np.asarray(z), np.asarray(loglik)
    posterior = {name: z[..., i] for i, name in enumerate(names)}
    return posterior, loglik, int(np.asarray(divergent).sum())


def _one_run_data(
    x: np.ndarray, y: np.ndarray, lower: float | None, upper: float | None
) -> tuple[tuple[np.ndarray, ...], float, float, int]:
    """Padded ``(t, y, scale, mask)`` of one run, normalised and binned by ``model.data.prepare``.

    Returns the arrays (length :data:`OSC_MAX_POINTS`), steps per unit of progress, the reward
    range of the normalisation, and the number of points.
    """
    points = pd.DataFrame({"run_id": "run", "step": x.astype("int64"), "reward": y})
    meta = {
        "run_id": ["run"],
        "reward_min": [np.nan if lower is None else lower],
        "reward_max": [np.nan if upper is None else upper],
    }
    table = RunsTable(
        points=points.drop_duplicates("step", keep="last"), runs=coerce_metadata(pd.DataFrame(meta))
    )
    data = prepare(table, horizon=float(x[-1]), max_points=OSC_MAX_POINTS)
    n = int(data.mask[0].sum())
    padded = []
    for values, fill in ((data.t, 0.0), (data.y, 0.0), (data.noise_scale, 1.0), (data.mask, 0.0)):
        row = np.full(OSC_MAX_POINTS, fill)
        row[:n] = values[0, :n]
        padded.append(row.astype(float))
    steps_per_unit = float(data.progress_scale[0] / data.step_to_progress[0])
    return tuple(padded), steps_per_unit, float(data.upper[0] - data.lower[0]), n


def fit_oscillation(
    steps: Any,
    reward: Any,
    *,
    lower: float | None = None,
    upper: float | None = None,
    draws: int = OSC_DRAWS,
    tune: int = OSC_TUNE,
    chains: int = OSC_CHAINS,
    random_seed: int = 0,
) -> OscillationFit:
    """Fit one run with the oscillator and the overdamped families and compare them by LOO.

    The reward is normalised and binned as for the population model (``model.data.prepare``,
    at most :data:`OSC_MAX_POINTS` points, progress 0 to 1 over the logged steps). Each family
    of :data:`OSC_FAMILIES` is a single-run model (no pooling) sampled by numpyro's NUTS,
    compiled once per family and reused for every run; its pointwise log-likelihood gives
    ``arviz.loo``.

    Parameters
    ----------
    steps, reward : array_like, shape (n,)
    lower, upper : float, optional
        Known reward bounds (else the observed range, widened as ``prepare`` does).
    draws, tune, chains : int
    random_seed : int

    Returns
    -------
    OscillationFit

    Raises
    ------
    BayesGRPOError
        With fewer than :data:`OSC_MIN_POINTS` finite points.
    """
    import arviz as az

    x, y = clean_series(steps, reward)
    if len(x) < OSC_MIN_POINTS:
        raise BayesGRPOError(f"fit_oscillation needs at least {OSC_MIN_POINTS} finite points; got {len(x)}.")
    start = time.perf_counter()
    data, steps_per_unit, reward_range, n = _one_run_data(x, y, lower, upper)
    keep = data[3] > 0
    loo: dict[str, Any] = {}
    divergences: dict[str, int] = {}
    oscillator: dict[str, np.ndarray] = {}
    for i, family in enumerate(OSC_FAMILIES):
        posterior, loglik, divergences[family] = _fit_family(
            family, data, draws=draws, tune=tune, chains=chains, seed=random_seed + i
        )
        idata = az.from_dict(posterior=posterior, log_likelihood={"y": loglik[..., keep]})
        with warnings.catch_warnings():  # high Pareto k: counted in the result instead
            warnings.filterwarnings("ignore", message="Estimated shape parameter of Pareto")
            loo[family] = az.loo(idata, pointwise=True)
        if family == "oscillator":
            oscillator = posterior
    overdamped = [f for f in OSC_FAMILIES if f != "oscillator"]
    rival = max(overdamped, key=lambda f: float(loo[f].elpd_loo))
    diff, se = loo_difference(loo["oscillator"].loo_i.values, loo[rival].loo_i.values)
    flat = {name: v.ravel() for name, v in oscillator.items()}
    tau, zeta = np.exp(flat["log_tau"]), np.exp(flat["log_zeta"])
    ringing = oscillator_summary(
        tau,
        zeta,
        _sigmoid(flat["logit_r0"]),
        _sigmoid(flat["logit_r1"]),
        steps_per_unit=steps_per_unit,
        reward_range=reward_range,
    )
    return OscillationFit(
        elpd={f: float(loo[f].elpd_loo) for f in OSC_FAMILIES},
        elpd_se={f: float(loo[f].se) for f in OSC_FAMILIES},
        rival=rival,
        elpd_diff=diff,
        elpd_diff_se=se,
        prob_underdamped=float(np.mean(zeta < 1.0)),
        ringing=ringing,
        pareto_k_bad={
            f: int((np.asarray(loo[f].pareto_k) > float(loo[f].good_k)).sum()) for f in OSC_FAMILIES
        },
        divergences=divergences,
        n_points=n,
        seconds=time.perf_counter() - start,
    )


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


def _interval(values: np.ndarray) -> tuple[float, float, float]:
    """Median and 90% interval (``inf`` allowed)."""
    low, mid, high = np.quantile(values, [0.05, 0.5, 0.95])
    return float(mid), float(low), float(high)


def detect_oscillation(
    steps: Any,
    reward: Any,
    *,
    lower: float | None = None,
    upper: float | None = None,
    run_id: str = "",
    draws: int = OSC_DRAWS,
    tune: int = OSC_TUNE,
    chains: int = OSC_CHAINS,
    random_seed: int = 0,
) -> list[Finding]:
    """The reward rings: the oscillator family predicts clearly better than overdamped ones.

    :func:`fit_oscillation` fits the run with the ``oscillator`` family and with ``exp`` and
    ``weibull`` and compares them by LOO (``arviz.loo``); :func:`oscillation_is_clear` decides.
    The evidence: the ELPD difference to the best overdamped family and its standard error, the
    damping ratio ``zeta``, the period ``2 pi / (omega sqrt(1 - zeta^2))`` in steps and the first
    overshoot (share of the gain and reward units), each as a median with its 90% interval (the
    period and overshoot over the underdamped draws), and the points where LOO is unreliable
    (Pareto k above ArviZ's threshold, see :data:`PARETO_K_BAD`).

    Parameters
    ----------
    steps, reward : array_like, shape (n,)
    lower, upper : float, optional
        Known reward bounds.
    run_id : str
    draws, tune, chains, random_seed
        As :func:`fit_oscillation`.

    Returns
    -------
    list of Finding
        Empty (also for series shorter than :data:`OSC_MIN_POINTS`), or one ``"oscillation"``
        finding of severity ``"warning"`` over the whole run.
    """
    x, y = clean_series(steps, reward)
    if len(x) < OSC_MIN_POINTS:
        return []
    fit = fit_oscillation(
        x, y, lower=lower, upper=upper, draws=draws, tune=tune, chains=chains, random_seed=random_seed
    )
    logger.debug(
        "run %s: oscillator - %s elpd %.2f +- %.2f, P(zeta<1) %.2f (%.1f s)",
        run_id,
        fit.rival,
        fit.elpd_diff,
        fit.elpd_diff_se,
        fit.prob_underdamped,
        fit.seconds,
    )
    if not fit.clear:
        return []
    evidence: dict[str, Any] = {
        "signal": "reward",
        "test": "LOO (arviz.loo): oscillator against exp and weibull",
        "rival": fit.rival,
        "elpd_diff": fit.elpd_diff,
        "elpd_diff_se": fit.elpd_diff_se,
        **{f"elpd_{f}": v for f, v in fit.elpd.items()},
        "prob_underdamped": fit.prob_underdamped,
    }
    underdamped = fit.ringing["zeta"] < 1.0
    for name in ("zeta", "period", "overshoot", "overshoot_reward"):
        values = fit.ringing[name] if name == "zeta" else fit.ringing[name][underdamped]
        mid, low, high = _interval(values)
        evidence.update({name: mid, f"{name}_low": low, f"{name}_high": high})
    bad = {f: k for f, k in fit.pareto_k_bad.items() if k}
    evidence["pareto_k_bad"] = ", ".join(f"{f}: {k} of {fit.n_points}" for f, k in bad.items()) or "none"
    if any(fit.divergences.values()):
        evidence["divergences"] = ", ".join(f"{f}: {k}" for f, k in fit.divergences.items() if k)
    return [
        Finding(
            run_id,
            "oscillation",
            "warning",
            int(x[0]),
            int(x[-1]),
            evidence,
            ACTIONS["oscillation"].format(zeta=evidence["zeta"], period=evidence["period"]),
        )
    ]
