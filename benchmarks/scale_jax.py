"""Scale: the population model on 100 to 10,000 simulated runs, NUTS beside the fast paths.

Simulates populations of runs (five families, sizes 0.5-14B, 200 planned steps each, 20-100% of
each run observed, three noise levels) from the package's default curve with known parameters,
fits ``RewardModel`` to them with each method asked for, and reports what a lab with many runs
meets: wall time (and how much of it is the per-run preconditioning), peak memory, ESS per second,
r_hat, divergences, and parameter recovery (the share of true run parameters ``r0``, ``r1``,
``tau``, ``k``, ``sigma`` inside their 90% intervals). An approximation (ADVI, Pathfinder) is
also compared with NUTS on the same runs: how far its posterior means sit from NUTS's, in NUTS
posterior sds, and how wide its 90% intervals are against NUTS's.

Each (runs, method) fit runs in its own process (its peak memory is its own) and is cached in
``results/scale/<runs>_<method>_<draws>.json`` with its run parameters beside it, so a cut run
resumes where it stopped. A fit that exceeds ``--timeout`` is recorded as not practical.

Writes ``results/scale.md`` and ``results/scale.png`` (wall time against runs, log-log).

Usage::

    python benchmarks/scale_jax.py --runs 100 1000 10000 --methods numpyro advi pathfinder
    python benchmarks/scale_jax.py --runs 100 --methods numpyro      # a quick look

On a GPU machine (``JAX_PLATFORMS=cuda``) the same command measures the GPU; the table names the
device JAX ran on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.model.sampling import DEFAULT_THIN

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from sampler_speed import model_code_hash  # noqa: E402  (the same key of the model code)

RESULTS = HERE / "results"
CACHE = RESULTS / "scale"
RECOVERED = ("r0", "r1", "tau", "k", "sigma")
#: NUTS warm-up per chain: ``RewardModel.fit``'s default (its dense population block needs it).
NUTS_TUNE = 1000
#: What the GPU rows are (the device lent to one session, 2026-11-26), printed under the table.
GPU_NOTE = (
    "GPU rows: `python benchmarks/scale_jax.py --device gpu --runs 100 1000 --methods numpyro "
    "--timeout T` on one NVIDIA H100 80GB (16 cores, Python 3.12.3, JAX 0.11.2 with CUDA 13, "
    "numpyro 0.21.0; PyMC 5.28.5 and PyTensor 2.38.3 carried as wheels), float64, the two chains "
    "vectorised on the one device (`sampling.numpyro_chain_method`). The session had 15 minutes of "
    "device time: the 100-run fit was given 200 s and the 1,000-run fit the 318 s left, and neither "
    "finished, where the 2-core CPU then fitted the same 100 runs in about 105 s. Where their time went "
    "(preconditioning, compiling, warm-up) was not recorded; the script now writes each stage's "
    "time beside its cache (`<cell>.stages`), so that a cut fit says how far it came. My reading, "
    "not measured: each leapfrog step of this model is a chain of small element-wise kernels on "
    "3,600-36,000 points, so kernel launches rather than arithmetic set the step's cost, and "
    "vectorised chains wait for the longer tree of the two. On this evidence the GPU is not the "
    "faster path for the population fit; ADVI on the CPU is. These GPU rows are of the sampler "
    "before `bayesgrpo.model.nuts` (flat sites, parallel chains in short calls) and before the "
    "conditioned whitening; no GPU has been lent to this task since, so the GPU table of the current "
    "sampler is unmeasured. The command that would measure it, on a machine with one: "
    "`python benchmarks/scale_jax.py --device gpu --runs 100 1000 --methods numpyro --timeout 280`, "
    "then the CPU command above to write the table."
)

#: The simulated population of ``n_runs`` runs from ``seed`` (Python source, run in a child
#: process; ``chain_memory.py`` fits the same runs).
SIMULATE = r"""
import numpy as np
from bayesgrpo.model.curves import DEFAULT_CURVE
from bayesgrpo.model.simulate import simulate_runs
rng = np.random.default_rng(seed)
observed = rng.uniform(0.2, 1.0, n_runs).round(2)  # the share of its 200 steps each run logged
noise = rng.choice([0.01, 0.03, 0.08], n_runs)
sim = simulate_runs(n_runs, curve=DEFAULT_CURVE, families=("qwen", "llama", "gemma", "mistral", "phi"),
    n_steps=200, observed_fraction=observed.tolist(), noise=noise.tolist(), random_seed=seed)
"""

CHILD = (
    r"""
import json, os, platform, resource, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np
n_runs, method, draws, tune, seed, thin, out = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), \
    int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
progress = len(sys.argv) > 8 and sys.argv[8] == "progress"
from bayesgrpo.model.reward_model import RewardModel
def stage(name, _start=time.perf_counter()):
    # where the time went, kept as it goes: a fit cut by the timeout still says how far it came
    with open(out + ".stages", "a") as handle:
        handle.write(f"{name} {time.perf_counter() - _start:.1f}\n")
stage("imported")
"""
    + SIMULATE
    + r"""
start = time.perf_counter()
model = RewardModel()
model.build(sim.table)
prepare = time.perf_counter() - start
stage("preconditioned")
model = RewardModel().fit(sim.table, sampler=method, draws=draws, tune=tune, chains=2, random_seed=seed,
    progressbar=progress, thin=thin)
wall = time.perf_counter() - start
stage("sampled")
import jax
d = model.diagnostics.to_dict()
params = model.run_parameters()
params.to_csv(out + ".csv", index=False)
truth = sim.truth.set_index("run_id")
merged = params[params["parameter"].isin(["r0", "r1", "tau", "k", "sigma"])].copy()
true = [truth.loc[r, p] for r, p in zip(merged["run_id"], merged["parameter"])]
merged["hit"] = (merged["q05"] <= true) & (np.asarray(true) <= merged["q95"])
coverage = merged.groupby("parameter")["hit"].mean().to_dict()
result = dict(d, runs=n_runs, method=method, draws=draws, tune=tune, thin=thin, wall=wall, prepare=prepare,
    points=int(model.data.mask.sum()), peak_gib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    device=f"{jax.devices()[0].platform}: {jax.devices()[0].device_kind}", coverage=coverage,
    host=f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    coverage_all=float(merged["hit"].mean()), model_code=os.environ.get("BAYESGRPO_MODEL_CODE"),
    gpu_peak_gib=((jax.devices()[0].memory_stats() or {}).get("peak_bytes_in_use", 0) / 2**30
        if jax.devices()[0].platform == "gpu" else None))
json.dump(result, open(out + ".json", "w"), default=float)
"""
)


def cell_stem(
    runs: int, method: str, draws: int, device: str = "cpu", thin: int = DEFAULT_THIN, tune: int = NUTS_TUNE
) -> Path:
    """Where one (runs, method, draws) fit is cached, without suffix; GPU fits apart.

    NUTS fits carry their thinning and warm-up (``x<thin>+<tune>``): those without them were made
    before ``bayesgrpo.model.nuts`` (PyMC's numpyro path, float64, every draw kept).
    """
    kept = f"x{thin}+{tune}" if method == "numpyro" else ""
    return CACHE / f"{runs}_{method}_{draws}{kept}{'_gpu' if device == 'gpu' else ''}"


def last_progress(stderr: str | bytes | None) -> str:
    """The sampler's last progress-bar line in a cut child's captured stderr (``--progress``)."""
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else (stderr or "")
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if "it" in line and "%" in line]
    return lines[-1][:160] if lines else ""


def fit_cell(runs: int, method: str, args: argparse.Namespace) -> dict:
    """One fit in its own process, cached on disk; a fit past the timeout is recorded as such."""
    CACHE.mkdir(parents=True, exist_ok=True)
    tune = args.nuts_tune if method == "numpyro" else args.tune
    stem = cell_stem(runs, method, args.draws, args.device, args.thin, tune)
    if stem.with_suffix(".json").exists():
        return json.loads(stem.with_suffix(".json").read_text())
    command = [
        sys.executable,
        "-c",
        CHILD,
        str(runs),
        method,
        str(args.draws),
        str(tune),
        str(args.seed),
        str(args.thin),
    ]
    environment = dict(
        os.environ,
        JAX_PLATFORMS="cuda" if args.device == "gpu" else "cpu",
        BAYESGRPO_MODEL_CODE=model_code_hash(),
    )
    try:
        done = subprocess.run(
            [*command, str(stem), "progress" if args.progress else "quiet"],
            capture_output=True,
            text=True,
            timeout=args.timeout,
            check=False,
            env=environment,
        )
    except subprocess.TimeoutExpired as cut:
        stages = stem.with_suffix(".stages")
        reached = stages.read_text().split() if stages.exists() else []
        came = last_progress(cut.stderr)
        result = {
            "runs": runs,
            "method": method,
            "draws": args.draws,
            "error": f"over {args.timeout} s"
            + (f" (last stage reached: {reached[-2]} at {reached[-1]} s)" if reached else "")
            + (f"; sampler's progress then: {came}" if came else ""),
            "device": args.device,
        }
        stem.with_suffix(".json").write_text(json.dumps(result))
        return result
    if done.returncode != 0:
        return {"runs": runs, "method": method, "error": done.stderr.strip().splitlines()[-1][:200]}
    return json.loads(stem.with_suffix(".json").read_text())


def against_nuts(runs: int, method: str, draws: int, thin: int, tune: int) -> tuple[float, float]:
    """Median |mean - NUTS mean| / NUTS sd and median 90% width ratio over recovered parameters."""
    own = cell_stem(runs, method, draws).with_suffix(".csv")
    nuts = cell_stem(runs, "numpyro", draws, thin=thin, tune=tune).with_suffix(".csv")
    if not nuts.exists():  # NUTS on the GPU, on the same simulated runs (same seed)
        nuts = cell_stem(runs, "numpyro", draws, "gpu", thin, tune).with_suffix(".csv")
    if not (own.exists() and nuts.exists()):
        return float("nan"), float("nan")
    a = pd.read_csv(own).set_index(["run_id", "parameter"])
    b = pd.read_csv(nuts).set_index(["run_id", "parameter"])
    b = b[b.index.get_level_values("parameter").isin(RECOVERED)]
    a = a.loc[b.index]
    sd = (b["q95"] - b["q05"]) / (2 * 1.645)
    shift = float(np.median(np.abs(a["mean"] - b["mean"]) / sd))
    width = float(np.median((a["q95"] - a["q05"]) / (b["q95"] - b["q05"])))
    return shift, width


def write_table(rows: list[dict], args: argparse.Namespace) -> None:
    """The markdown table and the time-against-runs figure."""
    current_code = model_code_hash()
    lines = [
        "# The population model at scale",
        "",
        "Command: `python benchmarks/scale_jax.py --runs 100 1000 --methods numpyro advi pathfinder` then "
        "`--runs 10000 --methods advi` and `--runs 1000 --methods numpyro --draws 1000` "
        f"(NUTS: {args.draws} kept draws, every {args.thin}th of "
        f"{args.draws * args.thin} iterations, after {args.nuts_tune} tuning, per chain: "
        "`RewardModel.fit`'s thinning and warm-up, half its 1,000 kept draws; each row is cached, the "
        "table holds them all)  ",
        f"Host: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; 2 chains. "
        "Simulated runs of the default curve: five families, 200 planned steps, 20-100% observed. "
        "Wall: simulate excluded, preconditioning (per-run Laplace fits) + compile + sampling included. "
        "ESS: minimum bulk ESS over all parameters. Coverage: share of true run parameters (r0, r1, "
        "tau, k, sigma) inside their 90% intervals. Against NUTS: median |mean - NUTS mean| in NUTS "
        "posterior sds, and median 90%-width ratio, over the same runs.",
        "",
        "| runs | points | method | device | wall s | of it preconditioning s | peak GiB | divergences | "
        "max r_hat | min bulk ESS | ESS/s | 90% coverage | shift vs NUTS (sd) | width vs NUTS |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(
                f"| {r['runs']} | | {r['method']} | {r.get('device', 'cpu')} | not practical: {r['error']} "
                "| | | | | | | | | |"
            )
            continue
        shift, width = ("", "")
        if r["method"] != "numpyro":
            shift, width = against_nuts(r["runs"], r["method"], r["draws"], args.thin, args.nuts_tune)
        if isinstance(shift, float) and np.isfinite(shift):
            # kept in the row's cache: the draws' tables behind it are not committed
            r["shift_vs_nuts"], r["width_vs_nuts"] = shift, width
            device = "gpu" if str(r.get("device", "")).startswith("gpu") else "cpu"
            stem = cell_stem(r["runs"], r["method"], r["draws"], device, args.thin, r.get("tune", args.tune))
            stem.with_suffix(".json").write_text(json.dumps(r, default=float))
        shift, width = r.get("shift_vs_nuts", shift), r.get("width_vs_nuts", width)
        shift_text = f"{shift:.2f}" if isinstance(shift, float) and np.isfinite(shift) else "-"
        width_text = f"{width:.2f}" if isinstance(width, float) and np.isfinite(width) else "-"
        approx = r["method"] in ("advi", "pathfinder")
        earlier = "" if r.get("model_code") == current_code else " (earlier model)"
        gpu_memory = f" (GPU {r['gpu_peak_gib']:.2f})" if r.get("gpu_peak_gib") else ""
        lines.append(
            f"| {r['runs']} | {r['points']} | {r.get('label', r['method'])}{earlier} | {r['device']} "
            f"| {r['wall']:.0f}{' (shared CPU)' if r.get('shared_cpu') else ''} | "
            f"{r['prepare']:.0f} | {r['peak_gib']:.2f}{gpu_memory} | {'-' if approx else r['divergences']} | "
            f"{'-' if approx else format(r['max_r_hat'], '.3f')} | "
            f"{'-' if approx else format(r['min_ess_bulk'], '.0f')} | "
            f"{'-' if approx else format(r['min_ess_bulk'] / r['wall'], '.2f')} | "
            f"{r['coverage_all']:.0%} | {shift_text} | {width_text} |"
        )
    if any("label" in r for r in rows):
        lines += [
            "",
            "Rows `numpyro, D x T + W`: NUTS with other draws, by `--runs R --methods numpyro --draws D`; "
            "1,000 x 4 + 1,000 is what `RewardModel().fit` samples by default.",
        ]
    if any(r.get("shared_cpu") for r in rows):
        lines += [
            "",
            "Wall `(shared CPU)`: the fit "
            + "; ".join(sorted({r["shared_cpu"] for r in rows if r.get("shared_cpu")}))
            + ". Its sampling statistics stand; its time and ESS/s do not.",
        ]
    if any(r.get("model_code") != current_code and "error" not in r for r in rows):
        lines += [
            "",
            "Rows marked `(earlier model)` were fitted on model code other than the current "
            f"(`bayesgrpo/model` hashed as `sampler_speed.py` keys its cache: {current_code}) and not "
            "rerun since; the others ran on the current code.",
        ]
    else:
        lines += [
            "",
            f"Every CPU row ran on the current model code (`bayesgrpo/model` hashed as `sampler_speed.py` "
            f"keys its cache: {current_code}).",
        ]
    nuts_walls = sorted(
        (r["runs"], r["wall"])
        for r in rows
        if r.get("label") is None
        and r["method"] == "numpyro"
        and "error" not in r
        and r.get("device") == "cpu: cpu"
    )
    if len(nuts_walls) >= 2 and max(r["runs"] for r in rows) > nuts_walls[-1][0]:
        (r_lo, w_lo), (r_hi, w_hi) = nuts_walls[-2], nuts_walls[-1]
        biggest = max(r["runs"] for r in rows)
        projected = w_hi * biggest / r_hi
        default_draws = [
            r
            for r in rows
            if r.get("label")
            and r["method"] == "numpyro"
            and r["runs"] == r_hi
            and "error" not in r
            and not r.get("shared_cpu")
        ]
        at_default = (
            f" and about {default_draws[0]['wall'] * biggest / r_hi / 3600:.1f} h at the default fit's"
            if default_draws
            else ""
        )
        lines += [
            "",
            f"Where NUTS stops: it was not run on {biggest:,} runs. Its measured cost grew "
            f"{w_hi / w_lo:.1f}x from {r_lo:,} to {r_hi:,} runs; linear from {r_hi:,} runs (a projection, "
            f"not a measurement) {biggest:,} runs would take about {projected / 60:.0f} min at these "
            f"draws{at_default}, on these two cores. ADVI "
            '(`RewardModel().fit(table, sampler="advi")`) is the documented path there; its '
            "accuracy against NUTS is in the columns above.",
        ]
    if any(str(r.get("device", "")).startswith("gpu") for r in rows):
        lines += ["", GPU_NOTE]
    lines += [
        "",
        "ADVI and Pathfinder draw independent samples of an approximation: their r_hat and ESS say "
        "nothing about its bias, so they are left out; the columns against NUTS say how far off it is.",
        "",
    ]
    (RESULTS / "scale.md").write_text("\n".join(lines))
    print("\n".join(lines))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for method in ("numpyro", "advi", "pathfinder"):
        plotted = [r for r in rows if r["method"] == method and "error" not in r and "label" not in r]
        done = sorted((r["runs"], r["wall"]) for r in plotted)
        if done:
            x, y = zip(*done, strict=True)
            ax.plot(x, y, "o-", label=method)
    runs = np.array(sorted({r["runs"] for r in rows}), dtype=float)
    if runs.size:
        reference = [r for r in rows if "error" not in r and r["runs"] == runs.min()]
        if reference:
            base = min(r["wall"] for r in reference)
            ax.plot(runs, base * runs / runs.min(), "k:", label="linear in runs")
    ax.set(xscale="log", yscale="log", xlabel="runs in the population", ylabel="wall time, s")
    ax.set_title("Fit time against population size", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "scale.png", dpi=120)


def main() -> None:
    """Fit each population size with each method (cached) and write the table and figure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--methods", nargs="+", default=["numpyro", "advi", "pathfinder"])
    parser.add_argument("--draws", type=int, default=500, help="draws (and tune) per chain for NUTS")
    parser.add_argument("--tune", type=int, default=500, help="optimisation steps / 10 for ADVI, Pathfinder")
    parser.add_argument("--nuts-tune", type=int, default=NUTS_TUNE, help="NUTS warm-up per chain")
    parser.add_argument(
        "--thin", type=int, default=DEFAULT_THIN, help="NUTS iterations per kept draw (the fit's default)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=int, default=3600, help="seconds a fit may take")
    parser.add_argument(
        "--progress",
        action="store_true",
        help="the child shows the sampler's progress bar; a fit cut by --timeout records how far it came",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "gpu"),
        default="cpu",
        help="where JAX runs (JAX_PLATFORMS=cpu or cuda); GPU rows are cached apart",
    )
    args = parser.parse_args()
    for runs in args.runs:
        for method in args.methods:
            result = fit_cell(runs, method, args)
            print(json.dumps(result, default=float)[:300], flush=True)
    # the table holds every cell measured so far with these draws, earlier invocations included
    kept = (f"_{args.draws}", f"_{args.draws}x{args.thin}+{args.nuts_tune}")
    paths = [p for p in CACHE.glob("*.json") if p.stem.removesuffix("_gpu").endswith(kept)]
    rows = [json.loads(path.read_text()) for path in paths]
    # NUTS on the CPU with other draws (a user's default fit keeps 1,000): rows of their own
    for path in sorted(CACHE.glob("*_numpyro_*x*.json")):
        if path not in paths and not path.stem.endswith("_gpu"):
            other = json.loads(path.read_text())
            if "error" not in other:
                other["label"] = f"numpyro, {other['draws']} x {other['thin']} + {other['tune']}"
                rows.append(other)
    order = {method: i for i, method in enumerate(("numpyro", "advi", "pathfinder"))}
    rows.sort(
        key=lambda r: (str(r.get("device", "cpu")).startswith("gpu"), r["runs"], order.get(r["method"], 9))
    )
    write_table(rows, args)


if __name__ == "__main__":
    main()
