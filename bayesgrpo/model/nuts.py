"""numpyro's NUTS on a PyMC model: single precision, a dense population block, thinned draws.

PyMC's ``pm.sample(nuts_sampler="numpyro")`` runs numpyro in double precision with a diagonal
mass matrix and keeps every draw. On the bundled runs four changes, measured one at a time
(``benchmarks/experiments/README.md: sampler_mixing``, ``benchmarks/experiments/README.md``), make the
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
- **Two flat sites.** numpyro sees one vector per mass-matrix block instead of some fifty named
  variables: its per-site bookkeeping cost as much as the gradient (:func:`flat_layout`).
- **Parallel chains in short calls.** One chain per CPU device as numpyro's ``"parallel"``, but
  ``pmap`` called for :data:`ITERATIONS_PER_CALL` iterations at a time, not once for the whole
  run: XLA's CPU runtime holds memory per iteration while two calls run at once, and numpyro's
  one call grew by gigabytes on 1,000 runs (:func:`_sample_chains_in_calls`).

It also skips what ``pm.sample`` does that this path does not need (assigning PyMC's step
methods, evaluating the initial points op by op, before the first draw).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from operator import attrgetter
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
from tqdm.auto import tqdm

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.build import holds_run_values

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
#: The shortest warm-up that adapts the dense population block by default. The block's covariance
#: is estimated from the warm-up's last windows; on 100 simulated runs (56 population coordinates)
#: a warm-up of 500 iterations left it noisy (r_hat 1.09, bulk ESS 19, where the diagonal matrix
#: gave 1.019 and 240), one of 1,000 did not (1.016 and 297 in 46 s; diagonal 1.013 and 399 in
#: 69 s). ``benchmarks/experiments/README.md``, "The dense block needs its warm-up".
DENSE_MIN_TUNE = 1000
#: Tries at a jittered starting point with a finite log density, per chain.
JITTER_TRIES = 10
#: Most NUTS iterations of each chain in one compiled call of the parallel chains. XLA's CPU
#: runtime holds memory for every iteration of a loop until the call returns when two calls run at
#: once in the process, as the chains of one ``pmap`` do: numpyro's parallel chains, the whole run
#: in one call, grew from 0.5 to 12.8 GiB in three minutes on 1,000 simulated runs; the same
#: sampler in calls of 32 iterations stayed at 3.4 GiB (``benchmarks/results/chain_memory.md``).
#: A plain JAX loop shows it too (``benchmarks/experiments/README.md: xla_loop_memory``). The calls cost
#: 3-7 s on a 40-65 s fit of the bundled runs (``benchmarks/results/sampler_speed.md``), 2 s of it
#: compiling the chains' start in a call of its own.
ITERATIONS_PER_CALL = 32


def _sample_chains_in_calls(
    kernel: NUTS,
    keys: Any,
    init_flat: dict[str, np.ndarray],
    *,
    tune: int,
    draws: int,
    thin: int,
    progressbar: bool = False,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Every chain on its own JAX CPU device (``jax.pmap``), in short compiled calls.

    numpyro's ``"parallel"`` chains run the whole warm-up and every draw in one ``pmap`` call;
    here each call runs at most :data:`ITERATIONS_PER_CALL` iterations of every chain, so the
    memory XLA holds per iteration is given back after each. The warm-up adapts inside
    ``kernel.sample`` as in numpyro's ``MCMC`` (the state counts its iterations against the
    ``tune`` given to ``kernel.init``); every ``thin``-th iteration after it is kept, with its
    sample statistics, as ``MCMC(thinning=thin)`` keeps them. With the same keys and starting
    points the draws are numpyro's own (``tests/model/test_nuts.py``).

    Returns
    -------
    draws : dict
        Flat sites, each ``(chains, draws, size)``.
    stats : dict
        numpyro's sample statistics (:data:`_STAT_NAMES` keys), each ``(chains, draws)``.
    """
    chains = int(np.shape(keys)[0])
    state = jax.pmap(lambda key, params: kernel.init(key, tune, params, (), {}))(keys, init_flat)

    def keep(state: Any) -> tuple[Any, dict[str, Any]]:
        return state.z, {field: attrgetter(field)(state) for field in _STAT_NAMES}

    def iterate_and_keep(state: Any, iterations: Any) -> tuple[Any, tuple[Any, dict[str, Any]]]:
        # a traced trip count: one compiled loop for the warm-up's and the draws' lengths
        state = jax.lax.fori_loop(0, iterations, lambda _, s: kernel.sample(s, (), {}), state)
        return state, keep(state)

    # one compiled call: a scan over up to ``per_call`` kept states, each after its own count of
    # iterations (the warm-up keeps none of them)
    per_call = max(1, ITERATIONS_PER_CALL // thin)
    advance = jax.pmap(lambda state, counts: jax.lax.scan(iterate_and_keep, state, counts))

    def counts(iterations: list[int]) -> np.ndarray:
        padded = iterations + [0] * (per_call - len(iterations))
        return np.tile(np.asarray(padded, np.int32), (chains, 1))

    bar = tqdm(total=tune + draws * thin, desc="NUTS", unit="it", disable=not progressbar)
    for first in range(0, tune, per_call * thin):
        in_call = min(per_call * thin, tune - first)
        state, _ = advance(
            state, counts([thin] * (in_call // thin) + ([in_call % thin] if in_call % thin else []))
        )
        bar.update(in_call)
    kept: list[tuple[Any, dict[str, Any]]] = []
    for first in range(0, draws, per_call):
        in_call = min(per_call, draws - first)
        state, values = advance(state, counts([thin] * in_call))
        kept.append(values)
        bar.update(in_call * thin)
    bar.close()
    kept = jax.device_get(kept)  # each (chains, per_call, ...)
    z = {name: np.concatenate([k[0][name] for k in kept], axis=1)[:, :draws] for name in init_flat}
    stats = {field: np.concatenate([k[1][field] for k in kept], axis=1)[:, :draws] for field in _STAT_NAMES}
    return z, stats


@dataclass(frozen=True)
class NutsTimings:
    """Where a fit's wall time went, in seconds."""

    compile_logp: float
    sample: float
    postprocess: float


def population_sites(model: pm.Model, point: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The free variables (value-variable names) that hold no run's own values.

    A variable holds runs' own values when it has the ``run`` dim, when its first axis is as long
    as the runs, or when the reward model built it for a subset of the runs (the whitened runs'
    coordinates, the centred and non-centred run values: ``build.holds_run_values``). A 100-run
    population put those subsets in the dense block once (556 coordinates, a covariance its
    warm-up could not estimate: trees at numpyro's limit and r_hat 1.56-1.77).

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
    if "run" not in model.coords:
        return tuple(value.name for value in model.value_vars)
    point = model.initial_point() if point is None else point
    n_runs = len(model.coords["run"])
    sites = []
    for value in model.value_vars:
        variable = model.values_to_rvs[value].name
        per_run = (
            holds_run_values(variable)
            or "run" in (model.named_vars_to_dims.get(variable) or ())
            or np.shape(point[value.name])[:1] == (n_runs,)
        )
        if not per_run:
            sites.append(value.name)
    return tuple(sites)


#: The sampler's two coordinates: the population-level variables, one vector with a dense block of
#: the mass matrix, and every other variable, one vector with a diagonal one.
DENSE_BLOCK = "population"
DIAGONAL_BLOCK = "runs"

#: Where each variable sits in the sampler's flat vectors: block -> (name, start, stop, shape).
FlatLayout = dict[str, tuple[tuple[str, int, int, tuple[int, ...]], ...]]


def flat_layout(shapes: Mapping[str, tuple[int, ...]], dense: tuple[str, ...]) -> FlatLayout:
    """Pack the model's value variables into one vector per mass-matrix block.

    numpyro does its bookkeeping (momenta, mass matrix products, U-turn checks) site by site; on
    a model of some fifty value variables that bookkeeping cost more than the gradient itself (on
    the bundled runs about 32 us a leapfrog step, against 27 us for a float32 gradient;
    ``benchmarks/experiments/README.md``). Two flat sites, one per block, cost a few array
    operations each.

    Parameters
    ----------
    shapes : mapping of str to tuple of int
        Each value variable's shape, in the model's order.
    dense : tuple of str
        The variables of the dense block; with fewer than two coordinates there is none.

    Returns
    -------
    FlatLayout
    """
    size = {name: int(np.prod(shape, dtype=int)) for name, shape in shapes.items()}
    in_dense = set(dense) if sum(size[name] for name in dense) > 1 else set()
    layout: FlatLayout = {}
    for block, members in (
        (DENSE_BLOCK, [name for name in shapes if name in in_dense]),
        (DIAGONAL_BLOCK, [name for name in shapes if name not in in_dense]),
    ):
        entries, start = [], 0
        for name in members:
            entries.append((name, start, start + size[name], tuple(shapes[name])))
            start += size[name]
        if entries:
            layout[block] = tuple(entries)
    return layout


def flatten(values: Mapping[str, Any], layout: FlatLayout, batch_ndim: int = 0) -> dict[str, np.ndarray]:
    """Each block's variables concatenated into one vector (after ``batch_ndim`` leading axes)."""
    flat = {}
    for block, entries in layout.items():
        parts = [np.asarray(values[name]) for name, *_ in entries]
        flat[block] = np.concatenate([p.reshape(p.shape[:batch_ndim] + (-1,)) for p in parts], axis=-1)
    return flat


def unflatten(flat: Mapping[str, Any], layout: FlatLayout) -> dict[str, Any]:
    """The value variables from their blocks' vectors (NumPy or JAX; leading axes are kept)."""
    values = {}
    for block, entries in layout.items():
        vector = flat[block]
        batch = tuple(vector.shape[:-1])
        for name, start, stop, shape in entries:
            values[name] = vector[..., start:stop].reshape(batch + shape)
    return values


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
    dense_population: bool | None = None,
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
        How several chains run (``sampling.numpyro_chain_method``): ``"parallel"``, one chain
        per JAX CPU device in short calls (:func:`_sample_chains_in_calls`; numpyro's own
        ``"sequential"`` where there are fewer devices than chains); the others by numpyro's
        ``MCMC``.
    float32 : bool
        Sample in single precision (the returned draws are float64).
    dense_population : bool, optional
        A dense mass-matrix block over :func:`population_sites`, diagonal elsewhere. By default
        only with a warm-up of at least :data:`DENSE_MIN_TUNE` iterations.
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
    if draws < 1 or tune < 0 or chains < 1:
        raise BayesGRPOError(
            f"draws={draws}, tune={tune}, chains={chains}; a fit needs at least one draw and one "
            "chain, and no negative warm-up"
        )
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
            if dense_population is None:
                dense_population = tune >= DENSE_MIN_TUNE
            dense = population_sites(model, first) if dense_population else ()
            layout = flat_layout({name: np.shape(value) for name, value in first.items()}, dense)
            compiled = time.perf_counter()
            kernel = NUTS(
                potential_fn=lambda flat: potential(unflatten(flat, layout)),
                target_accept_prob=target_accept,
                dense_mass=[(DENSE_BLOCK,)] if DENSE_BLOCK in layout else False,
                max_tree_depth=max_tree_depth,
            )
            key = jax.random.PRNGKey(seed)
            keys = jax.random.split(key, chains)
            init_flat = flatten(init, layout, batch_ndim=1)
            if chain_method == "parallel" and chains > jax.local_device_count():
                chain_method = "sequential"  # as numpyro's MCMC would, without its warning
            if chain_method == "parallel" and chains > 1:
                flat_draws, extra = _sample_chains_in_calls(
                    kernel,
                    keys,
                    init_flat,
                    tune=tune,
                    draws=draws,
                    thin=thin,
                    progressbar=progressbar,
                )
            else:
                mcmc = MCMC(
                    kernel,
                    num_warmup=tune,
                    num_samples=draws * thin,
                    num_chains=chains,
                    thinning=thin,
                    chain_method=chain_method,
                    progress_bar=progressbar,
                )
                mcmc.run(
                    keys if chains > 1 else keys[0],
                    init_params=init_flat if chains > 1 else {k: v[0] for k, v in init_flat.items()},
                    extra_fields=tuple(_STAT_NAMES),
                )
                flat_draws = dict(mcmc.get_samples(group_by_chain=True))
                extra = mcmc.get_extra_fields(group_by_chain=True)
            flat_draws = {k: np.asarray(v, np.float64) for k, v in flat_draws.items()}
            raw = unflatten(flat_draws, layout)
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
            {
                "inference_library": "numpyro",
                "tuning_steps": tune,
                "thinning": thin,
                "float32": int(float32),
                "dense_block_size": int(layout[DENSE_BLOCK][-1][2]) if DENSE_BLOCK in layout else 0,
            }
        )
    done = time.perf_counter()
    return idata, NutsTimings(compiled - start, sampled - compiled, done - sampled)
