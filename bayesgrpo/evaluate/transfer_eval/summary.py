"""Transfer scores summarised by split, window and method, and each method's improvement over a reference."""

from __future__ import annotations

import pandas as pd

from bayesgrpo.evaluate.backtest.cuts import (
    BacktestError,
)

# --------------------------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------------------------


def transfer_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Median and mean scores per split, window and method.

    Parameters
    ----------
    frame : DataFrame
        Rows of :func:`transfer_scores` (one or several splits).

    Returns
    -------
    DataFrame
        ``split, window, method, runs, crps_median, crps_mean, final_err_median,
        final_err_mean, cover50_mean, cover90_mean, final_cover90_mean, not_ok`` in the order rows
        first appear (``final_cover90``: the run's final reward, the mean of its last logged points,
        inside the 90% interval of that mean).
    """
    if frame.empty:
        raise BacktestError("no transfer scores to summarise")
    grouped = frame.groupby(["split", "window", "method"], sort=False)
    return grouped.agg(
        runs=("run_id", "nunique"),
        crps_median=("crps", "median"),
        crps_mean=("crps", "mean"),
        final_err_median=("final_abs_error", "median"),
        final_err_mean=("final_abs_error", "mean"),
        cover50_mean=("cover50", "mean"),
        cover90_mean=("cover90", "mean"),
        final_cover90_mean=("final_cover90", "mean"),
        not_ok=("status", lambda s: int((s != "ok").sum())),
    ).reset_index()


def improvement_over(frame: pd.DataFrame, baseline: str = "population_mean") -> pd.DataFrame:
    """How much each method improves on a baseline, on the same runs and window.

    Parameters
    ----------
    frame : DataFrame
        Rows of :func:`transfer_scores`.
    baseline : str
        The method compared against.

    Returns
    -------
    DataFrame
        One row per (split, window, method other than the baseline) where the baseline was
        scored: ``runs`` (scored by both), ``crps_mean_gain`` = ``1 - mean CRPS / baseline's``,
        ``crps_median_gain`` (the same on medians), ``final_err_mean_gain``, ``crps_wins``
        (runs with a lower CRPS, ``"k/n"``). Gains are shares: 0.3 is 30% better.
    """
    rows = []
    for (split, window), part in frame.groupby(["split", "window"], sort=False):
        wide = part.pivot_table(
            index="run_id", columns="method", values=["crps", "final_abs_error"], aggfunc="first"
        )
        if baseline not in wide["crps"].columns:
            continue
        for method in part["method"].unique():
            if method == baseline:
                continue
            both = wide["crps"][[method, baseline]].dropna().index
            if len(both) == 0:
                continue
            crps_m, crps_b = wide["crps"].loc[both, method], wide["crps"].loc[both, baseline]
            final_m, final_b = (
                wide["final_abs_error"].loc[both, method],
                wide["final_abs_error"].loc[both, baseline],
            )
            rows.append(
                {
                    "split": split,
                    "window": window,
                    "method": method,
                    "runs": len(both),
                    "crps_mean_gain": 1.0 - crps_m.mean() / crps_b.mean(),
                    "crps_median_gain": 1.0 - crps_m.median() / crps_b.median(),
                    "final_err_mean_gain": 1.0 - final_m.mean() / final_b.mean(),
                    "crps_wins": f"{int((crps_m < crps_b).sum())}/{len(both)}",
                }
            )
    columns = [
        "split",
        "window",
        "method",
        "runs",
        "crps_mean_gain",
        "crps_median_gain",
        "final_err_mean_gain",
        "crps_wins",
    ]
    return pd.DataFrame(rows, columns=columns)
