"""The PyMC graph of the hierarchical reward-curve model (a pure function of data and config).

For each run ``r`` and curve parameter ``p`` (``r0``, ``r1`` — the levels at ``t = 0`` and
``t = 1``, see ``curves.reward_curve_by_levels`` — on the logit of the normalised reward;
``tau`` and shape parameters on the log of normalised progress)::

    theta[r, p] = p_mu + family[f(r), p] + task[k(r), p]
                  + p_size_slope * log_size[r]
                  + p_r0_slope * (theta[r, r0] - r0_mu)          (p != r0)
                  + p_sd * eta[r, p]

and for the noise ``log sigma[r] = sigma_mu + sigma_samples_slope * log_samples[r] + sigma_sd * eta``.
In a fit that mixes runs on a stated range (``reward_min``/``reward_max``) with runs normalised by
their own observed range, the latter have levels ``p_mu + p_data_offset + p_sd * eta``, no part in
the start's pull, and ``sigma_data_offset`` added to their noise (``bounds_from_data``,
``run_location``).
The reward follows ``y[r, i] ~ StudentT(nu + 1, curve(t[r, i]; theta[r]), sigma[r] * s[r, i])``
where ``s`` is 1/sqrt(points) of a bin. Runs are a ``(run, point)`` matrix with a mask, one
compiled graph for all runs: no loop over runs.

``pooling="none"`` draws every run's parameters from the population prior independently;
``"complete"`` gives all runs one parameter vector. A run is centred (``theta ~ Normal(loc, sd)``)
or non-centred (``theta = loc + sd * z``) by how clearly its data move (``centered_min_snr``):
centred samples far better for informative runs, non-centred for flat, noisy or short ones
(``benchmarks/experiments/README.md``, "Geometry").
A run whose covariate is unknown (model size, samples per step) sits at the covariate's mean
(standardised value 0): imputing it as a latent value leaves the imputed value and the run's own
deviation trading off (measured: correlation -0.94, a ridge that doubled the tree depth).
A run of unknown family or task gets no group effect (it sits at the average group).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc_extras.prior import Prior

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.curves import asymptote_from_levels, get_curve, reward_curve_by_levels
from bayesgrpo.model.data import ModelData
from bayesgrpo.model.precondition import run_laplace
from bayesgrpo.model.structure import (
    LEVEL_PARAMS,
    MIN_GROUP_LEVELS,
    bounds_from_data,
    covariate_used,
    curve_params,
    effect_grouping,
    run_location,
)

POOLINGS: tuple[str, ...] = ("partial", "none", "complete")


def _covariate(values: np.ndarray) -> pt.TensorVariable | None:
    """A standardised covariate with its unknown entries at the mean (0).

    Returns None when fewer than ``MIN_KNOWN_SHARE`` of the runs state it (the covariate then
    plays no part; the fit summary says so).
    """
    if not covariate_used(values):
        return None
    return pt.as_tensor_variable(np.where(np.isfinite(values), values, 0.0))


#: A run with at least this many (binned) points pins its levels (start, level at the horizon)
#: and its noise down, however flat it is: those are centred.
MIN_POINTS_CENTERED = 8


def centering(data: ModelData, centered_min_snr: float) -> dict[str, np.ndarray]:
    """Which runs are parametrised centred, for the levels (and noise) and for the shape.

    A level is pinned by a run's points whether or not the run moves: a flat, long run knows its
    start and end precisely, and a non-centred level whose value the data fix must move with
    every change of the population mean (measured on the bundled runs: the non-centred starts
    of flat runs correlated 0.85-0.9 with each other, a ridge that kept trees 8-9 deep). The
    shape (rate, slow start) is only seen when the run clearly moves: it is centred only then.

    Returns
    -------
    dict with ``"levels"`` and ``"shape"``, boolean arrays of shape (R,)
    """
    points = data.mask.sum(axis=1)
    return {
        "levels": points >= MIN_POINTS_CENTERED,
        "shape": data.signal_to_noise >= centered_min_snr,
    }


def _with_dims(prior: Prior, dims: str) -> Prior:
    return Prior(prior.distribution, **prior.parameters, dims=dims)


#: The free variable of the whitened runs' coordinates (``_whitened_block``).
WHITENED_VARIABLE = "run_whitened"
#: Name endings of the free variables that hold centred or non-centred run values (``_run_level``).
RUN_SUBSET_SUFFIXES = ("_run_centered", "_run_z")


def holds_run_values(name: str) -> bool:
    """Whether the model's random variable ``name`` holds runs' own values.

    Those with a value for every run carry the ``run`` dim; these cover a subset of the runs each
    (the whitened runs, the centred ones, the non-centred ones) and have no dim to say so.
    """
    return name == WHITENED_VARIABLE or name.endswith(RUN_SUBSET_SUFFIXES)


def _run_level(
    name: str,
    loc: pt.TensorVariable,
    sd: pt.TensorVariable,
    centered: np.ndarray,
    n_runs: int,
    whitened: tuple[np.ndarray, pt.TensorVariable] | None = None,
) -> pt.TensorVariable:
    """Run values around ``loc`` with spread ``sd``.

    Runs in ``whitened`` (index, values) take their values from the whitened block (see
    ``create_reward_model``) with the population prior added as a Potential; of the others,
    those where ``centered`` are centred, the rest non-centred.
    """
    loc = loc + pt.zeros(n_runs)
    value = pt.zeros(n_runs)
    taken = np.zeros(n_runs, dtype=bool)
    if whitened is not None and whitened[0].size:
        index, values = whitened
        taken[index] = True
        value = pt.set_subtensor(value[index], values)
        pm.Potential(f"{name}_prior", pm.logp(pm.Normal.dist(mu=loc[index], sigma=sd), values).sum())
    centred_index = np.flatnonzero(centered & ~taken)
    other_index = np.flatnonzero(~centered & ~taken)
    if centred_index.size:
        direct = pm.Normal(f"{name}_centered", mu=loc[centred_index], sigma=sd, shape=centred_index.size)
        value = pt.set_subtensor(value[centred_index], direct)
    if other_index.size:
        z = pm.Normal(f"{name}_z", 0.0, 1.0, shape=other_index.size)
        value = pt.set_subtensor(value[other_index], loc[other_index] + sd * z)
    return pm.Deterministic(name, value, dims="run")


def _group_effect(
    name: str, sd_prior: Prior, index: np.ndarray, levels: tuple[str, ...], dim: str
) -> pt.TensorVariable | None:
    """Non-centred sum-to-zero effects of a grouping (family, task), or None with too few levels.

    Sum-to-zero (``ZeroSumNormal``) keeps the effects from trading off against the population
    mean ``p_mu``: the mean is the average group, the effects are deviations from it. They are
    non-centred (``sd * z``): a handful of groups says little about their spread, and a centred
    effect with an uncertain spread is a funnel.
    """
    if len(levels) < MIN_GROUP_LEVELS:
        return None
    sd = sd_prior.create_variable(f"{name}_{dim}_sd")
    z = pm.ZeroSumNormal(f"{name}_{dim}_z", sigma=1.0, dims=dim)
    effect = pm.Deterministic(f"{name}_{dim}", sd * z, dims=dim)
    padded = pt.concatenate([effect, pt.zeros(1)])  # position -1: no group effect
    return padded[index]


#: Shape parameters a run's own points rarely pin down and whose between-run spread is small:
#: always non-centred, never whitened or centred. ``two_timescale``'s slow term (its share and
#: time) is seen only in runs that keep climbing after their fast rise; whitened or centred, the
#: other runs' values had to follow the spread into its neck (measured on the bundled runs: the
#: spread of ``odds`` at 0.1, divergences at 0.03, 18 of them, bulk ESS 14). The whitened runs'
#: other parameters are conditioned on them (``_Whitening``).
NON_CENTRED_SHAPE: Mapping[str, tuple[str, ...]] = {"two_timescale": ("odds", "ratio")}


#: Prior scale of the whitened coordinates: wide enough (a hundredth of the data's information
#: added) to leave the posterior as it is, finite so the model still has prior draws.
WHITENED_SD = 10.0


class _Whitening:
    """The runs whose data pin their levels down, sampled as ``theta = m + L u`` with ``u`` free.

    ``m`` and ``L L^T`` are each run's Laplace fit on its own data (``model.precondition``): in
    ``u`` a run's posterior is close to a standard normal, its start, rate and shape no longer
    correlated (0.9 between start and rate on the bundled verl runs, which a diagonal mass
    matrix cannot follow: trees 8-9 deep). The population prior of ``theta`` is added as a
    Potential; the map is linear with fixed matrices, so no Jacobian term is needed.

    The shape parameters of ``NON_CENTRED_SHAPE`` stay non-centred from the population (their
    spread is small and a run's points rarely pin them). The whitened parameters are conditioned
    on them: with the Laplace fit in the order ``(r0, *non-centred, *rest)`` and its Cholesky
    factor ``L``, ``u_s = L_ss^-1 (theta_s - m_s - L_s0 u_0)`` is what the non-centred values
    imply and ``theta_rest = m_rest + L_r0 u_0 + L_rs u_s + L_rr u_rest`` (the Laplace fit's
    conditional given them). The start comes first because the non-centred values' location
    follows it (``*_r0_slope``). Whitened on the marginal instead, a change of ``odds`` moved the
    level at the horizon and the rate with it (the Laplace correlation of ``odds`` with ``r1``
    above 0.67 for one run in ten and 0.96 at most on simulated runs,
    ``benchmarks/experiments/README.md: whitening_coupling``), which the diagonal mass matrix had to follow
    run by run.
    """

    def __init__(
        self,
        index: np.ndarray,
        names: tuple[str, ...],
        skipped: tuple[str, ...],
        mean: np.ndarray,
        cov: np.ndarray,
    ) -> None:
        self.index = index
        self.skipped = tuple(name for name in names if name in skipped)
        self.rest = tuple(name for name in names[1:] if name not in skipped)
        order = (names[0], *self.skipped, *self.rest)
        perm = [names.index(name) for name in order]
        chol = np.linalg.cholesky(cov[:, perm][:, :, perm])
        n_skipped = len(self.skipped)
        s = slice(1, 1 + n_skipped)
        r = slice(1 + n_skipped, None)
        self._mean = mean[:, perm]
        self._chol = chol
        self._skipped_inverse = np.linalg.inv(chol[:, s, s]) if n_skipped else np.zeros((index.size, 0, 0))
        self._s, self._r = s, r
        self.free_names = (names[0], *self.rest)
        self.free = pm.Normal(WHITENED_VARIABLE, 0.0, WHITENED_SD, shape=(index.size, len(self.free_names)))

    def first(self) -> pt.TensorVariable:
        """The whitened runs' start (``r0``) values, which depend on their own coordinate only."""
        return self._mean[:, 0] + self._chol[:, 0, 0] * self.free[:, 0]

    def complete(self, given: Mapping[str, pt.TensorVariable]) -> dict[str, pt.TensorVariable]:
        """The other whitened parameters' values, given the non-centred ones' (whitened runs only)."""
        u_first = self.free[:, 0]
        u_rest = self.free[:, 1:]
        mean, chol, s, r = self._mean, self._chol, self._s, self._r
        values = pt.as_tensor_variable(mean[:, r]) + chol[:, r, 0] * u_first[:, None]
        values = values + (pt.as_tensor_variable(chol[:, r, r]) * u_rest[:, None, :]).sum(axis=-1)
        if self.skipped:
            theta_s = pt.stack([given[name] for name in self.skipped], axis=1)
            residual = theta_s - mean[:, s] - chol[:, s, 0] * u_first[:, None]
            u_skipped = (pt.as_tensor_variable(self._skipped_inverse) * residual[:, None, :]).sum(axis=-1)
            values = values + (pt.as_tensor_variable(chol[:, r, s]) * u_skipped[:, None, :]).sum(axis=-1)
        return {name: values[:, j] for j, name in enumerate(self.rest)}


def _whitened_block(
    data: ModelData,
    curve: str,
    priors: Mapping[str, Prior],
    centered: Mapping[str, np.ndarray],
    noise_floor: float,
) -> _Whitening | None:
    """The whitened runs of ``data`` (see ``_Whitening``), or None when there are none."""
    candidates = np.flatnonzero(centered["levels"])
    if candidates.size == 0:
        return None
    names = (*curve_params(curve), "log_sigma")
    mean, chol, informed = run_laplace(data, curve, priors, candidates, noise_floor=noise_floor)
    index, mean, chol = candidates[informed], mean[informed], chol[informed]
    if index.size == 0:
        return None
    cov = chol @ np.swapaxes(chol, -1, -2)
    return _Whitening(index, names, NON_CENTRED_SHAPE.get(curve, ()), mean, cov)


def _complete_whitened(
    whitening: _Whitening | None,
    whitened: dict[str, tuple[np.ndarray, pt.TensorVariable]],
    run_values: Mapping[str, pt.TensorVariable],
) -> None:
    """Add the whitened runs' values that depend on the non-centred shapes, once those exist."""
    if whitening is None or all(name in whitened for name in whitening.rest):
        return
    given = {name: run_values[name][whitening.index] for name in whitening.skipped}
    whitened.update({name: (whitening.index, value) for name, value in whitening.complete(given).items()})


def parametrisation(
    data: ModelData,
    curve: str,
    priors: Mapping[str, Prior],
    centered_min_snr: float = 4.0,
    noise_floor: float = 0.01,
    whiten: bool = True,
) -> dict[str, str]:
    """How each run's parameters are sampled (for the fit summary), by run id.

    ``"whitened"`` (``m + L z`` from the run's Laplace fit), ``"centred"`` (levels and shape),
    ``"centred levels, non-centred shape"`` or ``"non-centred"``, as ``create_reward_model``
    builds them with ``pooling="partial"``.
    """
    centered = centering(data, centered_min_snr)
    whitened = np.zeros(data.n_runs, dtype=bool)
    candidates = np.flatnonzero(centered["levels"])
    if whiten and candidates.size:
        whitened[candidates[run_laplace(data, curve, priors, candidates, noise_floor=noise_floor)[2]]] = True
    labels = {}
    for i, run_id in enumerate(data.run_ids):
        if whitened[i]:
            labels[run_id] = "whitened"
        elif centered["levels"][i]:
            labels[run_id] = "centred" if centered["shape"][i] else "centred levels, non-centred shape"
        else:
            labels[run_id] = "non-centred levels, centred shape" if centered["shape"][i] else "non-centred"
    return labels


def create_reward_model(
    data: ModelData,
    curve: str,
    priors: Mapping[str, Prior],
    *,
    pooling: str = "partial",
    centered_min_snr: float = 4.0,
    noise_floor: float = 0.01,
    whiten: bool = True,
) -> pm.Model:
    """Build the PyMC model of all runs in ``data``.

    One function on purpose: it is the model, one ``pm.Model`` block that reads top to bottom as
    the hierarchy (population means, group effects, run parameters, curve, likelihood).

    Parameters
    ----------
    data : ModelData
        From ``bayesgrpo.model.data.prepare``.
    curve : str
        A curve family of ``bayesgrpo.model.curves.CURVES``.
    priors : mapping of str to Prior
        Complete prior set (``bayesgrpo.model.priors.merge_priors``).
    pooling : {"partial", "none", "complete"}
    centered_min_snr : float
        Runs whose change is at least this clear (``ModelData.signal_to_noise``) are centred,
        the others non-centred. 0 centres all; ``inf`` makes all non-centred.
    noise_floor : float
        Smallest noise scale of one logged point, in normalised reward units.
    whiten : bool
        Sample the parameters of clearly moving runs in whitened coordinates (see
        ``_whitened_block``); False samples them centred.

    Returns
    -------
    pymc.Model
        Free variables per parameter, Deterministics ``<p>_run`` (run values on the
        unconstrained scale), ``log_sigma_run``, ``sigma_run`` (noise scale with its floor),
        ``nu``, and the Potential ``loglike``.
    """
    if pooling not in POOLINGS:
        raise BayesGRPOError(f"pooling={pooling!r}; choose one of {POOLINGS}")
    family_spec = get_curve(curve)
    params = curve_params(curve)
    n_runs, n_points = data.y.shape
    groupings = {
        (dim, level): effect_grouping(data, dim, level)
        for dim in ("family", "task")
        for level in (False, True)
    }
    coords = {"run": list(data.run_ids), "point": np.arange(n_points)}
    for _index, levels, coord in groupings.values():
        coords[coord] = list(levels)
    centered = centering(data, centered_min_snr)
    with pm.Model(coords=coords) as model:
        run_values: dict[str, pt.TensorVariable] = {}
        if pooling == "partial":
            whitening = _whitened_block(data, curve, priors, centered, noise_floor) if whiten else None
            whitened: dict[str, tuple[np.ndarray, pt.TensorVariable]] = {}
            if whitening is not None:
                whitened["r0"] = (whitening.index, whitening.first())
            skipped = NON_CENTRED_SHAPE.get(curve, ())
            size = _covariate(data.log_size)
            samples = _covariate(data.log_samples)
            data_bounded = bounds_from_data(data)
            r0_mu = None
            # the start first (the others' location follows it), then the non-centred shapes (the
            # whitened runs' other values are conditioned on them: ``_Whitening``)
            order = (
                "r0",
                *(p for p in params if p in skipped),
                *(p for p in params if p not in skipped and p != "r0"),
            )
            for p in order:
                if p != "r0" and p not in skipped:
                    _complete_whitened(whitening, whitened, run_values)
                mu = priors[f"{p}_mu"].create_variable(f"{p}_mu")
                effects = pt.zeros(n_runs)
                for dim in ("family", "task"):
                    index, levels, coord = groupings[(dim, p in LEVEL_PARAMS)]
                    effect = _group_effect(p, priors[f"{p}_{dim}_sd"], index, levels, coord)
                    if effect is not None:
                        effects = effects + effect
                if size is not None:
                    effects = effects + priors[f"{p}_size_slope"].create_variable(f"{p}_size_slope") * size
                start_pull = 0.0
                if p != "r0":
                    start_pull = priors[f"{p}_r0_slope"].create_variable(f"{p}_r0_slope") * (
                        run_values["r0"] - r0_mu
                    )
                else:
                    r0_mu = mu
                offset = None
                if p in LEVEL_PARAMS and data_bounded.any():
                    offset = priors[f"{p}_data_offset"].create_variable(f"{p}_data_offset")
                loc = run_location(p, mu, effects, start_pull, data_bounded, offset)
                sd = priors[f"{p}_sd"].create_variable(f"{p}_sd")
                if p in skipped:
                    centred_runs = np.zeros(n_runs, dtype=bool)
                else:
                    centred_runs = centered["levels" if p in LEVEL_PARAMS else "shape"]
                run_values[p] = _run_level(f"{p}_run", loc, sd, centred_runs, n_runs, whitened.get(p))
            loc = priors["sigma_mu"].create_variable("sigma_mu")
            if samples is not None:
                loc = loc + priors["sigma_samples_slope"].create_variable("sigma_samples_slope") * samples
            if data_bounded.any():
                loc = loc + priors["sigma_data_offset"].create_variable("sigma_data_offset") * data_bounded
            sigma_sd = priors["sigma_sd"].create_variable("sigma_sd")
            _complete_whitened(whitening, whitened, run_values)
            log_sigma = _run_level(
                "log_sigma_run", loc, sigma_sd, centered["levels"], n_runs, whitened.get("log_sigma")
            )
        elif pooling == "none":
            for p in params:
                run_values[p] = _with_dims(priors[f"{p}_mu"], "run").create_variable(f"{p}_run")
            log_sigma = _with_dims(priors["sigma_mu"], "run").create_variable("log_sigma_run")
        else:  # complete
            for p in params:
                mu = priors[f"{p}_mu"].create_variable(f"{p}_mu")
                run_values[p] = pm.Deterministic(f"{p}_run", mu + pt.zeros(n_runs), dims="run")
            sigma_mu = priors["sigma_mu"].create_variable("sigma_mu")
            log_sigma = pm.Deterministic("log_sigma_run", sigma_mu + pt.zeros(n_runs), dims="run")

        nu = pm.Deterministic("nu", priors["nu"].create_variable("nu_minus_one") + 1.0)
        r0 = pt.sigmoid(run_values["r0"])
        r1 = pt.sigmoid(run_values["r1"])
        shape = {name: pt.exp(run_values[name]) for name in family_spec.shape_params}
        pm.Deterministic("asymptote_run", asymptote_from_levels(curve, r0, r1, **shape), dims="run")
        t = pt.as_tensor_variable(data.t)
        mean = reward_curve_by_levels(
            curve, t, r0[:, None], r1[:, None], **{k: v[:, None] for k, v in shape.items()}
        )
        # a noise floor (the resolution of a logged reward): without it a run whose points sit on
        # one value (a sparse 0/1 reward that is mostly 0) drives its scale to 0 and the
        # posterior into a spike no sampler can explore
        sigma = pm.Deterministic("sigma_run", pt.sqrt(pt.exp(2 * log_sigma) + noise_floor**2), dims="run")
        scale = sigma[:, None] * data.noise_scale
        logp = pm.logp(pm.StudentT.dist(nu=nu, mu=mean, sigma=scale), pt.as_tensor_variable(data.y))
        pm.Potential("loglike", pt.sum(pt.where(data.mask, logp, 0.0)))
    return model
