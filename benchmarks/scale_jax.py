"""Scale: the population model on many simulated runs, under JAX (CPU here, GPU where lent).

Simulates ``--runs`` runs (several families and sizes, partial observation, noise levels),
fits the same ``RewardModel`` the package uses with a JAX sampler (numpyro NUTS, or nutpie with
JAX gradients) and reports wall time, ESS, r_hat and the device JAX ran on, appending a row to
``results/scale_jax.md``.

Usage::

    python benchmarks/scale_jax.py --runs 1000 --sampler numpyro     # on a GPU machine
    python benchmarks/scale_jax.py --runs 120 --draws 300            # CPU smoke scale
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def main() -> None:
    """Fit a simulated population of the size asked for and report time and diagnostics."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=200, help="planned steps per simulated run")
    parser.add_argument("--sampler", default="numpyro", choices=["numpyro", "nutpie"])
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", type=Path, default=RESULTS / "scale_jax.md")
    args = parser.parse_args()
    warnings.simplefilter("ignore")

    import jax
    import numpy as np

    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.model.simulate import simulate_runs

    rng = np.random.default_rng(args.seed)
    sim = simulate_runs(
        args.runs,
        families=("qwen", "llama", "gemma", "mistral", "phi"),
        n_steps=args.steps,
        observed_fraction=rng.uniform(0.2, 1.0, args.runs).round(2).tolist(),
        noise=rng.choice([0.01, 0.03, 0.08], args.runs).tolist(),
        random_seed=args.seed,
    )
    device = f"{jax.devices()[0].platform}: {jax.devices()[0].device_kind}"
    start = time.perf_counter()
    model = RewardModel().fit(
        sim.table,
        sampler=args.sampler,
        draws=args.draws,
        tune=args.tune,
        chains=args.chains,
        random_seed=args.seed,
        progressbar=False,
    )
    wall = time.perf_counter() - start
    d = model.diagnostics
    row = (
        f"| {args.runs} | {int(model.data.mask.sum())} | {args.sampler} | {device} | {args.chains} x "
        f"{args.draws} (+{args.tune}) | {wall:.0f} | {d.max_r_hat:.3f} | {d.min_ess_bulk:.0f} | "
        f"{d.divergences} |"
    )
    print(row)
    if not args.output.exists():
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(
            "# The population model at scale, under JAX\n\nCommand per row: `python benchmarks/scale_jax.py "
            f"--runs N --sampler S --draws D --tune D`.\nHost: {platform.machine()}, {os.cpu_count()} "
            "cores.\n\n| runs | points fitted | sampler | JAX device | chains x draws | wall s | max r_hat "
            "| min bulk ESS | divergences |\n|---|---|---|---|---|---|---|---|---|\n"
        )
    with args.output.open("a") as handle:
        handle.write(row + "\n")


if __name__ == "__main__":
    main()
