"""The live predictive band widened where held-out sources found it too narrow: mid-run, still rising.

A saturating curve fitted through a rise reads the rise's latest points as its shoulder, and its
band sits under where the run goes. On the bundled runs updated by populations fitted without
their source (no stated range given, the live path as users meet it), the updates whose own
points still rose over their latest tenth held 30-39% of their later points in the 90% predictive
band at 40-50% of a run, the others 91-92% (``benchmarks/experiments/live_rise_recalibration.py``).
Their band stretched upward, by factors learnt on other sources, holds 90% with a *lower* CRPS:
the proper score agrees the wider band is the better forecast there. Before about a third of a
run the misses are runs whose rise has not begun (the flag does not carry them, and a stretch
that reached them would cost every run twice the CRPS); after about two thirds the band holds
90% as drawn. So the stretch is used in the middle of a run only (:attr:`BandStretch.window`).

A run whose reward range is stated (and given to the update) has its band drawn on a known
range: it misses otherwise than one whose range is estimated from its points, so its factors are
learnt apart, on such runs given their range (:attr:`BandStretch.stated_range`, over a window of
its own). Its band is also too peaked: one factor a side that brings the 90% band to 90% leaves
its 50% band holding about 35% of later points mid-run, so its factors are learnt by quantile
level (the 50% band's edges apart from the 90% band's: the ``*_inner`` factors,
:func:`bayesgrpo.model.draws.stretch_offsets`), which
``benchmarks/experiments/live_band_two_level.py --stated`` found sharper by the CRPS at every
knot from 45% of a run on. Runs without a stated range keep one factor a side: there the same map
made the notebook runs' 50% band too narrow and their CRPS worse.

Earlier in a run (10-35%) the band of a run whose range is estimated is not stretched: a stretch
that reaches its misses (runs whose rise has not begun) costs every run CRPS. But its 50% band is
too narrow there (40% / 43% of later points at the 10% / 25% cuts), so its 50% band's edges alone
are matched, the 90% band's left as drawn (:attr:`BandStretch.early`; cross-fitted in
``benchmarks/live_band_stretch.py``: 48% / 48% at a median CRPS within 0.002 of the band as drawn;
the experiment: ``benchmarks/experiments/live_band_two_level.py --knots 0.1 0.25 --by-kind``).

:class:`BandStretch` holds the factors by progress and by whether the run still rises; the
shipped one (:func:`shipped_band_stretch`) was learnt by ``benchmarks/live_band_stretch.py`` on
the bundled runs (:func:`bayesgrpo.evaluate.backtest.band_stretch.learn_band_stretch`), and the
backtests use ones learnt without the held-out run's source. :func:`with_band_stretch` attaches
the factors to a run's :class:`~bayesgrpo.model.draws.CurveDraws` (``predictive_stretch``), which
the predictive band then applies (:func:`bayesgrpo.model.draws.stretch_about_median`); the curve
band and the stop rules, which decide on the curve, are unchanged.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.draws import CurveDraws
from bayesgrpo.questions.stopping.momentum import RISE_Z, rising_runs

__all__ = [
    "RISING_EPS",
    "SHIPPED_BAND_STRETCH",
    "BandStretch",
    "rising_runs",
    "shipped_band_stretch",
    "with_band_stretch",
]

#: A run rises when its logged reward's rise over its latest tenth, at the one-sided 95% bound,
#: exceeds this share of its reward range (the default stop rule's guard, ``GuardedBudgetRule``).
RISING_EPS = 0.01
#: The factors a side of the 90% band, at each knot (each may have an ``_inner`` twin).
OUTER_FIELDS = ("rising_below", "rising_above", "other_below", "other_above")
#: The factors learnt on the bundled runs (``python benchmarks/live_band_stretch.py``).
SHIPPED_BAND_STRETCH = Path(__file__).resolve().parents[1] / "_data" / "live_band_stretch.json"


@dataclass(frozen=True)
class BandStretch:
    """Stretch factors of the live predictive band by progress and by whether the run still rises.

    Attributes
    ----------
    knots : tuple of float
        Progress (share of the run's steps logged) at which the factors were learnt, increasing.
    rising_below, rising_above, other_below, other_above : tuple of float
        At each knot, the factor of the band's spread below and above its median, for runs whose
        logged reward still rises (:func:`rising_runs`) and for the others. Between knots the
        factors are interpolated linearly; from the window's edge to the nearest knot they are
        the knot's.
    window : (float, float)
        Progress inside which the band is stretched; outside it the band is as drawn.
    rising_eps, rising_z : float
        What "still rises" means: the rise over the latest tenth of the run, at ``rising_z``
        standard errors below its estimate, exceeds ``rising_eps`` of the run's reward range.
    learnt_on : str
        Where the factors come from (the command and data that learnt them).
    stated_range : BandStretch or None
        The factors of runs whose reward range is stated (given to the update), learnt apart on
        such runs: their band is drawn on a known range and misses otherwise than one whose range
        is estimated from its points. None: their band is as drawn.
    rising_below_inner, rising_above_inner, other_below_inner, other_above_inner : tuple or None
        At each knot, the factors of the 50% band's edges (the 25/75% quantiles' offsets from the
        median), where the band is mapped by quantile level
        (:func:`bayesgrpo.model.draws.stretch_offsets`): the four factors above then apply to the
        90% band's edges. None (all four or none): one factor a side, every offset times it.
    early : BandStretch or None
        The factors used before this window (inside ``early.window``, which must end where this
        window starts or before): mapped by quantile level, learnt with the 90% band's edges kept
        as drawn (their factors 1) and the 50% band's matched. None: the band is as drawn there.
    """

    knots: tuple[float, ...]
    rising_below: tuple[float, ...]
    rising_above: tuple[float, ...]
    other_below: tuple[float, ...]
    other_above: tuple[float, ...]
    window: tuple[float, float]
    rising_eps: float = RISING_EPS
    rising_z: float = RISE_Z
    learnt_on: str = ""
    stated_range: BandStretch | None = None
    rising_below_inner: tuple[float, ...] | None = None
    rising_above_inner: tuple[float, ...] | None = None
    other_below_inner: tuple[float, ...] | None = None
    other_above_inner: tuple[float, ...] | None = None
    early: BandStretch | None = None

    def __post_init__(self) -> None:
        if self.stated_range is not None and not isinstance(self.stated_range, BandStretch):
            raise BayesGRPOError(
                "BandStretch.stated_range must be a BandStretch or None; "
                f"got {type(self.stated_range).__name__}."
            )
        if self.stated_range is not None and self.stated_range.stated_range is not None:
            raise BayesGRPOError("BandStretch.stated_range must not carry a stated_range of its own.")
        knots = tuple(float(k) for k in self.knots)
        if not knots or any(b <= a for a, b in zip(knots, knots[1:], strict=False)):
            raise BayesGRPOError(
                f"BandStretch knots must be one or more increasing progress values; got {knots}."
            )
        object.__setattr__(self, "knots", knots)
        inner = [getattr(self, f"{name}_inner") is not None for name in OUTER_FIELDS]
        if any(inner) and not all(inner):
            raise BayesGRPOError(
                "BandStretch's inner factors (rising_below_inner, rising_above_inner, other_below_inner, "
                "other_above_inner) are given all four or none."
            )
        for name in OUTER_FIELDS + (tuple(f"{name}_inner" for name in OUTER_FIELDS) if all(inner) else ()):
            values = tuple(float(v) for v in getattr(self, name))
            if len(values) != len(knots) or not all(np.isfinite(v) and v > 0 for v in values):
                raise BayesGRPOError(
                    f"BandStretch.{name} must hold one finite factor > 0 per knot ({len(knots)}); "
                    f"got {values}."
                )
            object.__setattr__(self, name, values)
        low, high = (float(v) for v in self.window)
        if not 0.0 <= low < high <= 1.0:
            raise BayesGRPOError(f"BandStretch.window must be 0 <= start < end <= 1; got {self.window}.")
        object.__setattr__(self, "window", (low, high))
        early = self.early
        if early is not None:
            if not isinstance(early, BandStretch) or not early.by_level:
                raise BayesGRPOError("BandStretch.early must be a BandStretch mapped by quantile level.")
            if early.early is not None or early.stated_range is not None:
                raise BayesGRPOError("BandStretch.early must carry no early or stated_range of its own.")
            if early.window[1] > low:
                raise BayesGRPOError(
                    f"BandStretch.early's window {early.window} must end where the window {self.window} "
                    "starts or before."
                )

    def _early_at(self, progress: float) -> BandStretch | None:
        """:attr:`early` where ``progress`` lies inside its window (its end excluded), else None."""
        early = self.early
        if early is None or not np.isfinite(progress):
            return None
        return early if early.window[0] <= progress < early.window[1] else None

    def factors(self, progress: float, rising: bool) -> tuple[float, float]:
        """The (below, above) factors of a run at ``progress`` (1, 1 outside the windows)."""
        early = self._early_at(progress)
        if early is not None:
            return early.factors(progress, rising)
        low, high = self.window
        if not (np.isfinite(progress) and low <= progress <= high):
            return 1.0, 1.0
        below, above = (
            (self.rising_below, self.rising_above) if rising else (self.other_below, self.other_above)
        )
        return float(np.interp(progress, self.knots, below)), float(np.interp(progress, self.knots, above))

    @property
    def by_level(self) -> bool:
        """Whether the band is mapped by quantile level (inner factors of the 50% band's edges),
        here or early in a run (:attr:`early`).
        """
        return self.rising_below_inner is not None or self.early is not None

    def inner_factors(self, progress: float, rising: bool) -> tuple[float, float]:
        """The (below, above) factors of the 50% band's edges at ``progress``: :meth:`factors`'
        where the band is not mapped by quantile level (one factor a side), 1, 1 outside the
        windows; inside :attr:`early`'s window, its own.
        """
        early = self._early_at(progress)
        if early is not None:
            return early.inner_factors(progress, rising)
        low, high = self.window
        if self.rising_below_inner is None:
            return self.factors(progress, rising)
        if not (np.isfinite(progress) and low <= progress <= high):
            return 1.0, 1.0
        below, above = (
            (self.rising_below_inner, self.rising_above_inner)
            if rising
            else (self.other_below_inner, self.other_above_inner)
        )
        assert below is not None and above is not None  # by_level
        return float(np.interp(progress, self.knots, below)), float(np.interp(progress, self.knots, above))

    def for_range(self, stated: bool) -> BandStretch | None:
        """The factors of a run whose range is stated (:attr:`stated_range`) or estimated (these)."""
        return self.stated_range if stated else self

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping (:meth:`from_dict` reads it back)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, mapping: Mapping[str, Any]) -> BandStretch:
        """A :class:`BandStretch` from :meth:`to_dict`'s mapping (unknown keys are an error)."""
        known = {"knots", "rising_below", "rising_above", "other_below", "other_above", "window"}
        known |= {"rising_eps", "rising_z", "learnt_on", "stated_range", "early"}
        known |= {f"{name}_inner" for name in OUTER_FIELDS}
        unknown = sorted(set(mapping) - known)
        if unknown:
            raise BayesGRPOError(f"unknown BandStretch fields {unknown}; known: {sorted(known)}.")
        fields: dict[str, Any] = {key: tuple(v) if isinstance(v, list) else v for key, v in mapping.items()}
        for nested in ("stated_range", "early"):
            if fields.get(nested) is not None:
                fields[nested] = cls.from_dict(fields[nested])
        return cls(**fields)


@functools.cache
def shipped_band_stretch() -> BandStretch:
    """The factors learnt on the bundled runs (:data:`SHIPPED_BAND_STRETCH`), read once."""
    document = json.loads(SHIPPED_BAND_STRETCH.read_text())
    return BandStretch.from_dict(document["all_sources"])


def with_band_stretch(
    cd: CurveDraws, stretch: BandStretch, progress: Sequence[float] | np.ndarray, applies: Any = True
) -> CurveDraws:
    """``cd`` with each run's predictive-band factors attached (``predictive_stretch``).

    Parameters
    ----------
    cd : CurveDraws
        With the runs' recent rise attached (otherwise every run counts as not rising).
    stretch : BandStretch
        Mapped by quantile level (:attr:`BandStretch.by_level`): four factors a run, (below,
        above) of the 90% band's edges then of the 50% band's.
    progress : array_like of shape (R,)
        Each run's share of its steps logged so far.
    applies : bool or array_like of bool, shape (R,)
        Runs whose band the factors were learnt for (the live path stretches runs whose reward
        range was estimated from their points, as the factors were learnt); the others keep
        factors 1.

    Returns
    -------
    CurveDraws
    """
    progress = np.broadcast_to(np.asarray(progress, dtype=float), (cd.n_runs,))
    applies = np.broadcast_to(np.asarray(applies, dtype=bool), (cd.n_runs,))
    rising = rising_runs(cd, stretch.rising_eps, stretch.rising_z)
    factors = np.ones((cd.n_runs, 4 if stretch.by_level else 2))
    for i in range(cd.n_runs):  # a loop over runs, not draws
        if applies[i]:
            factors[i, :2] = stretch.factors(float(progress[i]), bool(rising[i]))
            if stretch.by_level:
                factors[i, 2:] = stretch.inner_factors(float(progress[i]), bool(rising[i]))
    return replace(cd, predictive_stretch=factors)
