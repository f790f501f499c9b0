"""The fleet's HTML page at 1,000 runs: how long it takes, how big it is, what it draws.

``--runs`` simulated runs written as logs in four formats (``benchmarks/fleet.py``'s
``write_fleet``: TRL trainer states, verl console logs, TensorBoard, CSV, one in fifty damaged),
then ``bayesgrpo report --fleet`` (:func:`bayesgrpo.interfaces.html_report.write_fleet_report`)
serially and on a local Ray with 2 workers. Measured: wall time, the page's size, its table rows,
the figures inline and in the folder beside it, and whether both pages hold the same rows.

Usage::

    python benchmarks/fleet_report.py               # 1,000 runs (a few minutes on 2 cores)

The logs are written once into ``benchmarks/_scratch/fleet_<runs>/logs``. Writes
``benchmarks/results/fleet_report.md``.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import warnings
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _markdown import command_line, machine_line, markdown_table
from fleet import write_fleet


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--output", type=Path, default=HERE / "results" / "fleet_report.md")
    return parser.parse_args(argv)


def table_rows(page: str) -> list[str]:
    """The rows of the page's sortable table, as HTML text."""
    body = page[page.index('<table class="sortable">') :]
    body = body[: body.index("</table>")]
    return re.findall(r"<tr>.*?</tr>", body[body.index("<tbody>") :])


def main(argv: list[str] | None = None) -> None:
    """Write the fleet, its page serially and on Ray; measure and compare."""
    from bayesgrpo.interfaces.html_report import write_fleet_report

    args = parse_args(argv)
    warnings.simplefilter("ignore")
    folder = HERE / "_scratch" / f"fleet_{args.runs}"
    folder.mkdir(parents=True, exist_ok=True)
    counts = write_fleet(folder / "logs", args.runs, args.seed)
    rows, pages = [], {}
    for workers in (None, args.workers):
        name = "serial" if workers is None else f"ray{workers}"
        path = folder / f"report_{name}.html"
        start = time.perf_counter()
        write_fleet_report([folder / "logs"], path, workers=workers)
        seconds = time.perf_counter() - start
        page = path.read_text(encoding="utf-8")
        pages[name] = table_rows(page)
        figures = folder / f"report_{name}_figures"
        rows.append(
            {
                "engine": "serial" if workers is None else f"Ray, {workers} workers",
                "seconds": seconds,
                "page_mib": len(page.encode()) / 2**20,
                "table_rows": len(pages[name]),
                "stop_rows": sum('class="stop">stop<' in row for row in pages[name]),
                "figures_inline": page.count("data:image/png"),
                "figures_in_folder": len(list(figures.iterdir())) if figures.exists() else 0,
            }
        )
        print(rows[-1], flush=True)
    strip = re.compile(r'<a href="[^"]*">(below|file)</a>')  # the figure links name the page's folder
    same = [strip.sub("", r) for r in pages["serial"]] == [
        strip.sub("", r) for r in pages[f"ray{args.workers}"]
    ]
    command, machine = command_line("fleet_report.py", argv), machine_line()
    lines = [
        "# The fleet's page at 1,000 runs",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine}.  ",
        f"Logs: {args.runs} simulated runs written as {counts} (one CSV in fifty damaged).",
        "",
        "`write_fleet_report` (`bayesgrpo report LOGS --fleet`, the default above 50 logs) with its "
        "defaults: every run read, live-updated on the shipped population, decided (plateau rule, eps "
        "1%, p 0.9), forecast and diagnosed; one sortable, filterable table of every run; fan charts "
        "only for the runs to look at (advised to stop or with a high-severity finding): the first 60 "
        "inline, the rest as PNG files in a folder beside the page, linked from their rows. The time "
        "includes reading, the assessment, the figures and writing the page.",
        "",
        markdown_table(pd.DataFrame(rows)),
        "",
        f"Both pages hold the same table rows (figure links aside): {same}.",
        "",
    ]
    args.output.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
