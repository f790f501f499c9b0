"""Whether a run rises after a share of its planned steps or after a number of steps.

The model reads every run on normalised progress (step / planned steps, DESIGN.md after arXiv
2507.18014), so its rise times pool as shares of a run. If instead a GRPO run learns its format
and its easy problems after a roughly fixed number of optimizer steps whatever the run's length,
a long run would rise early in its progress and a short one late, and the pooled prior on the
rise time would be too wide for both; a log-horizon covariate on the rise time (slope -1 in
log-log) would then sharpen every forecast. The late risers the backtests miss are mostly long
runs (250-1,000 planned steps), which is what prompted the question.

Model-free, on the 60 bundled runs: each run's logged reward smoothed (centred mean over 10% of
its points), its gain the mean of its last 5% of points minus its first 5%, and the first step
at which it has made 50% and 80% of that gain, as a step and as a share of the planned steps
(``total_steps``; the last logged step where the metadata states none). Runs whose gain is under
30% of their smoothed range are left out (no rise to time). Reported per kind of range: the
spread (sd) of the log rise time in steps and in progress (the smaller is the scale on which the
runs agree), and the slope of log progress on log planned steps with a 90% interval from a
bootstrap over sources (runs of one source move together; sources as the leave-one-source-out
split groups them: a notebook, a verl recipe, a repository).

Usage::

    python benchmarks/experiments/rise_time_scale.py   # writes results/rise_time_scale.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(BENCHMARKS))
from _markdown import machine_line, markdown_table, write_result  # noqa: E402
from live_backtest import range_kinds  # noqa: E402

RESULTS = HERE / "results"
#: Runs whose smoothed gain is below this share of their smoothed range have no rise to time.
MIN_GAIN_SHARE = 0.3
N_BOOTSTRAP = 2000
#: The share of a run's points its reward is smoothed over before its rise is timed.
SMOOTHING_FRACTION = 0.1


def rise_times(table) -> pd.DataFrame:
    """Per run: planned steps and the step / share of them at which 50% and 80% of the gain is made."""
    from bayesgrpo.evaluate.backtest.populations import source_groups
    from bayesgrpo.evaluate.backtest.smoothing import smoothed_reward

    kinds = range_kinds(table)
    source_of = {run: group for group, members in source_groups(table).items() for run in members}
    runs = table.runs.set_index("run_id")
    rows = []
    for run_id, points in table.points.groupby("run_id"):
        points = points.dropna(subset=["reward"]).sort_values("step")
        steps = points["step"].to_numpy(dtype=float)
        smooth = smoothed_reward(points["reward"].to_numpy(dtype=float), SMOOTHING_FRACTION)
        edge = max(1, len(smooth) // 20)
        gain = smooth[-edge:].mean() - smooth[:edge].mean()
        spread = smooth.max() - smooth.min()
        planned = runs.loc[run_id, "total_steps"]
        planned = float(planned) if pd.notna(planned) else steps[-1]
        row = {
            "run_id": run_id,
            "source": source_of[str(run_id)],
            "range": kinds[str(run_id)],
            "planned_steps": planned,
            "gain_share": gain / spread if spread > 0 else 0.0,
        }
        made = (smooth - smooth[:edge].mean()) / gain if gain != 0 else np.zeros_like(smooth)
        for level in (50, 80):
            step = steps[int(np.argmax(made >= level / 100))]
            row[f"step_{level}"] = step
            row[f"progress_{level}"] = step / planned
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame[(frame["gain_share"] >= MIN_GAIN_SHARE) & (frame["step_50"] > 0)]


def slope(frame: pd.DataFrame, level: int) -> float:
    """Least-squares slope of log progress-to-level on log planned steps."""
    return float(np.polyfit(np.log(frame["planned_steps"]), np.log(frame[f"progress_{level}"]), 1)[0])


def summary(frame: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """Spreads and slopes per kind of range and level, with a bootstrap over sources."""
    rows = []
    for kind in ("unstated", "stated", "all"):
        part = frame if kind == "all" else frame[frame["range"] == kind]
        sources = part["source"].unique()
        by_source = {s: part[part["source"] == s] for s in sources}
        for level in (50, 80):
            draws = []
            for _ in range(N_BOOTSTRAP):  # a loop over bootstrap resamples of a few sources
                sample = pd.concat([by_source[s] for s in rng.choice(sources, len(sources))])
                if sample["planned_steps"].nunique() > 1:
                    draws.append(slope(sample, level))
            low, high = np.quantile(draws, [0.05, 0.95])
            rows.append(
                {
                    "range": kind,
                    "gain_made": f"{level}%",
                    "runs": len(part),
                    "sources": len(sources),
                    "sd_log_steps": float(np.log(part[f"step_{level}"]).std()),
                    "sd_log_progress": float(np.log(part[f"progress_{level}"]).std()),
                    "slope_log_progress_on_log_planned": slope(part, level),
                    "slope_90_low": low,
                    "slope_90_high": high,
                }
            )
    return pd.DataFrame(rows)


def main() -> None:
    """Time every run's rise, summarise, write the result file."""
    from bayesgrpo.model.datasets import load_bundled

    frame = rise_times(load_bundled(warn=False))
    table = summary(frame, np.random.default_rng(0))
    listed = frame.sort_values(["range", "planned_steps"])[
        ["run_id", "range", "planned_steps", "step_50", "progress_50", "progress_80"]
    ]
    lines = [
        "# A run's rise: a share of its planned steps, or a number of steps?",
        "",
        "Command: `python benchmarks/experiments/rise_time_scale.py`  ",
        f"Machine: {machine_line()}",
        "",
        "Per run (60 bundled runs, those with a smoothed gain of at least 30% of their smoothed range): "
        "the first step at which the smoothed reward has made 50% / 80% of its gain (last 5% of points "
        "minus first 5%), as a step and as a share of the planned steps. sd_log_*: the spread of the "
        "log rise time over runs on each scale (the smaller, the scale on which runs agree). slope: "
        "log progress on log planned steps (-1: a rise after a fixed number of steps whatever the "
        "length; 0: after a fixed share of the run), with a 90% interval from a bootstrap over "
        "sources (as the leave-one-source-out split groups them).",
        "",
        markdown_table(table, floatfmt=".2f"),
        "",
        "## The runs",
        "",
        markdown_table(listed, floatfmt=".3f"),
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    write_result(RESULTS / "rise_time_scale.md", lines)


if __name__ == "__main__":
    main()
