"""Robust trend and level statistics of a noisy series: Mann-Kendall, Theil-Sen, edge levels.

Every detector reads its series through these: :func:`trend` (Kendall's tau of value against step
and the Theil-Sen slope), :func:`start_level` / :func:`end_level` (medians of the first or last
:data:`EDGE_FRACTION`), :func:`smoothed` (a rolling median) and :func:`noise_level`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from bayesgrpo.errors import BayesGRPOError

# --- shared -----------------------------------------------------------------------------------
#: One-sided significance level of the Mann-Kendall trend tests.
TREND_ALPHA = 0.05
#: Share of a series whose median is its start or end level.
EDGE_FRACTION = 0.1
#: Fewest points of a start or end level.
EDGE_MIN_POINTS = 3
#: Fewest points a detector needs in a series; shorter series raise nothing.
MIN_POINTS = 8
#: The rolling median that smooths a reward before peaks are read spans ``n // SMOOTH_DIVISOR``
#: points (at least 3), so one lucky batch is no peak.
SMOOTH_DIVISOR = 10

# --------------------------------------------------------------------------------------------
# Robust trend and level statistics
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trend:
    """Robust trend of a series: Theil-Sen slope and Mann-Kendall one-sided p-values.

    Attributes
    ----------
    slope, slope_low, slope_high : float
        Theil-Sen slope per step with its 90% interval.
    tau : float
        Kendall's tau of value against step (0 for a constant series).
    p_increase, p_decrease : float
        One-sided p-values of "rising" and "falling" (1 for a constant series).
    change : float
        ``slope * (last step - first step)``: the change the slope makes over the series.
    n : int
    """

    slope: float
    slope_low: float
    slope_high: float
    tau: float
    p_increase: float
    p_decrease: float
    change: float
    n: int

    def rising(self, alpha: float = TREND_ALPHA) -> bool:
        """Whether the series rises significantly (one-sided Mann-Kendall at ``alpha``)."""
        return self.tau > 0 and self.p_increase < alpha

    def falling(self, alpha: float = TREND_ALPHA) -> bool:
        """Whether the series falls significantly (one-sided Mann-Kendall at ``alpha``)."""
        return self.tau < 0 and self.p_decrease < alpha


def clean_series(steps: Any, values: Any) -> tuple[np.ndarray, np.ndarray]:
    """Finite (step, value) pairs, sorted by step."""
    x = np.asarray(steps, dtype=float)
    y = np.asarray(values, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise BayesGRPOError(
            f"steps and values must be 1-d arrays of one length; got shapes {x.shape} and {y.shape}."
        )
    keep = np.isfinite(x) & np.isfinite(y)
    order = np.argsort(x[keep], kind="stable")
    return x[keep][order], y[keep][order]


def trend(steps: Any, values: Any) -> Trend:
    """Theil-Sen slope and Mann-Kendall test of ``values`` against ``steps``.

    Parameters
    ----------
    steps, values : array_like, shape (n,)
        Non-finite pairs are dropped.

    Returns
    -------
    Trend
    """
    x, y = clean_series(steps, values)
    n = len(x)
    if n < 3 or np.ptp(y) == 0 or np.ptp(x) == 0:
        return Trend(0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, n)
    slope, _, low, high = stats.theilslopes(y, x, alpha=0.90)
    tau, p_up = stats.kendalltau(x, y, alternative="greater")
    _, p_down = stats.kendalltau(x, y, alternative="less")
    return Trend(
        slope=float(slope),
        slope_low=float(low),
        slope_high=float(high),
        tau=float(tau),
        p_increase=float(p_up),
        p_decrease=float(p_down),
        change=float(slope * (x[-1] - x[0])),
        n=n,
    )


def edge_count(n: int) -> int:
    """Points in a start or end level: :data:`EDGE_FRACTION` of ``n``, at least :data:`EDGE_MIN_POINTS`."""
    return min(n, max(EDGE_MIN_POINTS, math.ceil(EDGE_FRACTION * n)))


def start_level(y: np.ndarray) -> float:
    """The series' start level: the median of its first :func:`edge_count` points."""
    return float(np.median(y[: edge_count(len(y))]))


def end_level(y: np.ndarray) -> float:
    """The series' end level: the median of its last :func:`edge_count` points."""
    return float(np.median(y[-edge_count(len(y)) :]))


def smoothed(y: np.ndarray) -> np.ndarray:
    """A rolling median over ``len(y) // SMOOTH_DIVISOR`` points (at least 3)."""
    window = max(3, len(y) // SMOOTH_DIVISOR)
    return pd.Series(y).rolling(window, center=True, min_periods=1).median().to_numpy()


def noise_level(y: np.ndarray) -> float:
    """Robust scale of point-to-point noise: MAD of first differences / sqrt(2)."""
    if len(y) < 3:
        return 0.0
    d = np.diff(y)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2.0))


def last_half(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The second half of a series, by step."""
    start = len(x) // 2
    return x[start:], y[start:]


def trend_evidence(prefix: str, tr: Trend) -> dict[str, float]:
    """A trend's statistics as evidence entries named with ``prefix``."""
    return {
        f"{prefix}_slope": tr.slope,
        f"{prefix}_change": tr.change,
        f"{prefix}_tau": tr.tau,
        f"{prefix}_p_increase": tr.p_increase,
        f"{prefix}_p_decrease": tr.p_decrease,
    }
