"""Samplers for the reward-curve model, and the checks every fit reports in plain words.

numpyro's NUTS (JAX) is the default: measured fastest per effective sample on the bundled runs
(``benchmarks/sampler_speed.py``), run by ``bayesgrpo.model.nuts`` in single precision with a
dense mass-matrix block over the population-level parameters. Its chains run in parallel, one per
CPU core, when JAX has not started yet in the process (:func:`use_cores_for_chains`). PyMC's own
NUTS, nutpie (Rust NUTS, JAX gradients) and the approximations ADVI and Pathfinder are available
for comparison and speed.
"""

from __future__ import annotations

import logging
import os
import re
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from bayesgrpo.errors import BayesGRPOError, FitTooLargeError, FitWarning

if TYPE_CHECKING:
    import arviz as az
    import pymc as pm

logger = logging.getLogger(__name__)

_DEVICE_COUNT_FLAG = re.compile(r"--xla_force_host_platform_device_count=(\d+)")

SAMPLERS: tuple[str, ...] = ("nutpie", "pymc", "numpyro", "advi", "pathfinder")
#: numpyro's NUTS (JAX): on the bundled runs the sampler with the most effective draws per second
#: (``benchmarks/results/sampler_speed.md``).
DEFAULT_SAMPLER = "numpyro"
#: MCMC iterations per kept draw of a default fit: the slowest parameters of the bundled runs'
#: population take 10-15 iterations to forget where they were, so keeping every fourth iteration
#: loses little information and keeps the posterior (and every per-draw cost after it) small.
DEFAULT_THIN = 4


#: The samplers that compile PyTensor's C backend (the others compile the graph to JAX).
C_BACKEND_SAMPLERS: tuple[str, ...] = ("pymc", "advi", "pathfinder")
#: The system packages that give PyTensor the BLAS it links its C code against (Debian/Ubuntu).
BLAS_PACKAGES_DEBIAN = "libopenblas-dev libgfortran-12-dev"


def resolve_pytensor_blas(sampler: str = DEFAULT_SAMPLER) -> str:
    """Find the BLAS PyTensor links its C code against, once per process, and say what it means.

    PyTensor looks for a BLAS the first time a graph rewrite asks for one: even a graph compiled to
    JAX, which never uses it, asks. With none installed (a pip install on a machine without a
    system BLAS) PyTensor warns that its C operations will be slow. bayesgrpo's default sampler
    compiles to JAX (XLA links its own BLAS), so for it the search is resolved here and a missing
    BLAS is logged, not warned. For the samplers that run PyTensor's C code (``"pymc"``, ADVI,
    Pathfinder) a missing BLAS makes them slower: a :class:`~bayesgrpo.errors.FitWarning` says so
    and names the packages to install. A BLAS set by the user (``PYTENSOR_FLAGS``,
    ``.pytensorrc``) is used as it is.

    Parameters
    ----------
    sampler : str
        The sampler about to run.

    Returns
    -------
    str
        PyTensor's BLAS link flags (empty when no BLAS was found).
    """
    import pytensor

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        flags = str(pytensor.config.blas__ldflags)  # the first read searches, then it is kept
    searched_without_success = any("BLAS" in str(w.message) for w in caught)
    for other in caught:
        if "BLAS" not in str(other.message):
            warnings.warn_explicit(other.message, other.category, other.filename, other.lineno)
    if flags:
        return flags
    advice = (
        f"PyTensor found no BLAS to link its C code against (Debian/Ubuntu: apt-get install "
        f"{BLAS_PACKAGES_DEBIAN}; conda: pytensor from conda-forge brings one)"
    )
    if sampler in C_BACKEND_SAMPLERS:
        message = f"{advice}: sampler={sampler!r} runs PyTensor's C code and will be slower."
        warnings.warn(message, FitWarning, stacklevel=3)
    elif searched_without_success:
        logger.info("%s; sampler=%r compiles to JAX and does not use it.", advice, sampler)
    return flags


def use_cores_for_chains(chains: int) -> int:
    """Give JAX one CPU device per chain (up to the cores there are), so chains run in parallel.

    numpyro runs chains in parallel over JAX devices, and JAX has one CPU device unless
    ``--xla_force_host_platform_device_count`` says otherwise before it starts: on one device
    the chains run one after the other (a 2-chain fit of the bundled runs, 500 + 500 draws: 121 s,
    against 65 s in parallel). PyMC's JAX module asks for 100 devices when it is imported, which
    splits XLA's CPU thread pool 100 ways: a gradient of the bundled-runs model took 110 us there
    and 88 us with 2 devices (``python benchmarks/jax_devices.py --devices 1 2 100``, 2026-11-25),
    the same fit 68 s and 65 s
    (``benchmarks/experiments/README.md: sampler_mixing``). So, when JAX has not started in this process,
    a device count above the cores (PyMC's) is replaced by one device per chain, up to the cores;
    a count the user set within the cores is kept, and a JAX that has started is left as it is.

    Parameters
    ----------
    chains : int

    Returns
    -------
    int
        The CPU devices JAX has (fixed once it starts).
    """
    import jax
    from jax._src import xla_bridge

    cores = os.cpu_count() or 1
    wanted = max(1, min(chains, cores))
    flags = os.environ.get("XLA_FLAGS", "")
    asked = [int(count) for count in _DEVICE_COUNT_FLAG.findall(flags)]
    # private in JAX but stable since 0.4; without it, assume started (leave JAX as it is)
    started = getattr(xla_bridge, "backends_are_initialized", lambda: True)()
    if not started and not (asked and asked[-1] <= cores):
        # last on the line: PyMC's import prepends its own and XLA takes the last
        kept = _DEVICE_COUNT_FLAG.sub("", flags).split()
        os.environ["XLA_FLAGS"] = " ".join([*kept, f"--xla_force_host_platform_device_count={wanted}"])
    return int(jax.local_device_count())


def numpyro_chain_method() -> str:
    """How numpyro should run several chains on the JAX backend in use.

    On CPUs, ``"parallel"``: one chain per CPU device (:func:`use_cores_for_chains`), sampled in
    short compiled calls so that memory stays bounded at any number of runs
    (:func:`bayesgrpo.model.nuts.sample_numpyro`). On a GPU there is one device, where
    ``"parallel"`` falls back to one chain after the other; there the chains are vectorised
    instead, every leapfrog step of all chains one batched gradient.

    Returns
    -------
    str
        ``"parallel"``, ``"sequential"`` or ``"vectorized"``.
    """
    import jax

    if jax.default_backend() != "cpu":
        return "vectorized"
    return "parallel"


#: Values a fit stores per run and draw, per curve parameter (the run's value, its sampled
#: coordinate, and a share of the derived draws) and besides (noise, asymptote).
STORED_PER_RUN_PARAMETER = 3
STORED_PER_RUN_EXTRA = 4
#: Copies of the stored draws alive at a fit's peak (the sampler's arrays, their NumPy copy, the
#: InferenceData, the diagnostics' stacks), and the memory of the process before any draw. An
#: upper bound, not a fit: the peaks measured on simulated populations (0.7-1.6 GiB for 100 and
#: 1,000 runs, ``benchmarks/results/scale.md``) sit below what it gives (2.1-2.7 GiB).
PEAK_COPIES = 4.0
BASELINE_BYTES = 2 * 2**30


def fit_memory_bytes(n_runs: int, n_parameters: int, draws: int, chains: int) -> int:
    """The memory a fit of ``n_runs`` runs is expected to reach at its peak, in bytes.

    Parameters
    ----------
    n_runs : int
    n_parameters : int
        Curve parameters per run (levels and shape), noise not counted.
    draws, chains : int

    Returns
    -------
    int
    """
    per_draw = n_runs * (STORED_PER_RUN_PARAMETER * n_parameters + STORED_PER_RUN_EXTRA)
    return int(BASELINE_BYTES + PEAK_COPIES * 8 * per_draw * draws * chains)


def available_memory_bytes() -> int | None:
    """Memory the system can give this process now (``MemAvailable``), or None where unknown."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def check_fit_fits_in_memory(
    n_runs: int, n_parameters: int, draws: int, chains: int, available: int | None = None
) -> None:
    """Raise before any work when a fit would need more memory than the machine has free.

    Parameters
    ----------
    n_runs, n_parameters, draws, chains : int
        As for :func:`fit_memory_bytes`.
    available : int, optional
        Free memory in bytes (default: :func:`available_memory_bytes`; unknown skips the check).

    Raises
    ------
    FitTooLargeError
        Naming the population's size, the memory needed and free, and the faster paths.
    """
    available = available_memory_bytes() if available is None else available
    needed = fit_memory_bytes(n_runs, n_parameters, draws, chains)
    if available is None or needed <= available:
        return
    fitting = max(1, int((available - BASELINE_BYTES) / max(needed - BASELINE_BYTES, 1) * draws))
    raise FitTooLargeError(
        f"a fit of {n_runs} runs x {n_parameters} curve parameters with {chains} chains x {draws} draws "
        f"would need about {needed / 2**30:.1f} GiB at its peak and {available / 2**30:.1f} GiB is free. "
        f"Ask for fewer draws (about {fitting} would fit), fit with sampler='advi' or 'pathfinder' "
        "(the population's approximation in a fraction of the time; per-run live updates stay exact, "
        "benchmarks/results/scale.md), or fit a subset of the runs.",
        needed,
        available,
    )


@dataclass
class FitDiagnostics:
    """What a fit reports about its own reliability."""

    sampler: str
    seconds: float
    draws: int
    chains: int
    divergences: int
    max_r_hat: float
    min_ess_bulk: float
    min_ess_tail: float
    compile_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    @property
    def ess_per_second(self) -> float:
        """Minimum bulk effective sample size per second of sampling."""
        return self.min_ess_bulk / max(self.seconds, 1e-9)

    def to_dict(self) -> dict[str, Any]:
        """The diagnostics as a JSON-serialisable dict."""
        return asdict(self)


def diagnose(
    idata: az.InferenceData, sampler: str, seconds: float, compile_seconds: float = 0.0
) -> FitDiagnostics:
    """Divergences, r_hat and ESS over the model's free parameters, with plain-word warnings."""
    import arviz as az

    posterior = idata.posterior
    names = [
        name for name in posterior.data_vars if not name.endswith("_z") and not name.endswith("_centered")
    ]
    chains = int(posterior.sizes["chain"])
    draws = int(posterior.sizes["draw"])
    divergences = 0
    if "sample_stats" in idata and "diverging" in idata.sample_stats:
        divergences = int(idata.sample_stats["diverging"].sum())
    max_r_hat, min_bulk, min_tail = np.nan, np.nan, np.nan
    poorly_mixed: list[str] = []
    if chains > 1 and draws >= 4:
        r_hat = az.rhat(posterior[names])
        bulk = az.ess(posterior[names], method="bulk")
        tail = az.ess(posterior[names], method="tail")
        max_r_hat = float(np.nanmax([float(r_hat[n].max()) for n in names]))
        min_bulk = float(np.nanmin([float(bulk[n].min()) for n in names]))
        min_tail = float(np.nanmin([float(tail[n].min()) for n in names]))
        poorly_mixed = _runs_over(r_hat, names, 1.01)
    found = FitDiagnostics(
        sampler, seconds, draws, chains, divergences, max_r_hat, min_bulk, min_tail, compile_seconds
    )
    if sampler in ("advi", "pathfinder"):
        found.warnings.append(
            f"{sampler} is an approximation: intervals are usually too narrow; use NUTS for decisions"
        )
    if divergences:
        found.warnings.append(
            f"{divergences} divergent transitions: the posterior has regions the sampler could not explore; "
            "treat intervals with caution, or raise target_accept"
        )
    if np.isfinite(max_r_hat) and max_r_hat > 1.01:
        which = (
            f" on runs {', '.join(poorly_mixed[:6])}" + (" ..." if len(poorly_mixed) > 6 else "")
            if poorly_mixed
            else ""
        )
        found.warnings.append(
            f"chains disagree (max r_hat {max_r_hat:.3f} > 1.01){which}: the fit has not settled what "
            + ("those runs' curves do" if poorly_mixed else "some parameters are")
            + ", so their forecasts and stop probabilities are less certain than their intervals say; "
            "run more draws, or check for curves that do not rise and level off (a collapse, a rise "
            "then fall)"
        )
    if np.isfinite(min_bulk) and min_bulk < 100 * chains:
        found.warnings.append(
            f"few effective draws (min bulk ESS {min_bulk:.0f}): quantiles are noisy; run more draws"
        )
    for message in found.warnings:
        logger.info(message)  # RewardModel.fit warns once (FitWarning); the log keeps it too
    return found


def _runs_over(r_hat: Any, names: list[str], threshold: float) -> list[str]:
    """Run ids whose run-level parameters have r_hat above ``threshold``, worst first."""
    worst: dict[str, float] = {}
    for name in names:
        values = r_hat[name]
        if "run" in values.dims:
            per_run = values.max(dim=[d for d in values.dims if d != "run"]) if values.ndim > 1 else values
            for run, value in zip(per_run["run"].values, per_run.values, strict=True):
                if value > threshold:
                    worst[str(run)] = max(worst.get(str(run), 0.0), float(value))
    return sorted(worst, key=lambda run: (-worst[run], run))


def sample_model(
    model: pm.Model,
    *,
    sampler: str = DEFAULT_SAMPLER,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 2,
    target_accept: float = 0.9,
    random_seed: int | None = None,
    progressbar: bool = True,
    low_rank_mass_matrix: bool = False,
    thin: int = 1,
    float32: bool = True,
    dense_population: bool | None = None,
) -> tuple[az.InferenceData, FitDiagnostics]:
    """Sample ``model`` with the named sampler.

    Parameters
    ----------
    model : pymc.Model
    sampler : {"nutpie", "pymc", "numpyro", "advi", "pathfinder"}
    draws, tune, chains : int
        ``draws`` are the draws kept per chain. For the approximations, ``draws`` is the number
        of draws taken from the fitted approximation and ``tune`` the number of optimisation
        steps (times 10 for ADVI).
    thin : int
        MCMC iterations per kept draw (the NUTS samplers run ``draws * thin`` after the warm-up
        and keep every ``thin``-th); ignored by the approximations, whose draws are independent.
    float32 : bool
        numpyro only: sample in single precision (``bayesgrpo.model.nuts``).
    dense_population : bool, optional
        numpyro only: a dense mass-matrix block over the population-level parameters; by default
        when ``tune`` is at least ``nuts.DENSE_MIN_TUNE`` (a shorter warm-up estimates it badly).
    target_accept : float
    random_seed : int, optional
    progressbar : bool
    low_rank_mass_matrix : bool
        nutpie only: adapt a diagonal-plus-low-rank mass matrix, which follows correlated
        parameters (a run's start, level and shape) far better than a diagonal one.

    Returns
    -------
    idata : arviz.InferenceData
    diagnostics : FitDiagnostics
    """
    import pymc as pm

    if sampler not in SAMPLERS:
        raise BayesGRPOError(f"sampler={sampler!r}; choose one of {SAMPLERS}")
    if thin < 1:
        raise BayesGRPOError(f"thin={thin}; it must be at least 1")
    resolve_pytensor_blas(sampler)
    compile_seconds = 0.0
    start = time.perf_counter()
    if sampler == "numpyro":
        from bayesgrpo.model.nuts import sample_numpyro

        use_cores_for_chains(chains)  # numpyro's "parallel" chains: one per JAX device
        chain_method = numpyro_chain_method()
        idata, timings = sample_numpyro(
            model,
            draws=draws,
            tune=tune,
            chains=chains,
            thin=thin,
            target_accept=target_accept,
            random_seed=random_seed,
            chain_method=chain_method,
            float32=float32,
            dense_population=dense_population,
            progressbar=progressbar,
        )
        compile_seconds = timings.compile_logp
    elif sampler == "nutpie":
        import nutpie

        compiled = nutpie.compile_pymc_model(model, backend="jax", gradient_backend="jax")
        compile_seconds = time.perf_counter() - start
        idata = nutpie.sample(
            compiled,
            draws=draws * thin,
            tune=tune,
            chains=chains,
            cores=chains,
            seed=random_seed,
            target_accept=target_accept,
            progress_bar=progressbar,
            low_rank_modified_mass_matrix=low_rank_mass_matrix,
        )
        idata = _thinned(idata, thin)
    elif sampler == "pymc":
        with model:
            idata = pm.sample(
                draws=draws * thin,
                tune=tune,
                chains=chains,
                cores=min(chains, 2),
                target_accept=target_accept,
                random_seed=random_seed,
                progressbar=progressbar,
                compute_convergence_checks=False,
            )
        idata = _thinned(idata, thin)
    elif sampler == "advi":
        with model:
            approximation = pm.fit(
                n=max(tune, 1000) * 10, method="advi", random_seed=random_seed, progressbar=progressbar
            )
            idata = approximation.sample(draws=draws * chains, random_seed=random_seed)
        idata = _split_chains(idata, chains)
    else:
        import pymc_extras

        with model:
            idata = pymc_extras.fit(
                method="pathfinder",
                num_draws=draws * chains,
                random_seed=random_seed,
                progressbar=progressbar,
            )
        idata = _split_chains(idata, chains)
    seconds = time.perf_counter() - start
    return idata, diagnose(idata, sampler, seconds, compile_seconds)


def _thinned(idata: az.InferenceData, thin: int) -> az.InferenceData:
    """Every ``thin``-th draw of each chain, in every group with a draw dimension."""
    if thin == 1:
        return idata
    return idata.isel(draw=slice(None, None, thin))


def _split_chains(idata: az.InferenceData, chains: int) -> az.InferenceData:
    """Reshape one long chain of approximate draws into ``chains`` pseudo-chains."""
    import arviz as az

    posterior = idata.posterior
    if int(posterior.sizes["chain"]) != 1 or chains <= 1:
        return idata
    total = int(posterior.sizes["draw"])
    per_chain = total // chains
    trimmed = posterior.isel(chain=0, drop=True).isel(draw=slice(0, per_chain * chains))
    reshaped = trimmed.coarsen(draw=per_chain).construct(draw=("chain", "draw"))
    reshaped = reshaped.assign_coords(chain=np.arange(chains), draw=np.arange(per_chain))
    return az.InferenceData(posterior=reshaped.transpose("chain", "draw", ...))
