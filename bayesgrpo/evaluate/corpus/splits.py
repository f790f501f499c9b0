"""Sources to folds by a hash of their name, run weights, and a bootstrap over sources.

A source is one repository, or one recipe of a monorepo (``owner/name:recipe``). Its fold is a
function of its name alone, so adding sources never moves an old one: about 20% of sources go to
the sealed fold (nothing is chosen on it; it is scored once per change that claims a gain) and the
rest to folds ``0`` .. ``4``, on which defaults are chosen and scored in turn.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

#: The fold no default, prior, threshold or band factor is chosen on.
SEALED = "sealed"
#: The folds defaults are chosen on (four of them) and scored on (the fifth), in turn.
FOLDS: tuple[str, ...] = ("0", "1", "2", "3", "4")
#: Share of sources sealed, in percent of the hash's range.
SEALED_PERCENT = 20


def _digest(source: str) -> str:
    return hashlib.sha256(source.strip().encode("utf-8")).hexdigest()


def source_fold(source: str) -> str:
    """The fold of a source: :data:`SEALED` for about 20% of names, else ``"0"`` .. ``"4"``.

    Parameters
    ----------
    source : str
        The source's name (``"owner/name"`` or ``"owner/name:recipe"``).

    Returns
    -------
    str
    """
    digest = _digest(source)
    if int(digest[:8], 16) % 100 < SEALED_PERCENT:
        return SEALED
    return FOLDS[int(digest[8:16], 16) % len(FOLDS)]


def run_weights(sources: Sequence[str] | pd.Series, scheme: str = "pooled", cap: float = 0.1) -> np.ndarray:
    """Weights of runs (summing to 1) for a mean over runs.

    Parameters
    ----------
    sources : sequence of str
        The source of each run (one entry per run).
    scheme : {"pooled", "equal"}
        ``"pooled"``: every run alike, except that no source carries more than ``cap`` of the
        total (its runs share that much, the others are scaled up to make 1). ``"equal"``: each
        source weighs the same, split evenly among its runs.
    cap : float
        The most one source may weigh in ``"pooled"`` (at most 10% of the runs by default).

    Returns
    -------
    numpy.ndarray
    """
    codes, _ = pd.factorize(np.asarray(sources, dtype=object))
    if len(codes) == 0:
        return np.zeros(0)
    counts = np.bincount(codes).astype(float)
    return (source_weights(counts, scheme, cap) / counts)[codes]


def source_weights(counts: np.ndarray, scheme: str = "pooled", cap: float = 0.1) -> np.ndarray:
    """Each source's share of the weight (summing to 1), from its number of runs.

    Parameters
    ----------
    counts : array of float
        Runs of each source.
    scheme, cap
        As :func:`run_weights`.

    Returns
    -------
    numpy.ndarray
        One weight per source; :func:`run_weights` splits it evenly among the source's runs.
    """
    if scheme not in ("pooled", "equal"):
        raise ValueError(f"scheme must be 'pooled' or 'equal', not {scheme!r}")
    counts = np.asarray(counts, dtype=float)
    n_sources = len(counts)
    if n_sources == 0:
        return np.zeros(0)
    if scheme == "equal" or cap * n_sources < 1.0:  # fewer than 1 / cap sources: each source equal
        return np.full(n_sources, 1.0 / n_sources)
    share = counts / counts.sum()
    # Water-filling: sources over the cap are held at it, the rest share what is left in
    # proportion to their runs; repeat until no source is over.
    capped = np.zeros(n_sources, dtype=bool)
    while True:
        left = 1.0 - cap * capped.sum()
        scaled = np.where(capped, cap, share / share[~capped].sum() * left)
        over = ~capped & (scaled > cap + 1e-12)
        if not over.any():
            return scaled
        capped |= over


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """The median of ``values`` when each counts as much as its weight."""
    order = np.argsort(values)
    cumulative = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cumulative, 0.5 * cumulative[-1])])


def source_bootstrap(
    values: Sequence[float] | np.ndarray,
    sources: Sequence[str] | pd.Series,
    statistic: Callable[[np.ndarray, np.ndarray], float] | None = None,
    scheme: str = "pooled",
    n_boot: int = 2000,
    level: float = 0.9,
    seed: int = 0,
) -> tuple[float, float, float]:
    """A weighted statistic of per-run values and its interval from resampling whole sources.

    Parameters
    ----------
    values : array of float, shape (n,) or (n, k)
        One value (or row of ``k`` values, e.g. a method's score and a baseline's) per run; rows
        holding a NaN are left out.
    sources : sequence of str
        Each run's source.
    statistic : callable, optional
        ``statistic(values, weights) -> float``; the weighted mean of a 1-d ``values`` by default.
    scheme : {"pooled", "equal"}
        How runs are weighed (:func:`run_weights`), recomputed in each resample.
    n_boot, level, seed
        Resamples, the interval's level and the random seed.

    Returns
    -------
    (estimate, low, high) : tuple of float
    """
    statistic = statistic or (lambda v, w: float(np.sum(v * w) / np.sum(w)))
    array = np.asarray(values, dtype=float)
    labels = np.asarray(sources, dtype=object)
    keep = np.isfinite(array).all(axis=1) if array.ndim == 2 else np.isfinite(array)
    array, labels = array[keep], labels[keep]
    if len(array) == 0:
        return (float("nan"),) * 3
    estimate = statistic(array, run_weights(labels, scheme))
    codes, names = pd.factorize(labels)
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=len(names))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rng = np.random.default_rng(seed)
    draws = np.empty(n_boot)
    for b in range(n_boot):
        picked = rng.integers(0, len(names), size=len(names))
        # a source drawn twice counts as two sources (each copy weighed as a source of its own)
        counts = sizes[picked]
        rows = order[np.concatenate([np.arange(starts[i], starts[i] + sizes[i]) for i in picked])]
        weights = np.repeat(source_weights(counts.astype(float), scheme) / counts, counts)
        draws[b] = statistic(array[rows], weights)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(draws, [tail, 1.0 - tail])
    return estimate, float(low), float(high)
