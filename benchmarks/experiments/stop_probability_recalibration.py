"""The plateau rule's probability recalibrated on other sources' checks (calibration issue, point 2).

The calibration issue asks that among decisions the plateau rule makes at P >= 0.9, the share
whose later smoothed gain stayed below eps be at least 0.85; under leave one source out it is 0.72
(eps 1%) and 0.82 (eps 2%) (`benchmarks/results/loso/backtest_stopping.md`, reliability). It
allows a post-hoc recalibration fitted on the population's own leave-one-out. Here: isotonic
regression (``scipy.optimize.isotonic_regression``) of the outcome on the rule's probability,
learnt on the checks of *the other sources* (cross-fitted by source: no check's map is learnt
from its own source), applied to each held-out source's checks.

Input: the reliability rows of both backtests (``backtest_calibration_runs.csv``: every check,
every 5% of a run, of all 60 runs; P(curve gain < eps) and whether the smoothed logged reward
then gained less than eps). Reported per split and eps: the Brier score and the share of checks
at P >= 0.9 that came true, before and after; and what a plateau rule deciding on the
recalibrated probability would do: stop at the first check whose probability reaches p, the
share of steps saved (1 - the stop's progress; a run never stopped saves 0) and the mean
realised gain after the stop (in eps's unit, a share of the bounds the update used), beside the
same rule on the raw probability. The raw rule's savings come within half a point of the
stopping backtest's rows (the same updates at the same checks; the backtest counts steps saved
on the run's logged steps, this on its progress).

Usage::

    python benchmarks/experiments/stop_probability_recalibration.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import isotonic_regression

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(BENCHMARKS))
from _markdown import markdown_table  # noqa: E402

RESULTS = HERE / "results"
SPLITS = {
    "leave one source out": BENCHMARKS / "results" / "loso" / "backtest_calibration_runs.csv",
    "5-fold by run": BENCHMARKS / "results" / "backtest_calibration_runs.csv",
}
THRESHOLDS = (0.8, 0.9, 0.95)


def run_sources() -> dict[str, str]:
    """``run_id -> source`` as the leave-one-source-out split groups them."""
    from bayesgrpo.evaluate.backtest.populations import source_group
    from bayesgrpo.model.datasets import load_bundled

    table = load_bundled(warn=False)
    return {row["run_id"]: source_group(row) for row in table.runs.to_dict("records")}


def isotonic_map(probability: np.ndarray, outcome: np.ndarray):
    """The non-decreasing map from probability to outcome share (pool-adjacent-violators on the
    distinct probabilities, each weighted by its checks), linear between them, flat beyond.
    """
    values, inverse, counts = np.unique(probability, return_inverse=True, return_counts=True)
    shares = np.bincount(inverse, weights=outcome.astype(float)) / counts
    fitted = isotonic_regression(shares, weights=counts.astype(float), increasing=True).x
    return lambda p: np.interp(p, values, fitted)


def recalibrated(frame: pd.DataFrame, sources: dict[str, str]) -> pd.Series:
    """Each check's probability mapped by the isotonic map of the other sources' checks."""
    out = pd.Series(np.nan, index=frame.index)
    source = frame["run_id"].map(sources)
    for held in source.unique():
        inside = (source == held).to_numpy()
        rest = frame[~inside]
        mapping = isotonic_map(rest["probability"].to_numpy(), rest["below"].to_numpy())
        out[inside] = mapping(frame.loc[inside, "probability"].to_numpy())
    return out


def stops(frame: pd.DataFrame, column: str, threshold: float) -> tuple[float, float, float]:
    """A rule stopping at the first check with ``column >= threshold``: mean steps saved, mean
    realised gain after the stop (runs stopped), share of runs stopped.
    """
    saved, gains, stopped = [], [], 0
    for _, run in frame.sort_values("progress").groupby("run_id"):
        hit = run[run[column] >= threshold]
        if hit.empty:
            saved.append(0.0)
            continue
        first = hit.iloc[0]
        saved.append(1.0 - float(first["progress"]))
        gains.append(float(first["realised_gain"]))
        stopped += 1
    n_runs = frame["run_id"].nunique()
    return float(np.mean(saved)), float(np.mean(gains)) if gains else np.nan, stopped / n_runs


def main() -> None:
    """Recalibrate both splits' checks and write the tables."""
    sources = run_sources()
    reliability, rules = [], []
    for split, path in SPLITS.items():
        checks = pd.read_csv(path)
        for eps, frame in checks.groupby("eps"):
            frame = frame.assign(recalibrated=recalibrated(frame, sources))
            below = frame["below"].to_numpy(dtype=float)
            for column in ("probability", "recalibrated"):
                p = frame[column].to_numpy()
                sure = p >= 0.9
                reliability.append(
                    {
                        "split": split,
                        "eps": eps,
                        "probability": "raw" if column == "probability" else "recalibrated",
                        "brier": float(np.mean((p - below) ** 2)),
                        "checks_at_0.9": int(sure.sum()),
                        "came_true_at_0.9": float(below[sure].mean()) if sure.any() else np.nan,
                        "max_probability": float(p.max()),
                    }
                )
                for threshold in THRESHOLDS:
                    saved, gain, stopped = stops(frame, column, threshold)
                    rules.append(
                        {
                            "split": split,
                            "eps": eps,
                            "p": threshold,
                            "probability": "raw" if column == "probability" else "recalibrated",
                            "steps_saved": saved,
                            "gain_after_stop": gain,
                            "runs_stopped": stopped,
                        }
                    )
    lines = [
        "# The plateau rule's probability recalibrated on other sources' checks",
        "",
        "Command: `python benchmarks/experiments/stop_probability_recalibration.py` (reads the "
        "reliability rows of `python benchmarks/backtest.py --split loso` and of the 5-fold backtest)",
        "",
        "Each check's P(curve gain < eps) mapped by an isotonic regression of the outcome (the smoothed "
        "logged reward then gained less than eps) on the probability, learnt on the checks of the other "
        "sources. came_true_at_0.9: the share of checks at P >= 0.9 that came true (target >= 0.85).",
        "",
        markdown_table(pd.DataFrame(reliability)),
        "",
        "## A plateau rule deciding on each probability",
        "",
        "Stops at the first check (every 5% of a run) whose probability reaches p. steps_saved: mean over "
        "the 60 runs of 1 - the stop's progress (0 for a run never stopped); gain_after_stop: mean over the "
        "stopped runs of the realised smoothed gain from the stop to the run's end, in eps's unit (a share "
        "of the bounds the update used); runs_stopped: the share of runs stopped.",
        "",
        markdown_table(pd.DataFrame(rules)),
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "stop_probability_recalibration.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
