"""Samplers on the same model and the same bundled real runs: wall time, ESS, ESS per second.

Each sampler runs in its own process (so compilation caches and threads do not leak between
them) on ``RewardModel(curve=...)`` fitted to all bundled runs. ESS is the minimum bulk ESS
over the model's parameters (hyper-parameters and every run's parameters, not the latent z's);
wall time includes compilation, tuning and sampling, as a user waits for it.

Usage::

    python benchmarks/sampler_speed.py                        # nutpie, pymc, numpyro, advi, pathfinder
    python benchmarks/sampler_speed.py --samplers nutpie pymc --draws 500 --tune 500

Each fit's result is kept in ``results/sampler_speed_runs.jsonl`` under its settings and a hash of
the model code (``bayesgrpo/model``), so a cut run resumes where it stopped and a changed model is
measured afresh. The table also says which of the targets each fit meets: no divergence, r_hat
<= 1.01, bulk and tail ESS >= 400, at most 60 s.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

from _markdown import machine_line

from bayesgrpo.model.curves import DEFAULT_CURVE
from bayesgrpo.model.sampling import DEFAULT_THIN

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CACHE = RESULTS / "sampler_speed_runs.jsonl"
MODEL_CODE = HERE.parent / "bayesgrpo" / "model"

#: What a default fit of the bundled runs must reach (issue 16): r_hat, bulk and tail ESS, wall s.
TARGETS = {"max_r_hat": 1.01, "min_ess": 400.0, "wall": 60.0}


def model_code_hash() -> str:
    """A short hash of the model package's source: a cached fit is reused only for the same code."""
    digest = hashlib.sha256()
    for path in sorted(MODEL_CODE.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def meets_targets(result: dict) -> str:
    """The targets a fit misses, in words, or "all"."""
    missed = []
    if result["divergences"]:
        missed.append("divergences")
    if not result["max_r_hat"] <= TARGETS["max_r_hat"]:
        missed.append("r_hat")
    if not min(result["min_ess_bulk"], result["min_ess_tail"]) >= TARGETS["min_ess"]:
        missed.append("ESS")
    if not result["wall"] <= TARGETS["wall"]:
        missed.append("time")
    return "all" if not missed else "misses " + ", ".join(missed)


CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.model.reward_model import RewardModel
sampler, curve = sys.argv[1], sys.argv[2]
draws, tune, chains, seed, thin = (int(value) for value in sys.argv[3:8])
table = load_bundled(warn=False)
start = time.perf_counter()
model = RewardModel(curve=curve).fit(table, sampler=sampler, draws=draws, tune=tune, chains=chains,
thin=thin, random_seed=seed, progressbar=False)
wall = time.perf_counter() - start
d = model.diagnostics.to_dict()
d["wall"] = wall
final = model.final_reward()
d["final_median_mean"] = float(final["q50"].mean())
print(json.dumps(d, default=float))
"""


def sampler_thin(sampler: str, args: argparse.Namespace) -> int:
    """Iterations per kept draw: ``--thin`` for bayesgrpo's samplers, 1 for PyMC's default NUTS."""
    return 1 if sampler == "pymc" else args.thin


def run(sampler: str, args: argparse.Namespace, seed: int) -> dict:
    """Fit the bundled runs with one sampler and seed in a subprocess; its timings and diagnostics."""
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            sampler,
            args.curve,
            str(args.draws),
            str(args.tune),
            str(args.chains),
            str(seed),
            str(sampler_thin(sampler, args)),
        ],
        capture_output=True,
        text=True,
        timeout=args.timeout,
        check=False,
    )
    if completed.returncode != 0:
        return {"sampler": sampler, "error": completed.stderr.strip().splitlines()[-1][:200]}
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> None:
    """Compare the samplers' ESS per second on the bundled runs and write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samplers", nargs="+", default=["nutpie", "pymc", "numpyro", "advi", "pathfinder"])
    parser.add_argument("--curve", default=DEFAULT_CURVE)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument(
        "--thin",
        type=int,
        default=DEFAULT_THIN,
        help="iterations per kept draw (RewardModel.fit's default); PyMC's NUTS always keeps every draw",
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[1, 2, 3], help="one fit per sampler per seed"
    )
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--out", default=str(RESULTS / "sampler_speed.md"))
    args = parser.parse_args()

    code = model_code_hash()
    cached: dict[str, dict] = {}
    if CACHE.exists():
        for line in CACHE.read_text().splitlines():
            entry = json.loads(line)
            cached[entry["key"]] = entry
    rows = []
    for seed in args.seeds:
        for sampler in args.samplers:
            thin = sampler_thin(sampler, args)
            key = f"{sampler}|{args.curve}|{args.draws}|{args.tune}|{args.chains}|{thin}|{seed}|{code}"
            if key in cached:
                result = cached[key]
            else:
                result = run(sampler, args, seed)
                result.setdefault("sampler", sampler)
                result["seed"] = seed
                result["key"] = key
                if "error" not in result:
                    with CACHE.open("a") as handle:
                        handle.write(json.dumps(result, default=float) + "\n")
            print(json.dumps(result, default=float), flush=True)
            rows.append(result)
    lines = [
        "# Sampler speed on the bundled real runs",
        "",
        f"Command: `python benchmarks/sampler_speed.py --samplers {' '.join(args.samplers)} --curve "
        f"{args.curve} --draws {args.draws} --tune {args.tune} --chains {args.chains} --thin {args.thin} "
        f"--seeds {' '.join(map(str, args.seeds))}`  ",
        f"Machine: {machine_line()}. Wall "
        "time includes compilation, tuning and sampling; each chain runs draws x thin iterations after "
        "tuning and keeps every thin-th (PyMC's default NUTS keeps every draw: thin 1). ESS: minimum "
        "bulk ESS over parameters, of the kept draws. Ratio: "
        "ESS/s over PyMC's default NUTS fitted with the same seed. Targets: 0 divergences, r_hat <= "
        f"{TARGETS['max_r_hat']}, bulk and tail ESS >= {TARGETS['min_ess']:.0f}, "
        f"wall <= {TARGETS['wall']:.0f} s. Model code {code}.",
        "",
        "| seed | sampler | wall s | compile s | divergences | max r_hat | min bulk ESS | min tail ESS | "
        "ESS/s | ESS/s vs PyMC NUTS | targets met |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    summary: dict[str, list[tuple[float, float, float]]] = {}
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['seed']} | {r['sampler']} | failed: {r['error']} | | | | | | | | |")
            continue
        reference = next(
            (x for x in rows if x["sampler"] == "pymc" and x["seed"] == r["seed"] and "error" not in x), None
        )
        ess_per_s = r["min_ess_bulk"] / r["wall"]
        ratio = ess_per_s / (reference["min_ess_bulk"] / reference["wall"]) if reference else float("nan")
        summary.setdefault(r["sampler"], []).append((r["wall"], ess_per_s, ratio, r["max_r_hat"]))
        lines.append(
            f"| {r['seed']} | {r['sampler']} | {r['wall']:.0f} | {r['compile_seconds']:.0f} | "
            f"{r['divergences']} | {r['max_r_hat']:.3f} | {r['min_ess_bulk']:.0f} | {r['min_ess_tail']:.0f} "
            f"| {ess_per_s:.2f} | {ratio:.1f}x | {meets_targets(r)} |"
        )
    lines += [
        "",
        "Medians over seeds:",
        "",
        "| sampler | wall s | ESS/s | ESS/s vs PyMC NUTS | worst r_hat |",
        "|---|---|---|---|---|",
    ]
    for sampler, values in summary.items():
        walls, rates, ratios, rhats = (list(v) for v in zip(*values, strict=True))
        import statistics

        lines.append(
            f"| {sampler} | {statistics.median(walls):.0f} | {statistics.median(rates):.2f} | "
            f"{statistics.median(ratios):.1f}x | {max(rhats):.3f} |"
        )
    lines.append("")
    lines.append(
        "ADVI and Pathfinder are approximations: their r_hat/ESS are over independent draws of the "
        "approximation and say nothing about its bias; they are listed for speed only."
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
