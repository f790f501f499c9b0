"""What holds the default fit's step size down: the stiffest directions of its posterior.

NUTS with a diagonal mass matrix takes leapfrog steps no longer than about ``1 / sqrt(lam)``,
``lam`` the largest eigenvalue of the negative Hessian of the log density scaled by the
posterior's sds (what the adapted mass matrix does). At draws of the shipped population
(``bayesgrpo/_data/bundled_population.nc``, the 60 bundled runs), this computes that Hessian in
the sampler's own unconstrained coordinates (PyMC's JAX log density, ``jax.hessian``), its three
largest eigenvalues and the coordinates that carry the largest one.

``--flags F`` analyses a fresh default fit (seed ``--seed``) of a model variant of
``patches/model_variants.diff`` instead (``BGEXP=F`` in a patched copy of the package, as
``sampler_mixing.py`` runs them), written to ``results/stiffness_<F>.md``.

Usage::

    python benchmarks/experiments/stiffness.py   # writes results/stiffness.md (about 3 min)
    python benchmarks/experiments/stiffness.py --flags SLOWFAMCENTRED
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
REPO = HERE.parents[1]
PATCH = HERE / "patches" / "model_variants.diff"
#: Draws whose Hessian is computed (chain 0), and draws that estimate the posterior sds.
HESSIAN_DRAWS = (0, 125, 250, 375, 499)
SD_DRAWS = range(0, 500, 5)


def main() -> None:
    """The Hessians, their eigenvalues and the table."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--flags", default="", help="a model variant's BGEXP flags (fits it afresh)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fit", action="store_true", help="fit afresh in this process (used by --flags)")
    args = parser.parse_args()
    if args.flags and not args.fit:
        with tempfile.TemporaryDirectory() as scratch:
            shutil.copytree(REPO / "bayesgrpo", Path(scratch) / "bayesgrpo")
            (Path(scratch) / "data").symlink_to(REPO / "data")
            subprocess.run(["patch", "-p1", "-s", "-i", str(PATCH)], cwd=scratch, check=True)
            env = {**os.environ, "PYTHONPATH": scratch, "BGEXP": args.flags}
            command = [sys.executable, str(Path(__file__).resolve()), "--fit", "--flags", args.flags]
            subprocess.run([*command, "--seed", str(args.seed)], env=env, cwd=scratch, check=True)
        return
    warnings.simplefilter("ignore")
    import jax
    import jax.numpy as jnp
    import pytensor.tensor as pt
    from jax.flatten_util import ravel_pytree
    from pymc.sampling.jax import get_jaxified_logp

    jax.config.update("jax_enable_x64", True)
    from bayesgrpo.model.datasets import bundled_population, load_bundled

    start = time.perf_counter()
    table = load_bundled(warn=False)
    if args.fit:
        from bayesgrpo.model.reward_model import RewardModel

        population = RewardModel().fit(table, random_seed=args.seed, progressbar=False)
    else:
        population = bundled_population()
    model = population.build(table)
    posterior = population.posterior
    values = model.value_vars
    rvs = [model.values_to_rvs[value] for value in values]

    def unconstrained(chain: int, draw: int) -> list[np.ndarray]:
        out = []
        for rv in rvs:
            x = posterior[rv.name].values[chain, draw]
            transform = model.rvs_to_transforms.get(rv)
            if transform is not None:
                x = transform.forward(pt.as_tensor_variable(x), *rv.owner.inputs).eval()
            out.append(np.asarray(x, dtype=float))
        return out

    names: list[str] = []
    for rv, value in zip(rvs, values, strict=True):
        size = int(np.prod(unconstrained(0, 0)[rvs.index(rv)].shape))
        names += [f"{value.name}[{i}]" for i in range(size)] if size > 1 else [value.name]
    flat_draws, unravel = [], None
    for chain in (0, 1):
        for draw in SD_DRAWS:
            flat, unravel = ravel_pytree([jnp.asarray(a) for a in unconstrained(chain, draw)])
            flat_draws.append(np.asarray(flat))
    draws = np.array(flat_draws)
    sd = draws.std(axis=0)
    logp = get_jaxified_logp(model)
    hessian = jax.jit(jax.hessian(lambda flat: logp(unravel(flat))))
    rows = []
    for draw in HESSIAN_DRAWS:
        flat, _ = ravel_pytree([jnp.asarray(a) for a in unconstrained(0, draw)])
        scaled = -(sd[:, None] * np.asarray(hessian(flat)) * sd[None, :])
        eigenvalues, vectors = np.linalg.eigh(scaled)
        top = np.argsort(-np.abs(vectors[:, -1]))[:6]
        carried = ", ".join(f"{names[i]} {vectors[i, -1]:+.2f}" for i in top)
        rows.append(
            f"| {draw} | {eigenvalues[-1]:.0f} | {eigenvalues[-2]:.0f} | {eigenvalues[-3]:.0f} | "
            f"{1 / np.sqrt(eigenvalues[-1]):.3f} | {carried} |"
        )
    run_ids = population.data.run_ids
    command = "python benchmarks/experiments/stiffness.py" + (
        f" --flags {args.flags} --seed {args.seed}" if args.flags else ""
    )
    subject = (
        f"A default fit (seed {args.seed}) of variant {args.flags}"
        if args.flags
        else "The shipped population"
    )
    lines = [
        "# The stiffest directions of the default fit's posterior",
        "",
        f"Command: `{command}` ({time.perf_counter() - start:.0f} s)",
        "",
        f"{subject} ({len(names)} unconstrained coordinates); Hessian of the log density at "
        "draws of chain 0, scaled by the posterior sd of each coordinate (over 200 draws). `lam1..3`: its "
        "three largest eigenvalues; `1/sqrt(lam1)`: the longest stable leapfrog step that direction allows "
        "(the fit adapts a step size of 0.015-0.017). `carried by`: the six coordinates with the largest "
        f"weight in the top eigenvector (run 57 = {run_ids[57]}, run 58 = {run_ids[58]}).",
        "",
        "| draw | lam1 | lam2 | lam3 | 1/sqrt(lam1) | carried by |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    name = f"stiffness_{args.flags}.md" if args.flags else "stiffness.md"
    (RESULTS / name).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
