"""What reading a reward whose every logged value lies in [0, 1] as a score on [0, 1] would do.

Every one of the 24 bundled runs that state a reward range states 0 .. 1 and logs rewards inside
it (verl's rule-based scores); none of the 36 that state none logs a prefix inside [0, 1] at any
cut (notebook rewards that sum format and answer rewards). The live path's worst misses are those
24 runs given no range (``benchmarks/live_backtest.py``). A live update could read "every reward so
far lies in [0, 1]" as "a score on [0, 1]" and state that range itself. This script says what that
would do, without running a single update: on the bundled runs it would turn exactly those 24 runs
into runs on their stated range, whose forecasts and stops under the same leave-one-source-out
populations the forecast and stopping backtests already hold (``results/loso/``); on the simulated
runs of known truth it would turn the runs whose rewards lie in [0, 1] into stated-range runs, whose
stops ``stopping_simulated.py`` already holds (its "stated range" rows).

So each "inferred" row is assembled from rows already measured: the live backtest's (as it was
before the change, commit a2ce8a4: ``results/live_unit_range_before_*.csv``) for runs the rule
would leave alone, the stated-range rows for the runs it would change (the whole run's rewards
in [0, 1]; a prefix-based rule would switch a run only once its prefix is, which on these runs is
from its first check). The forecast backtest seeds its live updates in another order than the live
backtest, so the assembled rows carry a seed's difference (a point or two, ``stop_seed_spread.md``).

The change was adopted (``LiveForecaster(read_unit_score=True)``, the default), and the "measured"
rows are the live backtest and ``stopping_simulated.py`` rerun with it: the current
``benchmarks/results/`` rows, set beside the assembled ones they were predicted by.

Usage::

    python benchmarks/experiments/live_unit_range.py   # -> results/live_unit_range.md (seconds)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(BENCHMARKS))
from _markdown import markdown_table  # noqa: E402
from live_backtest import range_kinds  # noqa: E402
from stopping_simulated import simulate  # noqa: E402

RESULTS = HERE / "results"
BEFORE_FORECASTS = RESULTS / "live_unit_range_before_forecast_runs.csv"
BEFORE_STOPS = RESULTS / "live_unit_range_before_stopping_runs.csv"
BEFORE_SIMULATED_STOPS = RESULTS / "live_unit_range_before_simulated_stopping_runs.csv"
LIVE_FORECASTS = BENCHMARKS / "results" / "live_backtest_forecast_runs.csv"
LIVE_STOPS = BENCHMARKS / "results" / "live_backtest_stopping_runs.csv"
STATED_FORECASTS = BENCHMARKS / "results" / "loso" / "backtest_forecast_runs.csv"
STATED_STOPS = BENCHMARKS / "results" / "loso" / "backtest_stopping_runs.csv"
SIMULATED_STOPS = BENCHMARKS / "results" / "stopping_simulated_runs.csv"
RULES = (
    "guarded budget 0.5",
    "guarded budget 0.6",
    "plateau eps=0.02 p=0.9",
    "plateau eps=0.02 p=0.95",
    "fixed 0.5",
    "fixed 0.6",
)


def unit_interval_runs(points: pd.DataFrame) -> set[str]:
    """The runs whose every logged reward lies in [0, 1]."""
    spans = points.groupby("run_id")["reward"].agg(["min", "max"])
    return set(spans.index[(spans["min"] >= 0.0) & (spans["max"] <= 1.0)].astype(str))


def forecast_rows(inferred: set[str]) -> pd.DataFrame:
    """Coverage and CRPS of the live path before, assembled with the range inferred, and measured."""
    before = pd.read_csv(BEFORE_FORECASTS)
    stated = pd.read_csv(STATED_FORECASTS)
    assembled = pd.concat(
        [before[~before["run_id"].isin(inferred)], stated[stated["run_id"].isin(inferred)]], ignore_index=True
    )
    measured = pd.read_csv(LIVE_FORECASTS)
    rows = []
    for label, frame in (
        ("live path before", before),
        ("range inferred (assembled)", assembled),
        ("read as a score (measured)", measured),
    ):
        for cut, at in frame.groupby("cut"):
            bayes, persistence = at[at["method"] == "bayesgrpo"], at[at["method"] == "persistence"]
            rows.append(
                {
                    "forecast": label,
                    "cut": cut,
                    "runs": len(bayes),
                    "cover50": bayes["cover50"].mean(),
                    "cover90": bayes["cover90"].mean(),
                    "crps_median": bayes["crps"].median(),
                    "vs_persistence": bayes["crps"].median() / persistence["crps"].median(),
                }
            )
    return pd.DataFrame(rows)


def stop_rows(
    label: str, before: pd.DataFrame, assembled: pd.DataFrame, measured: pd.DataFrame, end_column: str
) -> pd.DataFrame:
    """Each rule's mean steps saved and reward given up against the end: before, assembled, measured."""
    rows = []
    for variant, frame in (
        ("before", before),
        ("range inferred (assembled)", assembled),
        ("read as a score (measured)", measured),
    ):
        means = frame[frame["rule"].isin(RULES)].groupby("rule")[["steps_saved", end_column]].mean()
        for rule in RULES:
            rows.append(
                {
                    "set": label,
                    "variant": variant,
                    "rule": rule,
                    "steps_saved": means.loc[rule, "steps_saved"],
                    "vs_end": means.loc[rule, end_column],
                }
            )
    return pd.DataFrame(rows)


def main() -> None:
    """Assemble the rows, write ``results/live_unit_range.md``."""
    from bayesgrpo.model.datasets import load_bundled

    table = load_bundled(warn=False)
    inferred = unit_interval_runs(table.points)
    stated_ids = {run_id for run_id, kind in range_kinds(table).items() if kind == "stated"}
    forecasts = forecast_rows(inferred)
    before_stops, stated_stops = pd.read_csv(BEFORE_STOPS), pd.read_csv(STATED_STOPS)
    bundled = stop_rows(
        "bundled, leave one source out (60)",
        before_stops,
        pd.concat(
            [
                before_stops[~before_stops["run_id"].isin(inferred)],
                stated_stops[stated_stops["run_id"].isin(inferred)],
            ]
        ),
        pd.read_csv(LIVE_STOPS),
        "reward_vs_end",
    )
    points, _, _ = simulate(16, 0)
    simulated_inferred = unit_interval_runs(points)
    before_simulated, simulated = pd.read_csv(BEFORE_SIMULATED_STOPS), pd.read_csv(SIMULATED_STOPS)
    without, with_range = (
        before_simulated[before_simulated["range"] != "stated range"],
        before_simulated[before_simulated["range"] == "stated range"],
    )
    simulated_rows = stop_rows(
        f"simulated, no stated range ({without['run_id'].nunique()})",
        without,
        pd.concat(
            [
                without[~without["run_id"].isin(simulated_inferred)],
                with_range[with_range["run_id"].isin(simulated_inferred)],
            ]
        ),
        simulated[simulated["range"] != "stated range"],
        "vs_end",
    )
    lines = [
        "# Reading a reward logged inside [0, 1] as a score on [0, 1]",
        "",
        "Command: `python benchmarks/experiments/live_unit_range.py` (seconds; it assembles rows the live "
        "backtest, the leave-one-source-out backtests and `stopping_simulated.py` wrote)",
        "",
        f"Bundled runs whose every logged reward lies in [0, 1]: {len(inferred)}, of which "
        f"{len(inferred & stated_ids)} state a range (all 0 .. 1) and {len(inferred - stated_ids)} do not. "
        f"Simulated runs of `stopping_simulated.py` (seed 0) whose rewards lie in [0, 1]: "
        f"{len(simulated_inferred)} of {points['run_id'].nunique()}. The script's docstring says how each "
        "'range inferred' row is assembled.",
        "",
        "## The live path's forecasts (bundled runs given no range)",
        "",
        markdown_table(forecasts),
        "",
        "## Stop rules (steps saved, reward given up against the run's end)",
        "",
        markdown_table(pd.concat([bundled, simulated_rows], ignore_index=True)),
        "",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "live_unit_range.md").write_text("\n".join(lines))
    print("\n".join(lines))
    assert np.isfinite(forecasts["cover90"]).all()


if __name__ == "__main__":
    main()
