"""A pandas DataFrame as a GitHub markdown table (no tabulate dependency for benchmarks)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def markdown_table(frame: pd.DataFrame, floatfmt: str = ".3f") -> str:
    """Render ``frame`` (no index) as a markdown table; floats with ``floatfmt``."""

    def cell(value: object) -> str:
        if isinstance(value, float):
            return format(value, floatfmt)
        return str(value)

    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def command_line(script: str, argv: list[str] | None) -> str:
    """The command that ran a benchmark, as a user would type it."""
    import shlex
    import sys

    return f"python benchmarks/{script}" + "".join(
        " " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )


def machine_line() -> str:
    """The machine (its CPU and the SIMD level numpy dispatches to), Python and date a benchmark ran on.

    The CPU is named because timings move with it: the live query took 54 ms on the AVX2 machine
    of 2026-11 and 31 ms on an AVX-512 one on 2026-12-02 with the same code
    (``results/live_update.md``); numpy dispatches its float64 ``exp``/``log`` loops by SIMD level,
    the likeliest part of that difference (not measured apart).
    """
    import os
    import platform
    import time

    return (
        f"{platform.machine()} {cpu_name()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}"
    )


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``) and numpy's highest dispatched SIMD target."""
    name = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:  # numpy >= 2: the targets its ufunc loops were built for and this CPU runs
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

        targets = [target for target in __cpu_dispatch__ if __cpu_features__.get(target)]
    except ImportError:
        targets = []
    return f"{name} (numpy SIMD up to {targets[-1]})" if targets else name


def write_result(path: Path, lines: list[str]) -> None:
    """Write a benchmark's markdown result (``lines`` joined) to ``path`` (its folder made if
    missing) and print it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    print(path.read_text())
