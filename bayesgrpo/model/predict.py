"""Posterior draws of reward curves (pure numpy functions of a posterior and the fit data).

All functions are vectorised over draws, runs and steps: no Python loop over draws.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.curves import asymptote_from_levels, get_curve, reward_curve_by_levels
from bayesgrpo.model.data import UNKNOWN, ModelData
from bayesgrpo.model.population_draws import PopulationDraws
from bayesgrpo.model.structure import (
    LEVEL_PARAMS,
    MIN_RUNS_PER_BOUNDS_KIND,
    bounds_from_data,
    curve_params,
    run_location,
)

if TYPE_CHECKING:  # xarray is imported where a function returns its objects: the live path needs none
    import xarray as xr


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def run_draws(posterior: xr.Dataset, curve: str) -> dict[str, np.ndarray]:
    """Run parameters per posterior sample on their natural scales, each of shape (S, R).

    Returns ``r0``, ``r1`` and ``asymptote`` (normalised reward), the shape parameters
    (progress units), ``sigma`` (normalised reward) and ``nu`` (shape (S, 1)).
    """
    stacked = posterior.stack(sample=("chain", "draw"))
    out: dict[str, np.ndarray] = {}
    for name in curve_params(curve):
        values = stacked[f"{name}_run"].transpose("sample", "run").to_numpy()
        out[name] = _sigmoid(values) if name in ("r0", "r1") else np.exp(values)
    shape = {name: out[name] for name in get_curve(curve).shape_params}
    out["asymptote"] = asymptote_from_levels(curve, out["r0"], out["r1"], **shape)
    out["sigma"] = stacked["sigma_run"].transpose("sample", "run").to_numpy()
    out["nu"] = stacked["nu"].to_numpy()[:, None]
    return out


def mean_curve_draws(draws: dict[str, np.ndarray], curve: str, t: np.ndarray) -> np.ndarray:
    """Expected normalised reward, shape (S, R, N), at progress ``t`` of shape (R, N)."""
    shape = {name: draws[name][:, :, None] for name in get_curve(curve).shape_params}
    return reward_curve_by_levels(
        curve, t[None, :, :], draws["r0"][:, :, None], draws["r1"][:, :, None], **shape
    )


def add_noise(mean: np.ndarray, draws: dict[str, np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """Draws of an observed reward: the mean plus Student-t noise of one logged point."""
    nu = draws["nu"][:, :, None]
    noise = rng.standard_t(np.broadcast_to(nu, mean.shape)) * draws["sigma"][:, :, None]
    return mean + noise


def reward_draws(
    posterior: xr.Dataset,
    data: ModelData,
    curve: str,
    steps: np.ndarray,
    *,
    include_noise: bool = False,
    random_seed: int | None = None,
    max_samples: int | None = None,
) -> xr.DataArray:
    """Draws of the reward (in reward units) at ``steps`` for every fitted run.

    Parameters
    ----------
    posterior : xarray.Dataset
    data : ModelData
    curve : str
    steps : array of step numbers, shape (N,)
    include_noise : bool
        Draws of an observed point (curve plus noise) rather than of the curve itself.
    random_seed : int, optional
    max_samples : int, optional
        Thin the posterior to at most this many samples.

    Returns
    -------
    xarray.DataArray
        Dims ``(sample, run, step)``.
    """
    draws = run_draws(posterior, curve)
    n_samples = draws["r0"].shape[0]
    if max_samples is not None and n_samples > max_samples:
        keep = np.linspace(0, n_samples - 1, max_samples).round().astype(int)
        draws = {name: value[keep] for name, value in draws.items()}
    steps = np.asarray(steps, dtype=float)
    mean = mean_curve_draws(draws, curve, data.to_t(steps))
    if include_noise:
        mean = add_noise(mean, draws, np.random.default_rng(random_seed))
    values = data.to_reward(mean, run_axis=1)
    import xarray as xr

    return xr.DataArray(
        values,
        dims=("sample", "run", "step"),
        coords={"run": list(data.run_ids), "step": steps},
        name="reward",
    )


def quantile_columns(quantiles: Sequence[float]) -> list[str]:
    """Column names of quantiles: 0.05 -> ``q05``, 0.5 -> ``q50``, 0.975 -> ``q97.5``."""
    names = []
    for q in quantiles:
        percent = 100 * q
        names.append(f"q{percent:02.0f}" if float(percent).is_integer() else f"q{percent:g}")
    return names


def _group_effect_draws(
    population: PopulationDraws,
    name: str,
    dim: str,
    level: str | None,
    rng: np.random.Generator,
) -> np.ndarray:
    """Draws of one group effect for a new run: the fitted effect of a known level, a fresh
    draw from the between-group spread for a level the fit has not seen, 0 when unknown.

    The fitted effects are sum-to-zero (``ZeroSumNormal(sd)``, :func:`model.build._group_effect`):
    ``K`` exchangeable effects ``N(0, sd^2)`` taken about their own mean, which the population
    mean absorbs. A new level's effect about that same mean is ``e_new - mean(e)``, of variance
    ``sd^2 (1 + 1/K)`` (:func:`new_level_scale`); drawn with ``sd`` alone, a new family would be
    placed as if the K fitted ones had pinned the true mean down.
    """
    n = population.n_samples
    effect_name = f"{name}_{dim}"
    if level is None or effect_name not in population:
        return np.zeros(n)
    levels = population.level_labels(effect_name)
    if level in levels:
        return population.at_level(effect_name, level)
    scale = new_level_scale(len(levels))
    return scale * population[f"{effect_name}_sd"] * rng.standard_normal(n)


def new_level_scale(n_levels: int) -> float:
    """How much wider than the between-group sd a new group's effect is, about the mean of
    ``n_levels`` fitted sum-to-zero effects: ``sqrt(1 + 1/K)``.

    Parameters
    ----------
    n_levels : int
        ``K``, the groups the fit has (at least 1).

    Returns
    -------
    float
    """
    if n_levels < 1:
        raise BayesGRPOError(f"n_levels must be at least 1; got {n_levels}")
    return float(np.sqrt(1.0 + 1.0 / n_levels))


def fitted_size_ranges(data: ModelData, curve: str) -> dict[str, tuple[float, float]]:
    """The standardised log sizes each parameter's size slope was learnt from, per parameter.

    The levels' slopes are learnt from the runs on a stated range only when the fit mixes both
    kinds of bounds (:func:`bounds_from_data`); the shape parameters' from every run of known
    size. A parameter whose slope no run of known size informed gets no entry.

    Parameters
    ----------
    data : ModelData
        The population's data.
    curve : str

    Returns
    -------
    dict
        ``parameter -> (lowest, highest)`` standardised log size.
    """
    known = np.isfinite(data.log_size)
    stated = ~bounds_from_data(data).astype(bool)
    ranges = {}
    for name in curve_params(curve):
        informed = known & stated if name in LEVEL_PARAMS else known
        if informed.any():
            ranges[name] = (float(data.log_size[informed].min()), float(data.log_size[informed].max()))
    return ranges


#: The share of a run's points at its start (end) whose mean is its start (end) level in
#: :func:`family_level_spreads`.
LEVEL_SHARE = 0.1
#: Levels are clipped to this distance from the range's ends before the logit in
#: :func:`family_level_spreads` (a family at 0 or 1 would otherwise count as infinitely far).
LEVEL_CLIP = 0.02


def family_level_spreads(data: ModelData, run_bounds_from_data: bool) -> dict[str, float]:
    """The between-family spread of the levels, read from the population's runs' own points.

    A fit whose levels were learnt from too few families has no family effect on them
    (``r0_family``, ``r1_family``), yet its runs show how far apart families land: the shipped
    population's runs on a stated range end at a median 0.955 for Qwen and 0.702 for Gemma,
    2.2 on the logit scale. For each family among the runs of the same kind of bounds, the
    median over its runs of the mean normalised reward over the first (last)
    :data:`LEVEL_SHARE` of its points; the spread is their standard deviation on the logit
    scale times :func:`new_level_scale` (a new family's effect about the fitted families'
    mean). Size and task differences between the families are in it: a new family at an
    unknown task carries them too.

    Parameters
    ----------
    data : ModelData
        The population's data.
    run_bounds_from_data : bool
        The new run is normalised by its own observed range (no stated range).

    Returns
    -------
    dict
        ``r0_family`` and ``r1_family`` -> spread on the logit scale; empty with fewer than two
        families of that kind.
    """
    kind = bounds_from_data(data).astype(bool) == run_bounds_from_data
    starts: dict[int, list[float]] = {}
    ends: dict[int, list[float]] = {}
    for run in np.flatnonzero(kind):
        family = int(data.family_index[run])
        values = np.asarray(data.y[run], dtype=float)[np.asarray(data.mask[run], dtype=bool)]
        values = values[np.isfinite(values)]
        if family < 0 or values.size == 0:
            continue
        share = max(1, int(round(LEVEL_SHARE * values.size)))
        starts.setdefault(family, []).append(float(values[:share].mean()))
        ends.setdefault(family, []).append(float(values[-share:].mean()))
    if len(ends) < 2:
        return {}
    out = {}
    for name, levels in (("r0_family", starts), ("r1_family", ends)):
        medians = np.clip([np.median(v) for v in levels.values()], LEVEL_CLIP, 1.0 - LEVEL_CLIP)
        logits = np.log(medians / (1.0 - medians))
        out[name] = float(np.std(logits, ddof=1) * new_level_scale(len(levels)))
    return out


def unseen_group_sds(
    data: ModelData,
    curve: str,
    groups: dict[str, str | None],
    prior_sds: dict[str, float],
    run_bounds_from_data: bool | None = None,
) -> dict[str, float]:
    """For a group the fit never saw, the spread of each parameter's between-group effect.

    A population fitted on one family (or whose levels were learnt from runs of one family) has
    no family effect to draw a new family's from: without this, a new family would be predicted
    as confidently as the family it saw. Such a run gets the between-group spread the model
    assumed before the data (``{param}_{dim}_sd``'s prior scale) or, for a family's levels, the
    spread the population's families show (:func:`family_level_spreads`), whichever is larger:
    the between-family spread in full.

    Parameters
    ----------
    data : ModelData
        The population's data.
    curve : str
    groups : dict
        ``"family"``/``"task"`` -> the run's group (None when unknown).
    prior_sds : dict
        ``{param}_{dim}_sd`` -> the prior scale of that spread.
    run_bounds_from_data : bool, optional
        The run is normalised by its own range (True) or on a stated one (False): its family's
        levels then spread at least as the population's families of that kind do. None uses the
        prior scales alone.

    Returns
    -------
    dict
        ``{param}_{dim}`` -> scale, for each parameter whose effect was learnt from runs none of
        which is of the run's group.
    """
    stated = ~bounds_from_data(data).astype(bool)
    observed = {} if run_bounds_from_data is None else family_level_spreads(data, run_bounds_from_data)
    out = {}
    for dim, group in groups.items():
        if group is None or group == UNKNOWN:
            continue
        index = data.family_index if dim == "family" else data.task_index
        names = data.families if dim == "family" else data.tasks
        for name in curve_params(curve):
            informed = stated if name in LEVEL_PARAMS else np.ones_like(stated)
            seen = {names[i] for i in index[informed] if i >= 0}
            if group not in seen:
                key = f"{name}_{dim}"
                out[key] = max(float(prior_sds.get(f"{key}_sd", 0.5)), observed.get(key, 0.0))
    return out


def levels_learnt(data: ModelData, run_bounds_from_data: bool) -> bool:
    """Whether the population learnt where the levels of a run of this bounds kind lie.

    A run on a stated reward range and a run normalised by its own observed range have levels on
    different scales (:func:`model.structure.bounds_from_data`). A fit with fewer than
    ``MIN_RUNS_PER_BOUNDS_KIND`` runs of one kind gives that kind no levels of its own: a run of
    that kind would be placed at the levels of the other kind's runs, a confident answer on the
    wrong scale (measured: leaving out the Qwen family leaves one run on a stated range, and the
    zero-shot 90% intervals of the 23 Qwen runs on a stated range held 43% of their final
    rewards; ``benchmarks/results/transfer_eval.md``).

    Parameters
    ----------
    data : ModelData
        The population's data.
    run_bounds_from_data : bool
        The run is normalised by its own observed range (no stated range).

    Returns
    -------
    bool
    """
    own = np.array([source == "data" for source in data.bounds_source], dtype=bool)
    same_kind = own if run_bounds_from_data else ~own
    return int(same_kind.sum()) >= MIN_RUNS_PER_BOUNDS_KIND


def prior_spec(prior: Any) -> tuple[str, dict[str, Any]]:
    """A prior's distribution name and parameters, from a ``pymc_extras`` ``Prior`` or its JSON form
    (``{"dist": ..., "kwargs": {...}}``, ``RewardModel.prior_config``).
    """
    if isinstance(prior, Mapping):
        return str(prior.get("dist")), dict(prior.get("kwargs", {}))
    return str(getattr(prior, "distribution", None)), dict(getattr(prior, "parameters", {}))


def prior_draws(prior: Any, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws from one of the model's priors (a ``pymc_extras`` ``Prior`` or its JSON form), with
    numpy: a live update needs no PyMC.

    Covers the distributions the default priors use and the common alternatives: Normal,
    HalfNormal, Gamma, Exponential, LogNormal, StudentT and HalfStudentT, with scalar parameters.

    Raises
    ------
    BayesGRPOError
        For another distribution, or a parameter that is itself a distribution.
    """
    name, parameters = prior_spec(prior)
    if any(not np.isscalar(value) for value in parameters.values()):
        raise BayesGRPOError(f"cannot draw from a prior with distributions as parameters: {prior!r}")
    p = {key: float(value) for key, value in parameters.items()}
    if name == "Normal":
        return p.get("mu", 0.0) + p.get("sigma", 1.0) * rng.standard_normal(n)
    if name == "HalfNormal":
        return np.abs(p.get("sigma", 1.0) * rng.standard_normal(n))
    if name == "Gamma" and "alpha" in p and "beta" in p:
        return rng.gamma(p["alpha"], 1.0 / p["beta"], n)
    if name == "Exponential":
        return rng.exponential(1.0 / p.get("lam", 1.0), n)
    if name == "LogNormal":
        return np.exp(p.get("mu", 0.0) + p.get("sigma", 1.0) * rng.standard_normal(n))
    if name == "StudentT":
        return p.get("mu", 0.0) + p.get("sigma", 1.0) * rng.standard_t(p["nu"], n)
    if name == "HalfStudentT":
        return np.abs(p.get("sigma", 1.0) * rng.standard_t(p["nu"], n))
    raise BayesGRPOError(f"cannot draw from a {name} prior with numpy: {prior!r}")


def prior_level_draws(
    priors: Mapping[str, Any], n: int, random_seed: int | None = None
) -> dict[str, np.ndarray]:
    """A run's levels as the model's priors place them, before any run was seen.

    ``r0 = r0_mu + r0_sd * z`` and ``r1 = r1_mu + r1_r0_slope * (r0 - r0_mu) + r1_sd * z'``, each
    hyper-parameter drawn from its prior: the answer for a run whose levels the population did
    not learn (:func:`levels_learnt`).

    Parameters
    ----------
    priors : mapping
        The population's priors (``RewardModel.prior_config``, or ``RewardModel.priors``).
    n : int
        Draws.
    random_seed : int, optional

    Returns
    -------
    dict
        ``r0`` and ``r1`` (logit of the normalised level), each shape (n,).
    """
    rng = np.random.default_rng(random_seed)
    r0_mu = prior_draws(priors["r0_mu"], n, rng)
    r0 = r0_mu + prior_draws(priors["r0_sd"], n, rng) * rng.standard_normal(n)
    r1 = (
        prior_draws(priors["r1_mu"], n, rng)
        + prior_draws(priors["r1_r0_slope"], n, rng) * (r0 - r0_mu)
        + prior_draws(priors["r1_sd"], n, rng) * rng.standard_normal(n)
    )
    return {"r0": r0, "r1": r1}


def size_effect_draws(
    slope: np.ndarray,
    log_size: float | np.ndarray,
    size_range: tuple[float, float] | None,
    extrapolation_sd: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Draws of a size effect, honest beyond the sizes the slope was learnt from.

    Inside the fitted range the effect is the slope times the standardised log size. Beyond it
    the fitted trend goes on in the median (on the bundled runs it predicts a held-out size
    better than stopping it at the edge: ``benchmarks/results/transfer_eval.md``), and a random
    walk is added whose spread grows with the distance from the edge: per standard deviation of
    log size, the slope's own size (nothing past the edge says whether the trend stops or
    doubles) plus ``extrapolation_sd`` (the slope's prior scale: what the model believed of a
    size effect before the data spoke). A 70B run predicted from runs of 0.5-7B therefore gets
    a wide interval, not a confident extension of their trend: on the shipped population a
    new family at 70B ends in [0.52, 1.00] on a 0..1 range (0.5 per unit alone gave
    [0.992, 1.000]).

    Parameters
    ----------
    slope : ndarray, shape (S,)
        Posterior draws of the size slope.
    log_size : float or ndarray of shape (S,)
        The new run's standardised log size (one per draw where it is integrated over).
    size_range : (float, float), optional
        The standardised log sizes the slope was learnt from (:func:`fitted_size_ranges`); None
        extrapolates the slope as it is.
    extrapolation_sd : float
        Spread added per unit of standardised log size beyond the range, on top of ``|slope|``.
    rng : numpy Generator

    Returns
    -------
    ndarray, shape (S,)
    """
    size = np.asarray(log_size, dtype=float)
    if size_range is None:
        return slope * size
    beyond = np.abs(size - np.clip(size, *size_range))
    if not np.any(beyond):  # inside the fitted sizes: the fitted trend, no draw taken from rng
        return slope * size
    step_sd = extrapolation_sd + np.abs(slope)
    return slope * size + step_sd * beyond * rng.standard_normal(slope.shape)


def new_run_draws(
    posterior: PopulationDraws | xr.Dataset,
    curve: str,
    *,
    family_level: str | None = None,
    task_level: str | None = None,
    log_size: float = np.nan,
    log_samples: float = np.nan,
    bounds_from_data: bool = False,
    size_ranges: dict[str, tuple[float, float]] | None = None,
    extrapolation_sd: float = 0.5,
    unseen_group_sd: dict[str, float] | None = None,
    prior_levels: Mapping[str, np.ndarray] | None = None,
    random_seed: int | None = None,
) -> dict[str, np.ndarray]:
    """Draws of a new run's parameters from the population posterior, on the model's scales.

    The run is placed in the population as the model places a fitted run (``model.build``):
    its family and task effects (a fresh draw from the between-group spread for a level the fit
    has not seen, none when unknown), its standardised covariates (0, the mean, when unknown),
    and its start's pull on the other parameters. One value per posterior sample: no loop over draws.

    Parameters
    ----------
    posterior : PopulationDraws or xarray.Dataset
        A partial-pooling posterior (hyper-parameters present), or its group-level draws
        (:attr:`RewardModel.population_draws <bayesgrpo.model.reward_model.RewardModel.population_draws>`,
        which a live summary loads without the posterior).
    curve : str
    family_level, task_level : str, optional
        The run's level among the model's effect levels (``model.structure.effect_levels``); a level
        not among them is treated as new, None as unknown.
    log_size, log_samples : float
        Standardised covariates (``ModelData.size_standardizer`` applied); NaN when unknown.
    bounds_from_data : bool
        The run's reward is normalised by its own observed range (no stated bounds): when the
        population has separate levels for such runs (``model.structure.bounds_from_data``), it gets them.
    size_ranges : dict, optional
        Per parameter, the standardised log sizes its size slope was learnt from
        (:func:`fitted_size_ranges`): beyond them the trend's spread grows with the distance
        (:func:`size_effect_draws`). None extends every slope as it is, with no added spread.
    extrapolation_sd : float
        Spread per unit of standardised log size beyond the fitted sizes on top of the slope's
        own size (default 0.5, the size slopes' prior scale).
    unseen_group_sd : dict, optional
        ``{param}_{dim}`` -> a spread for a group the fit has no effect of and never saw
        (:func:`unseen_group_sds`): the run's effect is drawn with a half-normal scale of it.
    prior_levels : mapping, optional
        ``r0`` and ``r1`` draws, shape (S,), for a run whose levels the population did not
        learn (:func:`levels_learnt`, :func:`prior_level_draws`): they replace the population's
        levels, and the shape parameters take no pull from a start on another scale.
    random_seed : int, optional

    Returns
    -------
    dict of str to ndarray, each shape (S,)
        ``r0``, ``r1`` (logit of the normalised level), the shape parameters (log), ``log_sigma``
        and ``nu``.
    """
    rng = np.random.default_rng(random_seed)
    stacked = (
        posterior if isinstance(posterior, PopulationDraws) else PopulationDraws.from_posterior(posterior)
    )
    n = stacked.n_samples
    # an unknown covariate sits at the mean (0), as a fitted run of unknown size does
    size = float(log_size) if np.isfinite(log_size) else 0.0
    samples = float(log_samples) if np.isfinite(log_samples) else 0.0
    out: dict[str, np.ndarray] = {}
    r0_mu = stacked["r0_mu"]
    data_bounded = float(bounds_from_data and "r0_data_offset" in stacked)
    for name in curve_params(curve):
        if prior_levels is not None and name in prior_levels:
            out[name] = np.asarray(prior_levels[name], dtype=float)
            continue
        mu = stacked[f"{name}_mu"]
        effects = np.zeros(n)
        for dim, level in (("family", family_level), ("task", task_level)):
            # levels of a fit mixing both kinds of reward bounds have their own groupings
            # (model.structure.effect_grouping); a data-bounded run takes no level effects
            coord = f"level_{dim}" if f"{name}_level_{dim}" in stacked else dim
            if coord != dim and data_bounded:
                continue
            effects = effects + _group_effect_draws(stacked, name, coord, level, rng)
            unseen = (unseen_group_sd or {}).get(f"{name}_{dim}")
            if unseen is not None and f"{name}_{coord}" not in stacked:
                spread = np.abs(unseen * rng.standard_normal(n))  # the spread's half-normal prior
                effects = effects + spread * rng.standard_normal(n)
        if f"{name}_size_slope" in stacked:
            size_range = None if size_ranges is None else size_ranges.get(name)
            effects = effects + size_effect_draws(
                stacked[f"{name}_size_slope"], size, size_range, extrapolation_sd, rng
            )
        pull = (
            stacked[f"{name}_r0_slope"] * (out["r0"] - r0_mu)
            if name != "r0" and prior_levels is None
            else 0.0
        )
        offset = stacked[f"{name}_data_offset"] if f"{name}_data_offset" in stacked else None
        loc = run_location(name, mu, effects, pull, data_bounded, offset)
        out[name] = loc + stacked[f"{name}_sd"] * rng.standard_normal(n)
    loc = stacked["sigma_mu"]
    if "sigma_samples_slope" in stacked:
        loc = loc + stacked["sigma_samples_slope"] * samples
    if data_bounded and "sigma_data_offset" in stacked:
        loc = loc + stacked["sigma_data_offset"]
    out["log_sigma"] = loc + stacked["sigma_sd"] * rng.standard_normal(n)
    out["nu"] = stacked["nu"].copy()
    return out
