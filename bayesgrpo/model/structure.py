"""How the model is laid out over runs, in numpy: which parameters a curve has, which runs take
which group effects and level means, and where a run's population location lies.

The PyMC graph (``model.build``) and everything that places a run in a fitted population without
building a graph (``model.predict``, the live update) share these functions, so both lay a run out
the same way. Nothing here imports PyMC or PyTensor: a live update in a fresh process never loads
the compiler stack (``benchmarks/live_first_answer.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from bayesgrpo.model.curves import get_curve
from bayesgrpo.model.data import UNKNOWN

if TYPE_CHECKING:
    from bayesgrpo.model.data import ModelData

#: Curve parameters shared by every family, on their unconstrained scales.
LEVEL_PARAMS: tuple[str, ...] = ("r0", "r1")


def curve_params(curve: str) -> tuple[str, ...]:
    """Names of a family's run parameters: ``r0``, ``r1``, then its shape parameters."""
    return LEVEL_PARAMS + tuple(get_curve(curve).shape_params)


#: A covariate takes part only when at least this share of runs state it: imputing most of a
#: covariate leaves its slope and the imputed values trading off freely (a ridge NUTS crawls
#: along), and the slope would be learnt from almost nothing.
MIN_KNOWN_SHARE = 0.5


def covariate_used(values: np.ndarray) -> bool:
    """Whether a covariate is known for enough runs to take part in the model."""
    return bool(np.isfinite(values).mean() >= MIN_KNOWN_SHARE) if len(values) else False


#: Runs of each kind (bounds stated, bounds from the run's own range) needed before the two kinds
#: get separate level means: with fewer, the offset would be learnt from one run.
MIN_RUNS_PER_BOUNDS_KIND = 2


def bounds_from_data(data: ModelData) -> np.ndarray:
    """Which runs' levels get the data-bounds treatment, as 0/1 floats of shape (R,).

    A run without ``reward_min``/``reward_max`` is normalised by its own observed range, so its
    levels say where it sits in that range (about a quarter at the start and three quarters
    at the end for a rising run), not how good it is: on that scale every run looks alike,
    and a falling run has a high start and a low end (a negative start-end relation). When a
    fit mixes such runs with runs on a stated range, the data-bounded runs get their own level
    means (``r0_data_offset``, ``r1_data_offset``) and take no part in the family, task, size
    and start effects of the levels, nor in the start's pull on any parameter: those are
    learnt from the runs whose levels mean something. Their noise gets its own mean too
    (``sigma_data_offset``): their range is partly their noise, so on their scale the noise is
    large, and a new run on a stated range would otherwise inherit it (measured: zero-shot 90%
    intervals held 99.5% of the points with a shared noise mean, 96.5% with the offset). All
    zeros when the fit does not mix at least ``MIN_RUNS_PER_BOUNDS_KIND`` runs of each kind (then
    nothing changes).
    """
    flag = np.array([source == "data" for source in data.bounds_source], dtype=bool)
    mixed = flag.sum() >= MIN_RUNS_PER_BOUNDS_KIND and (~flag).sum() >= MIN_RUNS_PER_BOUNDS_KIND
    return (flag & mixed).astype(float)


def effect_grouping(data: ModelData, dim: str, levels_param: bool) -> tuple[np.ndarray, tuple[str, ...], str]:
    """The group effects of a grouping (``"family"`` or ``"task"``) for one kind of parameter.

    Shape parameters (and levels when no run is normalised by its own range) use
    :func:`effect_levels` over every run, coordinate ``dim``. The levels (``r0``, ``r1``) of a fit
    that mixes both kinds of bounds (:func:`bounds_from_data`) get their effects from the runs on
    a stated range only, coordinate ``level_<dim>``: a data-bounded run counts as of unknown
    group there, so a family seen only in such runs has no level effect (a new run of it draws
    one from the between-family spread). Levels of groups the data say nothing about would
    otherwise sit in the sum-to-zero constraint, free to trade with the population mean (a
    second mode measured on the bundled runs: chains at ``r0_mu`` -3.0 and +1.4, r_hat 1.8).

    Returns
    -------
    index : ndarray of int, shape (R,)
        Each run's position among the levels, -1 for none.
    levels : tuple of str
    coord : str
        The coordinate (and variable suffix) of the effects.
    """
    index = data.family_index if dim == "family" else data.task_index
    names = data.families if dim == "family" else data.tasks
    data_bounded = bounds_from_data(data).astype(bool)
    if not (levels_param and data_bounded.any()):
        return (*effect_levels(index, names), dim)
    unknown = names.index(UNKNOWN) if UNKNOWN in names else len(names)
    masked = np.where(data_bounded, unknown, index)
    return (*effect_levels(masked, names if UNKNOWN in names else (*names, UNKNOWN)), f"level_{dim}")


def run_location(
    name: str,
    mu: Any,
    effects: Any,
    start_pull: Any,
    data_bounded: np.ndarray | float,
    data_offset: Any,
) -> Any:
    """A run's population location of parameter ``name`` (numpy arrays or pytensor tensors).

    Runs on a stated range: ``mu + effects + start_pull``. Runs normalised by their own range
    (``data_bounded`` 1, see :func:`bounds_from_data`): ``mu + data_offset`` for the levels,
    ``mu + effects`` for the shape parameters.

    Parameters
    ----------
    name : str
        The parameter (``r0``, ``r1``, a shape parameter).
    mu : array or tensor
        The population mean.
    effects : array or tensor
        Family + task effects + size slope x size.
    start_pull : array or tensor
        ``<p>_r0_slope * (r0 - r0_mu)`` (0 for ``r0``).
    data_bounded : array
        0/1 per run.
    data_offset : array or tensor or None
        ``<p>_data_offset`` of the levels; None when the fit has none.
    """
    known = 1.0 - data_bounded
    if name in LEVEL_PARAMS:
        loc = mu + known * (effects + start_pull)
        return loc if data_offset is None else loc + data_bounded * data_offset
    return mu + effects + known * start_pull


#: A grouping (family, task) gets effects only with at least this many levels: with two, the
#: between-group spread is one number estimated from two, and its ridge with the population
#: mean costs the sampler more than the effects are worth.
MIN_GROUP_LEVELS = 3

#: A level (a family, a task) gets its own effect only with at least this many runs. A level of
#: one run cannot tell its group effect from the run's own deviation (the two add up, a ridge the
#: sampler crawls along); such levels share one pooled level, ``OTHER_LEVEL``.
MIN_RUNS_PER_LEVEL = 2

#: The pooled level of the groups too small to have their own effect.
OTHER_LEVEL = "(other)"


def effect_levels(index: np.ndarray, levels: tuple[str, ...]) -> tuple[np.ndarray, tuple[str, ...]]:
    """The levels that get a group effect, and each run's position among them.

    Levels with fewer than ``MIN_RUNS_PER_LEVEL`` runs are pooled into ``OTHER_LEVEL``; when the
    pooled level itself would hold fewer than ``MIN_RUNS_PER_LEVEL`` runs, its runs get no group
    effect (position -1: they sit at the average group). Runs of unknown level (``UNKNOWN``) get
    no group effect either: not knowing a run's task says nothing about it.

    Parameters
    ----------
    index : ndarray of int, shape (R,)
        Each run's level in ``levels``.
    levels : tuple of str

    Returns
    -------
    effect_index : ndarray of int, shape (R,)
        Position of each run's level among ``effect_names``, or -1.
    effect_names : tuple of str
    """
    counts = np.bincount(index, minlength=len(levels))
    unknown = [i for i, level in enumerate(levels) if level == UNKNOWN]
    kept = [i for i, n in enumerate(counts) if n >= MIN_RUNS_PER_LEVEL and i not in unknown]
    rare = [i for i in range(len(levels)) if i not in kept and i not in unknown]
    rare_runs = int(counts[rare].sum()) if rare else 0
    names = [levels[i] for i in kept]
    position = {level: j for j, level in enumerate(kept)}
    other = -1
    if rare_runs >= MIN_RUNS_PER_LEVEL:
        other = len(names)
        names.append(OTHER_LEVEL)
    effect_index = np.array(
        [position.get(int(i), -1 if int(i) in unknown else other) for i in index], dtype=int
    )
    return effect_index, tuple(names)
