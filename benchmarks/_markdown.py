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
    """The machine, Python and date a benchmark ran on."""
    import os
    import platform
    import time

    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}"
    )


def write_result(path: Path, lines: list[str]) -> None:
    """Write a benchmark's markdown result (``lines`` joined) to ``path`` (its folder made if
    missing) and print it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    print(path.read_text())
