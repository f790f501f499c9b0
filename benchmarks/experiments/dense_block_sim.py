"""Issue 16: the dense population block on a simulated population, by warm-up length.

The bundled runs are one population; ``benchmarks/scale_jax.py``'s 100 simulated runs (five
families, 20-100% of each run observed, three noise levels) are another, with runs sampled three
ways (whitened, centred, non-centred). Each fit here samples that population with
``bayesgrpo.model.nuts.sample_numpyro`` (float32, 2 chains x 500 kept draws of 2,000 iterations,
one CPU device each), with the dense block or a diagonal mass matrix, after ``--tune`` warm-up
iterations, in a fresh process, and appends one line to ``results/dense_block_sim.jsonl``.

Usage::

    python benchmarks/experiments/dense_block_sim.py --tune 500 1000 --dense 1 0
    python benchmarks/experiments/dense_block_sim.py --table
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "dense_block_sim.jsonl"

CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np
tune, dense, seed = int(sys.argv[1]), sys.argv[2] == "1", int(sys.argv[3])
from bayesgrpo.model.sampling import diagnose, use_cores_for_chains
use_cores_for_chains(2)
from bayesgrpo.model.curves import DEFAULT_CURVE
from bayesgrpo.model.simulate import simulate_runs
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.model.nuts import population_sites, sample_numpyro
n_runs = 100
rng = np.random.default_rng(seed)  # the population of benchmarks/scale_jax.py --runs 100 --seed 1
sim = simulate_runs(n_runs, curve=DEFAULT_CURVE, families=("qwen", "llama", "gemma", "mistral", "phi"),
    n_steps=200, observed_fraction=rng.uniform(0.2, 1.0, n_runs).round(2).tolist(),
    noise=rng.choice([0.01, 0.03, 0.08], n_runs).tolist(), random_seed=seed)
start = time.perf_counter()
model = RewardModel().build(sim.table)
point = model.initial_point()
block = sum(int(np.size(point[name])) for name in population_sites(model, point)) if dense else 0
idata, _ = sample_numpyro(model, draws=500, tune=tune, chains=2, thin=4, random_seed=seed,
    dense_population=dense)
wall = time.perf_counter() - start
found = diagnose(idata, "numpyro", wall)
import arviz as az
names = [n for n in idata.posterior.data_vars if not n.endswith("_z") and not n.endswith("_centered")]
bulk = az.ess(idata.posterior[names], method="bulk")
worst = sorted((float(bulk[n].min()), n) for n in names)[:3]
stats = idata.sample_stats
print(json.dumps(dict(tune=tune, dense=dense, seed=seed, block=block, wall=wall,
    divergences=found.divergences, max_r_hat=found.max_r_hat, min_ess_bulk=found.min_ess_bulk,
    min_ess_tail=found.min_ess_tail, steps=float(stats["n_steps"].mean()),
    step_size=float(stats["step_size"].mean()), worst={n: round(e) for e, n in worst})))
"""


def table() -> str:
    """The fits so far as a markdown table."""
    lines = [
        "| warm-up | mass matrix | seed | wall s | divergences | max r_hat | min bulk ESS | min tail ESS "
        "| steps / iteration | step size | slowest |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines()] if RESULTS.exists() else []
    for r in rows:
        matrix = f"dense block ({r['block']} coordinates)" if r["dense"] else "diagonal"
        slowest = ", ".join(f"{n} {e}" for n, e in r["worst"].items())
        lines.append(
            f"| {r['tune']} | {matrix} | {r['seed']} | {r['wall']:.0f} | {r['divergences']} "
            f"| {r['max_r_hat']:.3f} | {r['min_ess_bulk']:.0f} | {r['min_ess_tail']:.0f} | {r['steps']:.0f} "
            f"| {r['step_size']:.4f} | {slowest} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Fit the simulated population once per (warm-up, mass matrix), or print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tune", type=int, nargs="+", default=[500, 1000])
    parser.add_argument("--dense", type=int, nargs="+", default=[1, 0], help="1: dense block, 0: diagonal")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--table", action="store_true", help="print the results so far")
    args = parser.parse_args()
    if args.table:
        print(table())
        return
    for tune in args.tune:
        for dense in args.dense:
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(tune), str(dense), str(args.seed)],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                print(done.stderr.strip().splitlines()[-1][:300], file=sys.stderr)
                continue
            line = done.stdout.strip().splitlines()[-1]
            RESULTS.parent.mkdir(parents=True, exist_ok=True)
            with RESULTS.open("a") as out:
                out.write(line + "\n")
            print(line, flush=True)


if __name__ == "__main__":
    main()
