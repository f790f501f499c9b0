"""Issue 16, one change at a time: what each sampler setting or model change does to mixing.

Every variant fits the 60 bundled runs once (2 chains, ``--draws`` + ``--tune``, default 500 +
500) in its own process and reports wall time (build, compile, tune, sample), divergences, the
worst r_hat, the smallest bulk and tail ESS over the model's parameters, the mean leapfrog steps
per draw and the adapted step size. Results are appended to
``benchmarks/experiments/results/sampler_mixing.jsonl`` (one line per fit, so a cut session
loses only the fit in flight); ``--table`` prints them as markdown.

Variants (sampler settings, on the package as it is):

- ``devices100``: PyMC's own JAX set-up, 100 CPU devices (what ``fit`` did before issue 16).
- ``devices2``: one CPU device per chain (``sampling.use_cores_for_chains``, the default now).
- ``sequential``: chains one after the other (numpyro's fallback on one device).
- ``dense``: numpyro with a dense mass matrix over all 469 parameters.
- ``dense_population``: numpyro with one dense block of the mass matrix over the population-level
  parameters (every free parameter without a run dimension: means, slopes, spreads, family and
  task effects), diagonal for the whitened per-run ones: the stiffest direction (``stiffness.py``)
  and the long ones (correlated slopes, level means and offsets) all lie in that block.
- ``k_non_centred``: the Weibull shape ``k`` left out of the whitened block of every run and
  sampled non-centred (as the slow term's ``odds`` and ``ratio`` are): with the population block
  dense, the worst parameters were the runs' ``k`` and ``tau`` and the spread ``k_sd``, a funnel
  where a run's shape is centred on a population spread its points barely inform.
  ``shape_non_centred``: ``k`` and ``tau`` both; ``shape_non_centred_dense``: that with the dense
  population block.
- ``loose_shape_unwhitened``: with the dense population block, a run is whitened only if its
  points also pin its shape down (the Laplace sd of ``tau`` and ``k`` at most 0.7 of the runs'
  spread, as the levels already must be); the others are sampled as runs that are not whitened
  (levels centred, shape centred or non-centred by signal to noise).
- ``ta80``: target acceptance 0.8 instead of 0.9.
- ``nutpie_lowrank``: nutpie (JAX gradients) with its low-rank modified mass matrix.
- ``nutpie_flow``: nutpie with its normalising-flow adaptation (``with_transform_adapt``,
  ``transform_adapt=True``; needs ``pip install flowjax``, not a dependency of the package).
- ``pilot_whiten``: a pilot fit (2 x (300 + 300)) first; each whitened run's block is then
  re-whitened by the pilot's posterior mean and covariance of its parameters instead of its own
  Laplace fit (the same runs whitened), and the model refitted; the wall time holds both fits.
  ``pilot_whiten_short``: the same with a 2 x (150 + 150) pilot.
- ``eb_spreads``: the spreads whose posterior is widest relative to their size (the Weibull
  shape's ``k_sd``, 0.60 +- 0.11, and the slow term's ``ratio_sd``, 0.48 +- 0.22, and
  ``odds_sd``, 0.07 +- 0.05, in the shipped fit) held near those means (log-normal priors of sd
  0.02): empirical Bayes for the funnels between a spread and the runs' values.
  ``eb_spreads_dense``: that with the dense population block.
- ``float32``: PyMC's numpyro path with JAX's 64-bit mode off while it samples (the log density
  and its gradient in single precision); ``float32_dense_population``: that with the dense
  population block. Both now run by ``bayesgrpo.model.nuts`` in every default fit.
- ``k_no_family``: the Weibull shape ``k`` without family effects (its mean, size and start effects
  and spread kept): the slowest parameters of the default fit at seed 2 are ``k_sd``, ``k_family``,
  ``k_run`` and ``k_mu`` (`posterior_geometry.py`), with every run's chains in one mode.
  ``k_no_family_dense``: that with the dense population block.

Model variants (``patches/model_variants.diff`` applied to a copy of the package, then one of):

- ``slowpool``: the slow term's share and time (``odds``, ``ratio``) without family, size and
  start effects: one population mean and spread each.
- ``offset``: runs normalised by their own range get their own level means
  (``<p>_data_level``) instead of an offset from the population mean.
- ``ortho``: the start's pull on the other parameters measured from the start's own expected
  value (family and size effects included), not from the population mean.
- ``centre_slow``: the slow term's share and time (``odds``, ``ratio``, non-centred for every run
  by default) centred for the two runs the stiffest direction of the posterior runs through
  (``stiffness.py``: the two verldata Qwen2.5-0.5B PPO runs).
- ``slow_family_centred``: the slow term's family effects centred (``ZeroSumNormal(sigma=sd)``)
  instead of ``sd * z``: the stiffest direction of the posterior is their spread against one
  family's ``z`` (``stiffness.py``).
- ``slow_no_family``: no family effect on the slow term (its size and start effects kept).
- ``family_centred``: every parameter's family and task effects centred.
- ``weighted_zero_sum``: family and task effects that sum to zero weighted by each level's runs
  (``sd * (z - w . z)``, ``w`` the levels' shares of the runs), so that the population mean is the
  run-weighted one and a level with most of the runs (Qwen, 39 of 60) has a small effect, not one
  its runs pin down against the spread.

Usage::

    python benchmarks/experiments/sampler_mixing.py devices2 devices100 --seed 1
    python benchmarks/experiments/sampler_mixing.py --table
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESULTS = HERE / "results" / "sampler_mixing.jsonl"
PATCH = HERE / "patches" / "model_variants.diff"
MODEL_FLAGS = {
    "slowpool": "SLOWPOOL",
    "offset": "OFFSET",
    "ortho": "ORTHO",
    "centre_slow": "CENTRESLOW",
    "slow_family_centred": "SLOWFAMCENTRED",
    "slow_no_family": "SLOWNOFAMILY",
    "family_centred": "FAMCENTRED",
    "weighted_zero_sum": "WEIGHTEDZS",
}
#: Runs whose slow term ``centre_slow`` centres: the two the stiffest direction of the shipped
#: population's posterior runs through (``stiffness.py``), by their index in the bundled runs.
CENTRE_SLOW_RUNS = "57,58"
VARIANTS = (
    "devices100",
    "devices2",
    "sequential",
    "dense",
    "dense_population",
    "shape_non_centred",
    "shape_non_centred_dense",
    "k_non_centred",
    "loose_shape_unwhitened",
    "ta80",
    "nutpie_lowrank",
    "nutpie_flow",
    "pilot_whiten",
    "pilot_whiten_short",
    "eb_spreads",
    "eb_spreads_dense",
    "k_no_family",
    "k_no_family_dense",
    "float32",
    "float32_dense_population",
    *MODEL_FLAGS,
)

CHILD = r"""
import json, os, sys, time, warnings
variant, draws, tune, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
warnings.simplefilter("ignore")
import pymc as pm
import pymc.sampling.jax  # noqa: F401  (sets its 100 CPU devices)
if variant != "devices100":
    os.environ["XLA_FLAGS"] += " --xla_force_host_platform_device_count=2"  # XLA takes the last
from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.model.sampling import diagnose
import bayesgrpo.model.build as build
table = load_bundled(warn=False)
start = time.perf_counter()
if variant == "loose_shape_unwhitened":
    import numpy as np
    laplace = build.run_laplace
    def shape_too(data, curve, priors, index, *, noise_floor=0.01):
        mean, chol, informed = laplace(data, curve, priors, index, noise_floor=noise_floor)
        sd = np.sqrt(np.einsum("rij,rij->ri", chol, chol))  # diagonal of L L^T
        spread = np.clip(1.4826 * np.median(np.abs(mean - np.median(mean, axis=0)), axis=0), 0.3, None)
        shape = [2, 3]  # tau, k in curve_params("two_timescale") + ("log_sigma",)
        tight = (sd[:, shape] / spread[shape]).max(axis=1) <= 0.7
        print("whitened", int(informed.sum()), "-> with the shape too", int((informed & tight).sum()),
            file=sys.stderr)
        return mean, chol, informed & tight
    build.run_laplace = shape_too
if variant in ("k_non_centred", "shape_non_centred", "shape_non_centred_dense"):
    extra = ("k",) if variant == "k_non_centred" else ("k", "tau")
    build.NON_CENTRED_SHAPE = {"two_timescale": (*build.NON_CENTRED_SHAPE["two_timescale"], *extra)}
if variant.startswith("k_no_family"):  # the Weibull shape without family effects
    group_effect = build._group_effect
    def no_k_family(name, sd_prior, index, levels, dim):
        return None if name == "k" and dim == "family" else group_effect(name, sd_prior, index, levels, dim)
    build._group_effect = no_k_family
if variant.startswith("eb_spreads"):  # the weakly known spreads held at the shipped fit's means
    import numpy as np
    from pymc_extras.prior import Prior
    fixed = {"k_sd": 0.596, "ratio_sd": 0.475, "odds_sd": 0.072}
    model = RewardModel(priors={name: Prior("LogNormal", mu=float(np.log(value)), sigma=0.02)
        for name, value in fixed.items()}).build(table)
else:
    model = RewardModel().build(table)
if variant == "nutpie_lowrank":
    import nutpie
    compiled = nutpie.compile_pymc_model(model, backend="jax", gradient_backend="jax")
    idata = nutpie.sample(compiled, draws=draws, tune=tune, chains=2, cores=2, seed=seed, progress_bar=False,
        target_accept=0.9, low_rank_modified_mass_matrix=True)
elif variant == "nutpie_flow":  # normalising-flow adaptation (needs flowjax: pip install flowjax)
    import jax
    jax.config.update("jax_enable_x64", True)
    import nutpie
    compiled = nutpie.compile_pymc_model(model, backend="jax", gradient_backend="jax").with_transform_adapt()
    idata = nutpie.sample(compiled, draws=draws, tune=tune, chains=2, cores=2, seed=seed, progress_bar=False,
        target_accept=0.9, transform_adapt=True)
elif variant.startswith("pilot_whiten"):  # re-whiten each run's block from a pilot fit's posterior
    import numpy as np
    from bayesgrpo.model.structure import curve_params
    pilot_draws, pilot_tune = (300, 300) if variant == "pilot_whiten" else (150, 150)
    kwargs = {"chain_method": "parallel", "nuts_kwargs": {}}
    with model:
        pilot = pm.sample(draws=pilot_draws, tune=pilot_tune, chains=2, target_accept=0.9,
            random_seed=seed + 1000, progressbar=False, nuts_sampler="numpyro",
            compute_convergence_checks=False, nuts_sampler_kwargs=kwargs)
    laplace = build.run_laplace
    names = (*curve_params("two_timescale"), "log_sigma")
    n_runs = pilot.posterior.sizes["run"]
    values = np.stack([pilot.posterior[f"{name}_run"].values.reshape(-1, n_runs) for name in names], -1)
    def from_pilot(data, curve, priors, index, *, noise_floor=0.01):
        _, _, informed = laplace(data, curve, priors, index, noise_floor=noise_floor)
        block = values[:, index, :]  # (draws, runs, P)
        mean = block.mean(axis=0)
        centred = block - mean
        cov = np.einsum("sri,srj->rij", centred, centred) / (block.shape[0] - 1) + 1e-6 * np.eye(len(names))
        return mean, np.linalg.cholesky(cov), informed
    build.run_laplace = from_pilot
    model = RewardModel().build(table)
    with model:
        idata = pm.sample(draws=draws, tune=tune, chains=2, target_accept=0.9, random_seed=seed,
            progressbar=False, nuts_sampler="numpyro", compute_convergence_checks=False,
            nuts_sampler_kwargs=kwargs)
else:
    kwargs = {"chain_method": "sequential" if variant == "sequential" else "parallel", "nuts_kwargs": {}}
    if variant == "dense":
        kwargs["nuts_kwargs"]["dense_mass"] = True
    dense_block = ("dense_population", "float32_dense_population", "shape_non_centred_dense",
        "loose_shape_unwhitened", "eb_spreads_dense", "k_no_family_dense")
    if variant in dense_block:
        point, n_runs = model.initial_point(), len(model.coords["run"])
        population = tuple(i for i, value in enumerate(model.value_vars)
            if point[value.name].shape[:1] != (n_runs,))
        # PyMC hands numpyro the value variables as a list, and numpyro's dense blocks need named
        # sites: the same potential, on a dict of the same arrays
        import pymc.sampling.jax as pymc_jax
        list_sites = pymc_jax._sample_numpyro_nuts
        def named_sites(*, logp_fn, initial_points, nuts_kwargs, **rest):
            names = [f"v{i:03d}" for i in range(len(initial_points))]
            nuts_kwargs = dict(nuts_kwargs, dense_mass=[tuple(names[i] for i in population)])
            raw, stats, library = list_sites(logp_fn=lambda z: logp_fn([z[n] for n in names]),
                initial_points=dict(zip(names, initial_points)), nuts_kwargs=nuts_kwargs, **rest)
            return [raw[n] for n in names], stats, library
        pymc_jax._sample_numpyro_nuts = named_sites
    if variant.startswith("float32"):  # NUTS in single precision: the log density's gradient in float32
        import jax
        import numpy as np
        import pymc.sampling.jax as pymc_jax
        double = pymc_jax._sample_numpyro_nuts
        def single(*, initial_points, **rest):
            jax.config.update("jax_enable_x64", False)
            try:
                if isinstance(initial_points, dict):
                    initial_points = {k: np.asarray(v, np.float32) for k, v in initial_points.items()}
                else:
                    initial_points = [np.asarray(v, np.float32) for v in initial_points]
                raw, stats, library = double(initial_points=initial_points, **rest)
                raw = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), raw)
                stats = {k: np.asarray(v) for k, v in stats.items()}
            finally:
                jax.config.update("jax_enable_x64", True)
            return raw, stats, library
        pymc_jax._sample_numpyro_nuts = single
    with model:
        idata = pm.sample(draws=draws, tune=tune, chains=2, target_accept=0.8 if variant == "ta80" else 0.9,
            random_seed=seed, progressbar=False, nuts_sampler="numpyro", compute_convergence_checks=False,
            nuts_sampler_kwargs=kwargs)
wall = time.perf_counter() - start
found = diagnose(idata, variant, wall)
import arviz as az
names = [n for n in idata.posterior.data_vars if not n.endswith("_z") and not n.endswith("_centered")]
bulk = az.ess(idata.posterior[names], method="bulk")
worst = sorted((float(bulk[n].min()), n) for n in names)[:6]
stats = idata.sample_stats
steps = "n_steps" if "n_steps" in stats else "tree_size"
print(json.dumps(dict(variant=variant, seed=seed, draws=draws, tune=tune, wall=wall,
    divergences=found.divergences, max_r_hat=found.max_r_hat, min_ess_bulk=found.min_ess_bulk,
    min_ess_tail=found.min_ess_tail, patched=hasattr(build, "_EXP"),
    steps=float(stats[steps].mean()), step_size=float(stats["step_size"].mean()),
    worst={n: round(e) for e, n in worst})))
"""


def run_variant(variant: str, args: argparse.Namespace) -> dict:
    """Fit the bundled runs with one variant in a fresh process (a patched copy for model variants)."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as scratch:
        if variant in MODEL_FLAGS:
            shutil.copytree(REPO / "bayesgrpo", Path(scratch) / "bayesgrpo")
            (Path(scratch) / "data").symlink_to(REPO / "data")  # the bundled runs, beside the package
            subprocess.run(["patch", "-p1", "-s", "-i", str(PATCH)], cwd=scratch, check=True)
            env["PYTHONPATH"] = scratch
            env["BGEXP"] = MODEL_FLAGS[variant]
            env["BG_CENTRE_SLOW"] = CENTRE_SLOW_RUNS
        done = subprocess.run(
            [sys.executable, "-c", CHILD, variant, str(args.draws), str(args.tune), str(args.seed)],
            env=env,
            cwd=scratch,  # not the repository: ``python -c`` puts the working directory first on the path
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        return {"variant": variant, "seed": args.seed, "error": done.stderr.strip().splitlines()[-1][:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def table() -> str:
    """The fits so far as a markdown table, in the order they were run."""
    lines = [
        "| variant | seed | draws + tune | wall s | divergences | max r_hat | min bulk ESS | min tail ESS "
        "| steps / draw | step size |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for line in RESULTS.read_text().splitlines() if RESULTS.exists() else []:
        r = json.loads(line)
        if "error" in r:
            lines.append(f"| {r['variant']} | {r['seed']} | failed: {r['error']} | | | | | | | |")
            continue
        lines.append(
            f"| {r['variant']} | {r['seed']} | {r['draws']} + {r['tune']} | {r['wall']:.0f} "
            f"| {r['divergences']} "
            f"| {r['max_r_hat']:.3f} | {r['min_ess_bulk']:.0f} | {r['min_ess_tail']:.0f} | {r['steps']:.0f} "
            f"| {r['step_size']:.4f} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Run the variants named on the command line, or print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", help=f"any of {', '.join(VARIANTS)}")
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--table", action="store_true", help="print the results so far")
    args = parser.parse_args()
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; choose from {', '.join(VARIANTS)}")
    for variant in args.variants:
        result = run_variant(variant, args)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with RESULTS.open("a") as handle:
            handle.write(json.dumps(result) + "\n")
        print(json.dumps(result), flush=True)
    if args.table or not args.variants:
        print(table())


if __name__ == "__main__":
    main()
