"""Issue 16, after the new default: numpyro settings of ``bayesgrpo.model.nuts`` one at a time.

The default fit (float32, a dense population block, thin 4, warm-up trees capped at depth 7) runs
trees of 127 leapfrog steps a draw at a step size of 0.03-0.037 and ends at bulk ESS 379-420 in
57-60 s. What is left to buy is fewer leapfrog steps a kept draw at the same mixing: a lower
acceptance target (a larger step), a cap on the draws' trees, a longer warm-up (a better mass
matrix), or thinning traded against the number of kept draws. Each setting fits the 60 bundled
runs in a fresh process, as ``RewardModel().fit`` does (2 chains, one CPU device each), and
appends one line to ``results/nuts_settings.jsonl`` (a cut session loses only the fit in flight;
a setting already measured for a seed is skipped). ``--table`` prints them as markdown.

Usage::

    python benchmarks/experiments/nuts_settings.py --target-accept 0.8 --seeds 1 2 3
    python benchmarks/experiments/nuts_settings.py --draw-depth 6 --seeds 1 2 3
    python benchmarks/experiments/nuts_settings.py --table
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "nuts_settings.jsonl"
DRIVER = HERE.parents[1] / "bayesgrpo" / "model" / "nuts.py"

CHILD = r"""
import json, sys, time, warnings
settings = json.loads(sys.argv[1])
warnings.simplefilter("ignore")
import numpy as np
from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.model.sampling import diagnose, use_cores_for_chains
from bayesgrpo.model.nuts import sample_numpyro
table = load_bundled(warn=False)
use_cores_for_chains(2)
start = time.perf_counter()
model = RewardModel().build(table)
idata, timings = sample_numpyro(
    model, draws=settings["draws"], tune=settings["tune"], chains=2, thin=settings["thin"],
    target_accept=settings["target_accept"], random_seed=settings["seed"],
    max_tree_depth=(settings["warmup_depth"], settings["draw_depth"]),
)
wall = time.perf_counter() - start
found = diagnose(idata, "numpyro", wall)
import arviz as az
names = [n for n in idata.posterior.data_vars if not n.endswith("_z") and not n.endswith("_centered")]
bulk = az.ess(idata.posterior[names], method="bulk")
worst = sorted((float(bulk[n].min()), n) for n in names)[:5]
stats = idata.sample_stats
print(json.dumps(dict(settings, wall=wall, divergences=found.divergences, max_r_hat=found.max_r_hat,
    min_ess_bulk=found.min_ess_bulk, min_ess_tail=found.min_ess_tail,
    steps=float(stats["n_steps"].mean()), step_size=float(stats["step_size"].mean()),
    worst={n: round(e) for e, n in worst})))
"""

KEYS = ("draws", "tune", "thin", "target_accept", "warmup_depth", "draw_depth", "driver", "seed")


def driver_hash() -> str:
    """A short hash of ``bayesgrpo/model/nuts.py``: a setting is measured afresh when the driver changes."""
    return hashlib.sha256(DRIVER.read_bytes()).hexdigest()[:8]


def measured() -> list[dict]:
    """Every fit so far."""
    return [json.loads(line) for line in RESULTS.read_text().splitlines()] if RESULTS.exists() else []


def run(settings: dict) -> dict:
    """One fit in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(settings)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return dict(settings, error=done.stderr.strip().splitlines()[-1][:200])
    return json.loads(done.stdout.strip().splitlines()[-1])


def table() -> str:
    """The fits so far as a markdown table."""
    lines = [
        "| driver | draws x thin + tune | target accept | tree depth (warm-up, draws) | seed | wall s "
        "| divergences | max r_hat | min bulk ESS | min tail ESS | steps / iteration | step size | slowest |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in measured():
        head = (
            f"| {r.get('driver', 'named sites')} | {r['draws']} x {r['thin']} + {r['tune']} "
            f"| {r['target_accept']} "
            f"| {r['warmup_depth']}, {r['draw_depth']} | {r['seed']} "
        )
        if "error" in r:
            lines.append(head + f"| failed: {r['error']} | | | | | | | |")
            continue
        slowest = ", ".join(f"{n} {e}" for n, e in list(r["worst"].items())[:3])
        lines.append(
            head + f"| {r['wall']:.0f} | {r['divergences']} | {r['max_r_hat']:.3f} | {r['min_ess_bulk']:.0f} "
            f"| {r['min_ess_tail']:.0f} | {r['steps']:.0f} | {r['step_size']:.4f} | {slowest} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Fit the bundled runs with the settings given, one seed at a time, or print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--thin", type=int, default=4)
    parser.add_argument("--target-accept", type=float, default=0.9)
    parser.add_argument("--warmup-depth", type=int, default=7)
    parser.add_argument("--draw-depth", type=int, default=10)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--table", action="store_true", help="print the results so far")
    args = parser.parse_args()
    if args.table:
        print(table())
        return
    done = {tuple(r.get(k) for k in KEYS) for r in measured() if "error" not in r}
    for seed in args.seeds:
        settings = {k: getattr(args, k) for k in KEYS[:-2]} | {"driver": driver_hash(), "seed": seed}
        if tuple(settings[k] for k in KEYS) in done:
            continue
        result = run(settings)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with RESULTS.open("a") as out:
            out.write(json.dumps(result) + "\n")
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
