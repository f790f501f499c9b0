"""Start-up cost of the command line and of ``import bayesgrpo``, in fresh processes.

Each command runs ``--repeats`` times in a new interpreter; the table gives the median and the
slowest wall time, and which heavy libraries the process imported (it should be none for
``--help``: the verbs import what they need when they run).

    python benchmarks/cli_startup.py [--repeats 15] [--out benchmarks/results/cli_startup.md]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _markdown import machine_line

HEAVY = ("pymc", "pytensor", "arviz", "jax", "matplotlib", "pandas", "scipy", "transformers", "torch")

PROBE = (
    "import sys, runpy; sys.argv = {argv!r}\n"
    "try:\n"
    "    runpy.run_module({module!r}, run_name='__main__')\n"
    "except SystemExit:\n"
    "    pass\n"
    "print('LOADED', ','.join(m for m in {heavy!r} if m in sys.modules))\n"
)


def loaded_modules(module: str, argv: list[str]) -> str:
    """The heavy libraries a fresh interpreter imports to run ``module`` with ``argv``."""
    code = PROBE.format(argv=argv, module=module, heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    line = next(line for line in out.splitlines() if line.startswith("LOADED"))
    return line.split(" ", 1)[1] if " " in line else ""


def imported_by(command: list[str]) -> str:
    """The heavy libraries a ``python -c CODE`` command imports ("-" for the bare interpreter)."""
    if command[-1] == "pass":
        return "-"
    code = command[-1] + f"\nimport sys; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def wall_times(command: list[str], repeats: int) -> list[float]:
    """Seconds of wall time of ``command`` in ``repeats`` fresh processes."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True)
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> None:
    """Time the commands and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "cli_startup.md")
    args = parser.parse_args()
    script = shutil.which("bayesgrpo")
    cases = [
        ("`bayesgrpo --help`", [script, "--help"], "bayesgrpo.interfaces.cli", ["bayesgrpo", "--help"]),
        (
            "`bayesgrpo stop --help`",
            [script, "stop", "--help"],
            "bayesgrpo.interfaces.cli",
            ["bayesgrpo", "stop", "--help"],
        ),
        ("`python -c 'import bayesgrpo'`", [sys.executable, "-c", "import bayesgrpo"], None, None),
        ("`python -c 'pass'` (the interpreter alone)", [sys.executable, "-c", "pass"], None, None),
    ]
    rows = []
    for label, command, module, argv in cases:
        seconds = wall_times(command, args.repeats)
        heavy = loaded_modules(module, argv) if module else imported_by(command)
        rows.append((label, statistics.median(seconds), max(seconds), heavy or "none"))
        median = statistics.median(seconds)
        print(f"{label}: median {median:.3f} s, max {max(seconds):.3f} s, heavy: {heavy or 'none'}")
    machine = machine_line()
    lines = [
        "# Start-up of the command line",
        "",
        f"`python benchmarks/cli_startup.py --repeats {args.repeats}` on {machine}: "
        f"wall time of fresh processes (median and slowest of {args.repeats}).",
        "The target is `bayesgrpo --help` under 0.3 s; the last column lists the heavy libraries the "
        "process imported.",
        "",
        "| command | median s | slowest s | heavy libraries imported |",
        "|---|---|---|---|",
        *(f"| {label} | {median:.3f} | {slowest:.3f} | {heavy} |" for label, median, slowest, heavy in rows),
        "",
    ]
    args.out.write_text("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
