"""numpyro's NUTS on a PyMC model: single precision, a dense population block, thinned draws.

PyMC's ``pm.sample(nuts_sampler="numpyro")`` runs numpyro in double precision with a diagonal
mass matrix and keeps every draw. On the bundled runs four changes, measured one at a time
(``benchmarks/experiments/sampler_mixing.py``, ``benchmarks/experiments/README.md``), make the
population fit mix within a minute on two cores (``benchmarks/results/sampler_speed.md``):

- **Single precision.** The log density and its gradient cost about half as much in float32 as in
  float64 inside compiled JAX (``benchmarks/results/jax_devices.md``), and the posterior is the
  same within Monte Carlo error (``tests/model/test_nuts.py``, slow lane). The draws are
  returned, and every deterministic computed, in float64.
- **A dense mass-matrix block over the population-level coordinates** (every free variable
  without a run dimension: means, slopes, spreads, group effects), diagonal for the runs' own
  coordinates. The stiffest direction of the posterior and its long ones lie in that block
  (``benchmarks/experiments/results/stiffness.md``): the adapted step size doubles and the
  trees halve (255 -> 127 leapfrog steps).
- **Thinning.** The chains run ``draws * thin`` iterations and keep every ``thin``-th: the
  autocorrelation time of the slowest parameters is 10-15 iterations, so a thinned draw keeps
  nearly all of the information at a fraction of the memory and of every later per-draw cost.
- **A shallower warm-up.** Trees of at most 127 leapfrog steps while the step size and mass matrix
  adapt (:data:`WARMUP_AND_DRAW_TREE_DEPTH`).

It also skips what ``pm.sample`` does that this path does not need (assigning PyMC's step
methods, evaluating the initial points op by op, before the first draw).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import arviz as az
import jax
import numpy as np
import pymc as pm
from numpyro.infer import MCMC, NUTS
from pymc.backends.arviz import coords_and_dims_for_inferencedata, find_constants
from pymc.initial_point import make_initial_point_fn
from pymc.sampling.jax import get_jaxified_graph
from pymc.util import get_default_varnames

from bayesgrpo.errors import BayesGRPOError

#: numpyro's sample statistics under the names PyMC gives them.
_STAT_NAMES = {
    "potential_energy": "lp",
    "adapt_state.step_size": "step_size",
    "num_steps": "n_steps",
    "accept_prob": "acceptance_rate",
    "diverging": "diverging",
    "energy": "energy",
}
#: numpyro's limit on a trajectory's doublings in the warm-up and in the draws. The first warm-up
#: iterations, before the step size and mass matrix are adapted, run trees to the limit (1,023
#: leapfrog steps at depth 10); adapted, the draws of the bundled runs take 127 steps (depth 7).
#: With the warm-up capped at depth 7 a default fit of the bundled runs spends its time on the
#: draws (``benchmarks/experiments/README.md``); the draws keep numpyro's default limit.
WARMUP_AND_DRAW_TREE_DEPTH = (7, 10)
#: Tries at a jittered starting point with a finite log density, per chain.
JITTER_TRIES = 10


@dataclass(frozen=True)
class NutsTimings:
    """Where a fit's wall time went, in seconds."""

    compile_logp: float
    sample: float
    postprocess: float


def population_sites(model: pm.Model, point: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The free variables (value-variable names) without a run dimension.

    Parameters
    ----------
    model : pymc.Model
        A model with a ``"run"`` coordinate; without one every variable counts as population-level.
    point : mapping of str to array, optional
        One value per value variable, to read their shapes from (default: the model's initial
        point, which compiles a function; a sampler that has its starting point passes it).

    Returns
    -------
    tuple of str
    """
    point = model.initial_point() if point is None else point
    n_runs = len(model.coords["run"]) if "run" in model.coords else None
    return tuple(
        value.name
        for value in model.value_vars
        if n_runs is None or np.shape(point[value.name])[:1] != (n_runs,)
    )


def _initial_points(model: pm.Model, logp: Any, chains: int, seed: int, dtype: type) -> dict[str, np.ndarray]:
    """One jittered starting point per chain (PyMC's jitter), each with a finite log density."""
    names = [value.name for value in model.value_vars]
    point_fn = make_initial_point_fn(model=model, jitter_rvs=set(model.free_RVs), return_transformed=True)
    rng = np.random.default_rng(seed)
    points = []
    for chain in range(chains):
        for _ in range(JITTER_TRIES):
            point = point_fn(int(rng.integers(2**30)))
            value = float(logp({name: np.asarray(point[name], dtype) for name in names}))
            if np.isfinite(value):
                break
        else:
            raise BayesGRPOError(
                f"no starting point with a finite log density for chain {chain} in {JITTER_TRIES} tries"
            )
        points.append(point)
    return {name: np.stack([np.asarray(p[name], dtype) for p in points]) for name in names}


def sample_numpyro(
    model: pm.Model,
    *,
    draws: int,
    tune: int,
    chains: int,
    thin: int = 1,
    target_accept: float = 0.9,
    random_seed: int | None = None,
    chain_method: str = "parallel",
    float32: bool = True,
    dense_population: bool = True,
    max_tree_depth: int | tuple[int, int] = WARMUP_AND_DRAW_TREE_DEPTH,
    progressbar: bool = False,
) -> tuple[az.InferenceData, NutsTimings]:
    """Sample ``model`` with numpyro's NUTS and return PyMC's InferenceData layout.

    Parameters
    ----------
    model : pymc.Model
    draws : int
        Draws kept per chain.
    tune : int
        Warm-up iterations per chain (step size and mass matrix adaptation).
    chains : int
    thin : int
        Iterations per kept draw: each chain runs ``draws * thin`` iterations after the warm-up.
    target_accept : float
    random_seed : int, optional
    chain_method : {"parallel", "sequential", "vectorized"}
        numpyro's way of running several chains (``sampling.numpyro_chain_method``).
    float32 : bool
        Sample in single precision (the returned draws are float64).
    dense_population : bool
        A dense mass-matrix block over :func:`population_sites`, diagonal elsewhere.
    max_tree_depth : int or (int, int)
        numpyro's limit on a trajectory's doublings (``2**depth - 1`` leapfrog steps), or one
        limit for the warm-up and one for the draws.
    progressbar : bool

    Returns
    -------
    idata : arviz.InferenceData
        ``posterior`` (free variables on their own scale and every Deterministic, as
        ``pm.sample`` returns them) and ``sample_stats`` (``lp``, ``step_size``, ``n_steps``,
        ``tree_depth``, ``acceptance_rate``, ``diverging``, ``energy``).
    timings : NutsTimings
    """
    if thin < 1:
        raise BayesGRPOError(f"thin={thin}; it must be at least 1")
    start = time.perf_counter()
    names = [value.name for value in model.value_vars]
    logp_graph = get_jaxified_graph(inputs=model.value_vars, outputs=[model.logp()])

    def potential(params: dict[str, Any]) -> Any:
        return -logp_graph(*(params[name] for name in names))[0]

    dtype = np.float32 if float32 else np.float64
    seed = 0 if random_seed is None else int(random_seed)
    was_x64 = bool(jax.config.read("jax_enable_x64"))
    jax.config.update("jax_enable_x64", not float32)
    try:
        with warnings.catch_warnings():
            # float64 constants of the graph taken as float32: the point of single precision
            warnings.filterwarnings("ignore", message=".*Explicitly requested dtype.*")
            jitted = jax.jit(potential)
            init = _initial_points(model, lambda p: -jitted(p), chains, seed, dtype)
            first = {name: values[0] for name, values in init.items()}
            dense = population_sites(model, first) if dense_population else ()
            compiled = time.perf_counter()
            kernel = NUTS(
                potential_fn=potential,
                target_accept_prob=target_accept,
                dense_mass=[dense] if len(dense) > 1 else False,
                max_tree_depth=max_tree_depth,
            )
            mcmc = MCMC(
                kernel,
                num_warmup=tune,
                num_samples=draws * thin,
                num_chains=chains,
                thinning=thin,
                chain_method=chain_method,
                progress_bar=progressbar,
            )
            key = jax.random.PRNGKey(seed)
            keys = jax.random.split(key, chains) if chains > 1 else key
            mcmc.run(
                keys,
                init_params=init if chains > 1 else first,
                extra_fields=tuple(_STAT_NAMES),
            )
            raw = {k: np.asarray(v, np.float64) for k, v in mcmc.get_samples(group_by_chain=True).items()}
            extra = mcmc.get_extra_fields(group_by_chain=True)
    finally:
        jax.config.update("jax_enable_x64", was_x64)
    sampled = time.perf_counter()
    stats: dict[str, np.ndarray] = {}
    for field, name in _STAT_NAMES.items():
        value = np.asarray(extra[field])
        stats[name] = value.astype(np.float64) if value.dtype.kind == "f" else value
    stats["tree_depth"] = np.log2(np.maximum(stats["n_steps"], 1)).astype(int) + 1

    outputs = list(get_default_varnames(model.unobserved_value_vars, include_transformed=False))
    values_fn = get_jaxified_graph(inputs=model.value_vars, outputs=outputs)
    computed = jax.jit(jax.vmap(jax.vmap(values_fn)))(*(raw[name] for name in names))
    posterior = {var.name: np.asarray(value) for var, value in zip(outputs, computed, strict=True)}
    coords, dims = coords_and_dims_for_inferencedata(model)
    idata = az.from_dict(
        posterior=posterior,
        sample_stats=stats,
        constant_data=find_constants(model),
        coords=coords,
        dims=dims,
    )
    for group in (idata.posterior, idata.sample_stats):
        group.attrs.update(
            {"inference_library": "numpyro", "tuning_steps": tune, "thinning": thin, "float32": int(float32)}
        )
    done = time.perf_counter()
    return idata, NutsTimings(compiled - start, sampled - compiled, done - sampled)
