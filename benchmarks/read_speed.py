"""Reading speed and memory: the bundled runs, a 1,000,000-line verl log, a 200 MB TensorBoard file.

Each case runs in a fresh Python process so that its peak resident memory (``ru_maxrss``) is its
own; the baseline (interpreter + numpy + pandas + bayesgrpo imported) is measured the same way and
subtracted. "Output" is the in-memory size of the runs table's points (``memory_usage(deep=True)``).

Usage::

    python benchmarks/read_speed.py                 # all cases, writes benchmarks/results/read_speed.md
    python benchmarks/read_speed.py --quick         # small files, for a smoke run

The synthetic files are written to ``benchmarks/_scratch/`` (ignored by git) and reused.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _markdown import machine_line

HERE = Path(__file__).resolve().parent
SCRATCH = HERE / "_scratch"
RESULTS = HERE / "results"

CHILD = r"""
import json, resource, sys, time, warnings
import numpy as np, pandas as pd
import bayesgrpo
from bayesgrpo.model.datasets import load_bundled
target, fmt = sys.argv[1], sys.argv[2]
start = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    if target == "baseline":
        table = None
    elif target == "bundled":
        table = load_bundled(warn=False)
    else:
        table = bayesgrpo.load_runs(target, format=fmt or None, warn=False)
seconds = time.perf_counter() - start
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = {"seconds": seconds, "peak_mib": peak_kib / 1024}
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
    args = parser.parse_args()
    n_lines = 20_000 if args.quick else 1_000_000
    tb_mib = 5 if args.quick else 200
    SCRATCH.mkdir(exist_ok=True)

    cases = [("bundled 60 real runs", "bundled", "")]
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
        f"Command: `python benchmarks/read_speed.py{' --quick' if args.quick else ''}`  ",
        f"Machine: {machine_line()}; "
        f"baseline process (imports only) peak {baseline['peak_mib']:.0f} MiB, subtracted.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    lines += ["| " + " | ".join(row[h] for h in header) + " |" for row in rows]
    RESULTS.mkdir(exist_ok=True)
    name = "read_speed_quick.md" if args.quick else "read_speed.md"
    (RESULTS / name).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
