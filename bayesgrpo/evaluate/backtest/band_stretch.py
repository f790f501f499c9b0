"""Learning the live predictive band's stretch factors from held-out forecasts, and cross-fitting them.

The factors of :class:`bayesgrpo.questions.band_stretch.BandStretch` are learnt on forecasts of
runs their population did not see (the live path's leave-one-source-out backtest, no stated
range given): at each knot of progress and for the rising and the other updates apart, each side
of the 90% band is stretched about its median by the factor of :data:`FACTOR_GRID` that puts
:data:`TAIL` of the later points beyond it (mean over runs). A backtest that scores the stretched
band must use factors learnt without the held-out run's source (:func:`cross_fitted_band_stretch`),
or the band would be scored on the points that set it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from bayesgrpo.evaluate.backtest.cuts import BacktestError
from bayesgrpo.questions.band_stretch import BandStretch

__all__ = [
    "FACTOR_GRID",
    "INNER_COLUMNS",
    "INNER_TAIL",
    "MIN_RUNS",
    "TAIL",
    "coverage_matched_factor",
    "cross_fitted_band_stretch",
    "learn_band_stretch",
    "side_share",
]

#: Stretch factors searched, each side (0.5 to 12).
FACTOR_GRID = np.round(np.concatenate([np.arange(0.5, 3.0, 0.05), np.arange(3.0, 12.01, 0.25)]), 3)
#: Share of later points each side of the 90% band should leave beyond it.
TAIL = 0.05
#: Fewest runs of a group (rising or not, at one knot) to learn its factors from; fewer keep 1.
MIN_RUNS = 5
#: The columns a frame of held-out forecasts needs: one row a later point.
FORECAST_COLUMNS = ("run_id", "cut", "rising", "y", "q05", "q50", "q95")


def _checked(frame: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in FORECAST_COLUMNS if c not in frame.columns]
    if missing:
        raise BacktestError(
            f"held-out forecasts lack columns {missing}; need {list(FORECAST_COLUMNS)}: one row a later "
            "point, its reward y and the forecast's 5/50/95% quantiles"
        )
    return frame


#: The columns of the 50% band's edges a frame needs to learn factors by quantile level.
INNER_COLUMNS = ("q25", "q75")
#: Share of later points each side of the 50% band should leave beyond it.
INNER_TAIL = 0.25


def side_share(frame: pd.DataFrame, factor: float, side: str, inner: bool = False) -> float:
    """Mean over runs of the share of later points beyond one side of the stretched 90% band.

    Parameters
    ----------
    frame : DataFrame
        Held-out forecasts (:data:`FORECAST_COLUMNS`).
    factor : float
        The side's stretch about the median.
    side : {"below", "above"}
    inner : bool
        The 50% band's side instead (columns ``q25``, ``q75``).
    """
    low, high = INNER_COLUMNS if inner else ("q05", "q95")
    y, lower, q50, upper = (frame[c].to_numpy(dtype=float) for c in ("y", low, "q50", high))
    if side == "above":
        beyond = y > q50 + factor * (upper - q50)
    elif side == "below":
        beyond = y < q50 + factor * (lower - q50)
    else:
        raise BacktestError(f"side must be 'below' or 'above'; got {side!r}")
    return float(pd.Series(beyond).groupby(frame["run_id"].to_numpy()).mean().mean())


def coverage_matched_factor(frame: pd.DataFrame, side: str, tail: float = TAIL, inner: bool = False) -> float:
    """The factor of :data:`FACTOR_GRID` whose stretched side (of the 90% band, or with ``inner``
    of the 50% band) leaves ``tail`` of the points beyond it.
    """
    shares = np.array([side_share(frame, float(factor), side, inner) for factor in FACTOR_GRID])
    return float(FACTOR_GRID[int(np.argmin(np.abs(shares - tail)))])


def learn_band_stretch(
    frame: pd.DataFrame,
    window: tuple[float, float],
    *,
    min_runs: int = MIN_RUNS,
    tail: float = TAIL,
    learnt_on: str = "",
    by_level: bool = False,
    outer_as_drawn: bool = False,
    **rising: Any,
) -> BandStretch:
    """The band's factors at each cut of ``frame`` (its knots), for rising and other updates apart.

    Parameters
    ----------
    frame : DataFrame
        Held-out forecasts, one row a later point (:data:`FORECAST_COLUMNS`): ``cut`` the
        progress the update was made at, ``rising`` whether its run still rose then
        (:func:`bayesgrpo.questions.band_stretch.rising_runs`).
    window : (float, float)
        Progress inside which the factors are used.
    min_runs : int
        A group with fewer runs at a knot keeps factors 1 (too little to learn from).
    tail : float
        Share of later points to leave beyond each side of the 90% band.
    learnt_on : str
        Provenance, kept in the result.
    by_level : bool
        Learn the 50% band's edges apart too (:attr:`BandStretch.by_level`): each side's 25/75%
        quantile matched so that :data:`INNER_TAIL` of the later points lie beyond it (the frame
        then needs :data:`INNER_COLUMNS`).
    outer_as_drawn : bool
        With ``by_level``: keep the 90% band's edges as drawn (their factors 1) and learn only the
        50% band's (:attr:`BandStretch.early`, early in a run, where a stretch of the 90% band
        costs every run CRPS).
    **rising
        ``rising_eps`` and ``rising_z`` of the flag the frame's ``rising`` column was made with.

    Returns
    -------
    BandStretch
    """
    frame = _checked(frame)
    if outer_as_drawn and not by_level:
        raise BacktestError("outer_as_drawn learns the 50% band's edges alone: it needs by_level=True")
    missing = [c for c in INNER_COLUMNS if c not in frame.columns]
    if by_level and missing:
        raise BacktestError(
            f"held-out forecasts lack columns {missing}: the 50% band's edges, to learn by level"
        )
    knots = sorted(float(c) for c in frame["cut"].unique())
    if not knots:
        raise BacktestError("no held-out forecasts to learn the band's stretch from")
    names = [f"{group}_{side}" for group in ("rising", "other") for side in ("below", "above")]
    factors: dict[str, list[float]] = {k: [] for k in names + [f"{k}_inner" for k in names]}
    for knot in knots:
        at = frame[frame["cut"] == knot]
        for group, flag in (("rising", True), ("other", False)):
            part = at[at["rising"].to_numpy(dtype=bool) == flag]
            enough = part["run_id"].nunique() >= min_runs
            for side in ("below", "above"):
                factors[f"{group}_{side}"].append(
                    coverage_matched_factor(part, side, tail) if enough and not outer_as_drawn else 1.0
                )
                factors[f"{group}_{side}_inner"].append(
                    coverage_matched_factor(part, side, INNER_TAIL, inner=True)
                    if enough and by_level
                    else 1.0
                )

    def learnt(name: str) -> tuple[float, ...]:
        return tuple(factors[name])

    def inner(name: str) -> tuple[float, ...] | None:
        return tuple(factors[f"{name}_inner"]) if by_level else None

    return BandStretch(
        knots=tuple(knots),
        rising_below=learnt("rising_below"),
        rising_above=learnt("rising_above"),
        other_below=learnt("other_below"),
        other_above=learnt("other_above"),
        window=window,
        learnt_on=learnt_on,
        rising_below_inner=inner("rising_below"),
        rising_above_inner=inner("rising_above"),
        other_below_inner=inner("other_below"),
        other_above_inner=inner("other_above"),
        **rising,
    )


def cross_fitted_band_stretch(
    frame: pd.DataFrame, sources: Mapping[str, str], window: tuple[float, float], **options: Any
) -> dict[str, BandStretch]:
    """Per source, the factors learnt without any run of it: what a backtest scores that source with.

    Parameters
    ----------
    frame : DataFrame
        As :func:`learn_band_stretch`.
    sources : mapping run_id -> source
        Every run's source (:func:`bayesgrpo.evaluate.backtest.source_group`).
    window : (float, float)
    **options
        Of :func:`learn_band_stretch`.

    Returns
    -------
    dict
        source -> :class:`BandStretch` learnt on the other sources' runs.
    """
    frame = _checked(frame)
    source_of = frame["run_id"].astype(str).map(dict(sources))
    if source_of.isna().any():
        unknown = sorted(set(frame.loc[source_of.isna(), "run_id"].astype(str)))
        raise BacktestError(f"no source given for runs {unknown[:5]} ({len(unknown)} in all)")
    options.setdefault("learnt_on", "")
    note = options.pop("learnt_on")
    return {
        source: learn_band_stretch(
            frame[(source_of != source).to_numpy()],
            window,
            learnt_on=f"{note} without source {source}",
            **options,
        )
        for source in sorted(set(sources.values()))
    }
