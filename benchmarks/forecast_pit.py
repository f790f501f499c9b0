"""PIT histograms of the forecast backtest, per cut and kind of reward range, under both splits.

The calibration issue asks for a PIT histogram per cut, drawn and looked at, under leave one source
out. ``backtest.py`` writes each forecast's PIT shares into its rows
(``results/loso/backtest_forecast_runs.csv`` under leave one source out,
``results/backtest_forecast_runs.csv`` 5-fold by run); this script draws them (bayesgrpo, persistence
and the ScaleRL sigmoid, the best baseline at the 50% cut), with the runs on a stated range and those
without one apart, and says what they show. Nothing is refitted: it reads the committed rows.

Usage::

    python benchmarks/forecast_pit.py   # seconds; writes results/forecast_pit.md and two figures
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _markdown import command_line, machine_line, markdown_table, write_result
from _pit import pit_section
from live_backtest import range_kinds

RESULTS = HERE / "results"
METHODS = ("bayesgrpo", "persistence", "scalerl_sigmoid")

#: (heading, the backtest's rows, the figure to write)
SPLITS = (
    (
        "Leave one source out (the headline split)",
        RESULTS / "loso" / "backtest_forecast_runs.csv",
        RESULTS / "loso" / "backtest_forecast_pit.png",
    ),
    (
        "5-fold by run",
        RESULTS / "backtest_forecast_runs.csv",
        RESULTS / "backtest_forecast_pit.png",
    ),
)


def tail_misses(frame: pd.DataFrame, kinds: dict[str, str]) -> pd.DataFrame:
    """Per cut and kind of range: bayesgrpo's 90% coverage (mean over runs), and the runs whose band
    held under half of their later points, with the share above the band's top tenth.
    """
    rows = frame[frame["method"] == "bayesgrpo"].assign(range=frame["run_id"].map(kinds))
    out = []
    for (cut, kind), part in rows.groupby(["cut", "range"]):
        missed = part[part["cover90"] < 0.5]
        out.append(
            {
                "cut": cut,
                "range": kind,
                "runs": len(part),
                "cover90_mean": part["cover90"].mean(),
                "cover90_median": part["cover90"].median(),
                "runs_under_half": len(missed),
                "their_highest_tenth": missed["pit9"].mean() if len(missed) else float("nan"),
                "cover90_without_them": part.loc[part["cover90"] >= 0.5, "cover90"].mean(),
            }
        )
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    """Draw both splits' PIT histograms and write ``results/forecast_pit.md``."""
    from bayesgrpo.model.datasets import load_bundled

    start = time.perf_counter()
    kinds = range_kinds(load_bundled(warn=False))
    sections = []
    for heading, rows_path, figure in SPLITS:
        frame = pd.read_csv(rows_path)
        sections += pit_section(
            frame, kinds, figure, methods=METHODS, title=f"## {heading}: `{figure.relative_to(RESULTS)}`"
        )
        sections += [
            "Where the 90% band's shortfall is (bayesgrpo; `runs_under_half`: runs whose 90% band held "
            "under half of their later points, `their_highest_tenth`: the share of those runs' later points "
            "in the top tenth of the forecast, `cover90_without_them`: the mean coverage of the other runs):",
            "",
            markdown_table(tail_misses(frame, kinds)),
            "",
        ]
    lines = [
        "# PIT histograms of the forecast backtest",
        "",
        f"Command: `{command_line('forecast_pit.py', argv)}`  ",
        f"Machine: {machine_line()}; {time.perf_counter() - start:.1f} s (the backtest's committed rows "
        "read).",
        "",
        "Rows: `loso/backtest_forecast_runs.csv` and `backtest_forecast_runs.csv` (`benchmarks/backtest.py "
        "--split loso` and `benchmarks/backtest.py`: each run's stated range given, 1,000 predictive draws "
        "per forecast). `stated`: the 24 verl runs whose metadata states a reward range; `unstated`: the "
        "36 notebook runs normalised by their own range.",
        "",
        *sections,
    ]
    write_result(RESULTS / "forecast_pit.md", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
