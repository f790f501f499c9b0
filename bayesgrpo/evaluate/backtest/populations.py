"""Populations that never saw the run scored: folds stratified by source, one fit per fold."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from bayesgrpo.evaluate.backtest.cuts import BacktestError
from bayesgrpo.model.reward_model import RewardModel

if TYPE_CHECKING:
    from bayesgrpo.logs.table import RunsTable

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# Populations that never saw the run scored
# --------------------------------------------------------------------------------------------


def fold_assignment(
    table: RunsTable, n_folds: int, random_seed: int = 0, strata: str = "source"
) -> dict[str, int]:
    """Assign runs to ``n_folds`` folds, each fold mixing the values of ``strata``.

    Runs are shuffled (seeded), stably sorted by their ``strata`` metadata (missing values
    together), and dealt to folds in turn: fold sizes differ by at most one and the runs of one
    source are spread over the folds.

    Parameters
    ----------
    table : RunsTable
    n_folds : int
        From 2 to the number of runs (leave-one-run-out).
    random_seed : int
    strata : str
        Metadata column to stratify by.

    Returns
    -------
    dict
        ``run_id -> fold`` (0 to ``n_folds - 1``).
    """
    run_ids = table.run_ids
    n_folds = int(n_folds)
    if not 2 <= n_folds <= len(run_ids):
        raise BacktestError(
            f"n_folds must be between 2 and the number of runs ({len(run_ids)}); got {n_folds}"
        )
    if strata not in table.runs.columns:
        raise BacktestError(
            f"no metadata column {strata!r} to stratify folds by; columns: {list(table.runs.columns)}"
        )
    labels = table.runs[strata].astype("string").fillna("").to_numpy(dtype=object)
    order = np.random.default_rng(random_seed).permutation(len(run_ids))
    order = order[np.argsort(labels[order], kind="stable")]
    return {run_ids[i]: position % n_folds for position, i in enumerate(order)}


def kfold_populations(
    table: RunsTable,
    n_folds: int = 5,
    fit_kwargs: Mapping[str, Any] | None = None,
    random_seed: int = 0,
    *,
    model_kwargs: Mapping[str, Any] | None = None,
    strata: str = "source",
) -> dict[str, RewardModel]:
    """Fit one population per fold on every run but the fold's; map each run to the fit that
    never saw it.

    This is K-fold cross-validation over runs, not strict leave-one-run-out (a population fit
    costs minutes, K fits instead of one per run); ``n_folds = len(table)`` is leave-one-out.

    Parameters
    ----------
    table : RunsTable
    n_folds : int
    fit_kwargs : mapping, optional
        Passed to :meth:`RewardModel.fit` (``draws``, ``tune``, ``chains``, ``sampler``...);
        ``progressbar`` defaults to False and ``random_seed`` to ``random_seed + fold``.
    random_seed : int
        Seeds the fold assignment and the fits.
    model_kwargs : mapping, optional
        Passed to :class:`RewardModel` (``curve``, ``max_points``...); pooling must stay partial.
    strata : str
        Metadata column the folds are stratified by (:func:`fold_assignment`).

    Returns
    -------
    dict
        ``run_id -> fitted RewardModel`` (runs of one fold share one object).
    """
    folds = fold_assignment(table, n_folds, random_seed, strata)
    groups = {fold: [r for r in table.run_ids if folds[r] == fold] for fold in range(int(n_folds))}
    return held_out_populations(
        table, groups, fit_kwargs, random_seed, model_kwargs=model_kwargs, label="fold %s"
    )


def held_out_populations(
    table: RunsTable,
    groups: Mapping[Any, Sequence[str]],
    fit_kwargs: Mapping[str, Any] | None = None,
    random_seed: int = 0,
    *,
    model_kwargs: Mapping[str, Any] | None = None,
    label: str = "group %s",
) -> dict[str, RewardModel]:
    """One population per group of runs, fitted on every run outside the group.

    Parameters
    ----------
    table : RunsTable
    groups : mapping label -> run ids
        The runs each population must not see (a fold, a model size).
    fit_kwargs : mapping, optional
        Passed to :meth:`RewardModel.fit`; ``progressbar`` defaults to False and
        ``random_seed`` to ``random_seed + i`` for the i-th group.
    random_seed : int
    model_kwargs : mapping, optional
        Passed to :class:`RewardModel`.
    label : str
        How a group is named in the log (``%s`` is its label).

    Returns
    -------
    dict
        ``run_id -> fitted RewardModel`` for the runs of every group (a group shares one object).
    """
    populations: dict[str, RewardModel] = {}
    for i, (name, held) in enumerate(groups.items()):
        held_set = set(held)
        train = table.select([r for r in table.run_ids if r not in held_set])
        kwargs = {"progressbar": False, "random_seed": int(random_seed) + i, **dict(fit_kwargs or {})}
        start = time.perf_counter()
        model = RewardModel(**dict(model_kwargs or {})).fit(train, **kwargs)
        logger.info(
            label + ": population of %d runs fitted in %.0f s (held out %d)",
            name,
            len(train),
            time.perf_counter() - start,
            len(held),
        )
        populations.update({run_id: model for run_id in held})
    return populations
