"""Samplers for the reward-curve model, and the checks every fit reports in plain words.

``nutpie`` (Rust NUTS, JAX-compiled gradients) is the default: measured fastest per effective
sample on the bundled runs (``benchmarks/sampler_speed.py``). PyMC's own NUTS, numpyro (JAX)
and the approximations ADVI and Pathfinder are available for comparison and for speed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import arviz as az
import numpy as np
import pymc as pm

from bayesgrpo.errors import BayesGRPOError

logger = logging.getLogger(__name__)

SAMPLERS: tuple[str, ...] = ("nutpie", "pymc", "numpyro", "advi", "pathfinder")
#: numpyro's NUTS (JAX): on the bundled runs the fastest sampler whose chains agree, 41x PyMC's
#: default NUTS in ESS per second and 30 s a fit (median of 3 seeds); nutpie is close behind
#: (26x, 46 s). ``benchmarks/results/sampler_speed.md``.
DEFAULT_SAMPLER = "numpyro"


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
            f"; runs concerned: {', '.join(poorly_mixed[:6])}" + (" ..." if len(poorly_mixed) > 6 else "")
            if poorly_mixed
            else ""
        )
        found.warnings.append(
            f"chains disagree (max r_hat {max_r_hat:.3f} > 1.01): run more draws, or check runs whose curve "
            f"does not rise and level off (a collapse, a rise then fall){which}"
        )
    if np.isfinite(min_bulk) and min_bulk < 100 * chains:
        found.warnings.append(
            f"few effective draws (min bulk ESS {min_bulk:.0f}): quantiles are noisy; run more draws"
        )
    for message in found.warnings:
        logger.warning(message)
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
) -> tuple[az.InferenceData, FitDiagnostics]:
    """Sample ``model`` with the named sampler.

    Parameters
    ----------
    model : pymc.Model
    sampler : {"nutpie", "pymc", "numpyro", "advi", "pathfinder"}
    draws, tune, chains : int
        For the approximations, ``draws`` is the number of draws taken from the fitted
        approximation and ``tune`` the number of optimisation steps (times 10 for ADVI).
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
    if sampler not in SAMPLERS:
        raise BayesGRPOError(f"sampler={sampler!r}; choose one of {SAMPLERS}")
    compile_seconds = 0.0
    start = time.perf_counter()
    if sampler == "nutpie":
        import nutpie

        compiled = nutpie.compile_pymc_model(model, backend="jax", gradient_backend="jax")
        compile_seconds = time.perf_counter() - start
        idata = nutpie.sample(
            compiled,
            draws=draws,
            tune=tune,
            chains=chains,
            cores=chains,
            seed=random_seed,
            target_accept=target_accept,
            progress_bar=progressbar,
            low_rank_modified_mass_matrix=low_rank_mass_matrix,
        )
    elif sampler in ("pymc", "numpyro"):
        with model:
            idata = pm.sample(
                draws=draws,
                tune=tune,
                chains=chains,
                cores=min(chains, 2),
                target_accept=target_accept,
                random_seed=random_seed,
                progressbar=progressbar,
                nuts_sampler=sampler,
                compute_convergence_checks=False,
            )
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


def _split_chains(idata: az.InferenceData, chains: int) -> az.InferenceData:
    """Reshape one long chain of approximate draws into ``chains`` pseudo-chains."""
    posterior = idata.posterior
    if int(posterior.sizes["chain"]) != 1 or chains <= 1:
        return idata
    total = int(posterior.sizes["draw"])
    per_chain = total // chains
    trimmed = posterior.isel(chain=0, drop=True).isel(draw=slice(0, per_chain * chains))
    reshaped = trimmed.coarsen(draw=per_chain).construct(draw=("chain", "draw"))
    reshaped = reshaped.assign_coords(chain=np.arange(chains), draw=np.arange(per_chain))
    return az.InferenceData(posterior=reshaped.transpose("chain", "draw", ...))
