"""Reading speed and memory: the bundled runs, a 1,000,000-line verl log, a 200 MB TensorBoard file,
a CSV of 200,000 runs of 3 points, and one verl step line of 200,000 metrics.

The last two are issue 79's: the CSV took 5.3 ms a run before runs were tidied at once (over 600 s
for 200,000 runs); the one step line took 46 s and 1 GB before the readers' bounds
(``bayesgrpo.logs.readers._limits``: 1 MiB a line, 10,000 metrics a line), and is now an error
raised before the line is parsed; so is a shorter line of 20,000 metrics (the metric bound). The
step line at the bound (10,000 metrics) is read.

Each case runs in a fresh Python process so that its peak resident memory (``ru_maxrss``) is its
own; the baseline (interpreter + numpy + pandas + bayesgrpo imported) is measured the same way and
subtracted. "Output" is the in-memory size of the runs table's points (``memory_usage(deep=True)``).

Usage::

    python benchmarks/read_speed.py                 # all cases, writes benchmarks/results/read_speed.md
    python benchmarks/read_speed.py --quick         # small files, for a smoke run
    python benchmarks/read_speed.py --scale         # issue 79's cases only: read_speed_scale.md

The synthetic files are written to ``benchmarks/_scratch/`` (ignored by git) and reused.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _markdown import machine_line

HERE = Path(__file__).resolve().parent
SCRATCH = HERE / "_scratch"
RESULTS = HERE / "results"

CHILD = r"""
import json, resource, sys, time, warnings
import numpy as np, pandas as pd
import bayesgrpo
from bayesgrpo.errors import RecordTooLargeError
from bayesgrpo.model.datasets import load_bundled
target, fmt = sys.argv[1], sys.argv[2]
start = time.perf_counter()
error = None
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    if target == "baseline":
        table = None
    elif target == "bundled":
        table = load_bundled(warn=False)
    else:
        try:
            table = bayesgrpo.load_runs(target, format=fmt or None, warn=False)
        except RecordTooLargeError as exc:
            table, error = None, str(exc).rsplit(": ", 2)[-2]
seconds = time.perf_counter() - start
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = {"seconds": seconds, "peak_mib": peak_kib / 1024, "error": error}
if table is not None:
    out.update(
        rows=int(len(table.points)),
        records=int(table.report.records_read),
        values=int(table.points.drop(columns=["run_id", "step"]).notna().to_numpy().sum()),
        output_mib=float(table.points.memory_usage(deep=True).sum()) / 2**20,
        runs=len(table),
        balanced=bool(table.report.balanced),
    )
print(json.dumps(out))
"""


def measure(target: str, fmt: str = "") -> dict[str, float]:
    """Read ``target`` in a child process; return its timings and peak memory."""
    completed = subprocess.run(
        [sys.executable, "-c", CHILD, target, fmt], capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        raise RuntimeError(f"reading {target} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def make_verl(path: Path, n_lines: int) -> Path:
    """Write a verl console log of ``n_lines`` step lines to ``path``."""
    from bayesgrpo.logs.writers.verl import write_large_verl_console

    if not path.exists():
        start = time.perf_counter()
        write_large_verl_console(path, n_lines)
        print(
            f"  wrote {path.name}: {path.stat().st_size / 2**20:.0f} MiB in "
            f"{time.perf_counter() - start:.0f} s",
            flush=True,
        )
    return path


def make_many_runs_csv(path: Path, n_runs: int, points: int = 3) -> Path:
    """Write a CSV of ``n_runs`` runs of ``points`` points each (``run_id,step,reward``) to ``path``."""
    if not path.exists():
        rng = np.random.default_rng(0)
        runs = np.repeat([f"run{i:06d}" for i in range(n_runs)], points)
        steps = np.tile(np.arange(1, points + 1), n_runs)
        frame = pd.DataFrame({"run_id": runs, "step": steps, "reward": rng.random(n_runs * points).round(4)})
        frame.to_csv(path, index=False)
        print(f"  wrote {path.name}: {path.stat().st_size / 2**20:.1f} MiB", flush=True)
    return path


def make_wide_step_line(path: Path, n_metrics: int) -> Path:
    """Write a verl console log whose second step line logs ``n_metrics`` metrics to ``path``."""
    if not path.exists():
        fields = " - ".join(f"m{k}:{k % 7 / 10}" for k in range(n_metrics - 1))
        path.write_text(f"step:1 - critic/score/mean:0.1\nstep:2 - critic/score/mean:0.2 - {fields}\n")
    return path


def make_tensorboard(folder: Path, target_mib: int) -> Path:
    """Write a TensorBoard run of about ``target_mib`` MiB to ``folder``."""
    from bayesgrpo.logs.writers.tensorboard import write_large_tensorboard

    folder.mkdir(parents=True, exist_ok=True)
    existing = list(folder.glob("events.out.tfevents.*"))
    if not existing:
        start = time.perf_counter()
        write_large_tensorboard(folder, target_bytes=target_mib * 2**20)
        existing = list(folder.glob("events.out.tfevents.*"))
        print(
            f"  wrote {existing[0].name}: {existing[0].stat().st_size / 2**20:.0f} MiB in "
            f"{time.perf_counter() - start:.0f} s",
            flush=True,
        )
    return folder


def main() -> None:
    """Time the readers on large generated logs and write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small synthetic files (smoke run)")
    parser.add_argument(
        "--scale", action="store_true", help="only the many-runs CSV and the wide step lines (issue 79)"
    )
    args = parser.parse_args()
    n_lines = 20_000 if args.quick else 1_000_000
    tb_mib = 5 if args.quick else 200
    n_runs = 20_000 if args.quick else 200_000
    SCRATCH.mkdir(exist_ok=True)

    cases: list[tuple[str, str, str]] = []
    if not args.scale:
        cases.append(("bundled 60 real runs", "bundled", ""))
        cases.append(
            (
                f"verl console, {n_lines:,} lines",
                str(make_verl(SCRATCH / f"verl_{n_lines}.log", n_lines)),
                "verl-console",
            )
        )
        cases.append(
            (
                f"TensorBoard, {tb_mib} MB",
                str(make_tensorboard(SCRATCH / f"tb_{tb_mib}mib", tb_mib)),
                "tensorboard",
            )
        )

    cases.append(
        (
            f"CSV, {n_runs:,} runs of 3 points",
            str(make_many_runs_csv(SCRATCH / f"runs_{n_runs}.csv", n_runs)),
            "csv",
        )
    )
    for n_metrics in (10_000, 20_000, 200_000):
        cases.append(
            (
                f"verl step line of {n_metrics:,} metrics",
                str(make_wide_step_line(SCRATCH / f"verl_wide_{n_metrics}.log", n_metrics)),
                "verl-console",
            )
        )

    baseline = measure("baseline")
    rows = []
    for label, target, fmt in cases:
        result = measure(target, fmt)
        if target == "bundled":
            size_mib = None
        elif Path(target).is_file():
            size_mib = Path(target).stat().st_size / 2**20
        else:
            size_mib = sum(p.stat().st_size for p in Path(target).rglob("*") if p.is_file()) / 2**20
        extra_mib = result["peak_mib"] - baseline["peak_mib"]
        if result.get("error"):
            rows.append(
                {
                    "case": label,
                    "input MiB": f"{size_mib:.0f}" if size_mib is not None else "7",
                    "records": "-",
                    "rows out": f"error: {result['error']}",
                    "seconds": f"{result['seconds']:.2f}",
                    "records/s": "-",
                    "rows/s": "-",
                    "output MiB": "-",
                    "peak MiB over baseline": f"{extra_mib:.0f}",
                    "peak / output": "-",
                    "balanced": "-",
                }
            )
            print(rows[-1], flush=True)
            continue
        rows.append(
            {
                "case": label,
                "input MiB": f"{size_mib:.0f}" if size_mib is not None else "7",
                "records": f"{result['records']:,}",
                "rows out": f"{result['rows']:,}",
                "seconds": f"{result['seconds']:.2f}",
                "records/s": f"{result['records'] / result['seconds']:,.0f}",
                "rows/s": f"{result['rows'] / result['seconds']:,.0f}",
                "output MiB": f"{result['output_mib']:.1f}",
                "peak MiB over baseline": f"{extra_mib:.0f}",
                "peak / output": f"{extra_mib / max(result['output_mib'], 1e-9):.1f}x",
                "balanced": str(result["balanced"]),
            }
        )
        print(rows[-1], flush=True)

    header = list(rows[0])
    lines = [
        "# Reading speed and memory",
        "",
        f"Command: `python benchmarks/read_speed.py{' --quick' if args.quick else ''}"
        f"{' --scale' if args.scale else ''}`  ",
        f"Machine: {machine_line()}; "
        f"baseline process (imports only) peak {baseline['peak_mib']:.0f} MiB, subtracted.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    lines += ["| " + " | ".join(row[h] for h in header) + " |" for row in rows]
    RESULTS.mkdir(exist_ok=True)
    name = f"read_speed{'_scale' if args.scale else ''}{'_quick' if args.quick else ''}.md"
    (RESULTS / name).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
