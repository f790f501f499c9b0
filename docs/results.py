"""Write the documentation's Results page from ``benchmarks/results/*.md``.

Each result file is written by the benchmark script it names. The page lists every file with its
first heading, the command that produced it and its first table (the file's main one), without the
dates and machines the files record. ``docs/conf.py`` runs :func:`write_page` at every build, so the
page always shows the files as committed; nothing here measures anything.

Run it alone to print the page::

    python docs/results.py                    # the page's MyST markdown on stdout
    python docs/results.py --out /tmp/r.md    # or into a file
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

#: The result files listed: the current ones (the folders of older models' results are left out).
PATTERNS = ("*.md", "loso/*.md")
#: Listed first: the headline measurement (runs of sources nothing was fitted or chosen on), the
#: leave-one-source-out backtests and the speeds; the rest follow in file-name order.
FIRST = (
    "corpus_live.md",
    "loso/backtest_forecast.md",
    "loso/backtest_stopping.md",
    "live_update.md",
    "sampler_speed.md",
)
#: A calendar date as the result files write them, with the separators around it.
DATE = re.compile(r"[,;]?\s*\(?\b20\d\d-\d\d-\d\d\b\)?")
#: The command a result file names: the first inline code span that runs a benchmark script.
COMMAND = re.compile(r"`(python benchmarks/[^`]+)`")

INTRO = """\
# Results

Every number bayesgrpo states about itself is measured by a script in `benchmarks/` and written to a
file in `benchmarks/results/`. This page lists each file with the command that writes it and its main
table; the file holds the rest (its settings, every table, how to read them). Run a command from
the repository root to measure again on your machine.

Two kinds of scores recur. *CRPS* scores a forecast's whole distribution against the logged points
that followed (lower is better), often divided by the CRPS of carrying the run's last value forward
(*persistence*): below 1 the forecast is better than that. A band's *coverage* is the share of
later points it holds (a 90% band should hold 90%). Stop rules are scored by the share of a run's
steps they save and the reward they give up against the run's end, as a share of its range.
"""


@dataclass(frozen=True)
class ResultFile:
    """What the page shows of one result file."""

    path: Path
    title: str
    command: str | None
    table: list[str]


def strip_dates(text: str) -> str:
    """``text`` without the calendar dates in it (and the comma or brackets around one)."""
    return re.sub(r"\(\s*\)", "", DATE.sub("", text)).rstrip()


def first_table(lines: list[str]) -> list[str]:
    """The first markdown table of a file's lines (header, rule and rows), or none."""
    table: list[str] = []
    for line in lines:
        if line.startswith("|"):
            table.append(line.rstrip())
        elif table:
            break
    return table if len(table) >= 2 else []


def read_result(path: Path) -> ResultFile:
    """Heading, command and first table of one result file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    title = next((line[2:].strip() for line in lines if line.startswith("# ")), path.stem)
    command = COMMAND.search("\n".join(lines))
    return ResultFile(
        path=path,
        title=strip_dates(title),
        command=strip_dates(command.group(1)) if command else None,
        table=[strip_dates(row) for row in first_table(lines)],
    )


def page(results_dir: Path = RESULTS) -> str:
    """The Results page, MyST markdown: one section per result file (:data:`FIRST` first)."""
    paths = [p for pattern in PATTERNS for p in sorted(results_dir.glob(pattern))]
    first = [results_dir / name for name in FIRST if (results_dir / name) in paths]
    files = [read_result(p) for p in first + [p for p in paths if p not in first]]
    titles = [f.title for f in files]
    out = [INTRO]
    for result in files:
        name = (
            result.path.relative_to(ROOT).as_posix() if result.path.is_relative_to(ROOT) else result.path.name
        )
        stem = result.path.relative_to(results_dir).with_suffix("").as_posix()
        heading = result.title if titles.count(result.title) == 1 else f"{result.title} ({stem})"
        out.append(f"## {heading}\n")
        command = f"`{result.command}`" if result.command else "(the file names how it was made)"
        out.append(f"Written by {command} to `{name}`.\n")
        if result.table:
            out.append("\n".join(result.table) + "\n")
    return "\n".join(out)


def write_page(path: Path, results_dir: Path = RESULTS) -> bool:
    """Write the page to ``path`` if its text changed (a rebuild then skips it); True if written."""
    text = page(results_dir)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


def main() -> None:
    """Print the page, or write it to ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the page here (default: print it)")
    args = parser.parse_args()
    if args.out:
        write_page(args.out)
    else:
        print(page())


if __name__ == "__main__":
    main()
