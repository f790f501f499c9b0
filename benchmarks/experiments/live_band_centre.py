"""Where the live band loses to persistence: its width, coverage and CRPS beside persistence's.

Reads the committed rows of the leave-one-source-out live backtest
(``benchmarks/results/live_backtest_forecast_runs.csv``, ``python benchmarks/live_backtest.py``;
nothing is refitted or forecast again) and writes, per cut and kind of run (the 24 verl runs,
whose stated range the live backtest withholds, and the 36 runs that state none), the mean and
median of each forecast's 50% and 90% coverage, the median widths of its 50% and 90% bands
(units of the run's logged range) and its mean and median CRPS, for the live update and
persistence side by side.

Usage::

    python benchmarks/experiments/live_band_centre.py   # writes results/live_band_centre.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from _markdown import command_line, markdown_table, write_result  # noqa: E402

ROWS = HERE.parent / "results" / "live_backtest_forecast_runs.csv"
RESULTS = HERE / "results"
METHODS = ("bayesgrpo", "persistence")


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per cut, kind of run and method: coverage, band widths and CRPS."""
    rows = rows[rows["method"].isin(METHODS)].assign(
        runs=lambda frame: (
            frame["run_id"]
            .str.startswith("verl")
            .map({True: "verl (range withheld)", False: "no stated range"})
        )
    )
    grouped = rows.groupby(["cut", "runs", "method"], sort=True)
    table = pd.DataFrame(
        {
            "n": grouped.size(),
            "cover50_mean": grouped["cover50"].mean(),
            "cover90_mean": grouped["cover90"].mean(),
            "width50_median": grouped["width50"].median(),
            "width90_median": grouped["width90"].median(),
            "crps_mean": grouped["crps"].mean(),
            "crps_median": grouped["crps"].median(),
        }
    )
    return table.reset_index()


def main(argv: list[str] | None = None) -> None:
    """Write ``results/live_band_centre.md`` from the live backtest's committed rows."""
    table = summary(pd.read_csv(ROWS))
    lines = [
        "# The live band beside persistence's, from the live backtest's rows",
        "",
        f"Command: `{command_line('experiments/live_band_centre.py', argv)}` (reads "
        "`results/live_backtest_forecast_runs.csv`; no forecast is made again).",
        "",
        "Coverage: the mean over runs of the share of later points inside the band; widths: the "
        "median over runs, in units of the run's logged range; CRPS: over runs of each run's mean.",
        "",
        markdown_table(table),
        "",
    ]
    write_result(RESULTS / "live_band_centre.md", lines)  # and prints it


if __name__ == "__main__":
    main()
