"""Populations that never saw the held-out run: leave one model size, one family or one run out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo.evaluate.backtest.cuts import (
    BacktestError,
)
from bayesgrpo.evaluate.backtest.populations import held_out_populations
from bayesgrpo.evaluate.transfer_eval.metadata import known_reward_bounds

if TYPE_CHECKING:
    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.reward_model import RewardModel

# --------------------------------------------------------------------------------------------
# Leave one size out
# --------------------------------------------------------------------------------------------


def size_groups(table: RunsTable, min_runs: int = 2) -> dict[float, list[str]]:
    """Runs grouped by model size, for sizes with at least ``min_runs`` runs.

    Parameters
    ----------
    table : RunsTable
    min_runs : int
        Fewest runs a size needs to be held out as a group.

    Returns
    -------
    dict
        ``size_b -> run ids`` (table order), sizes ascending; runs of unknown size are in none.
    """
    if "size_b" not in table.runs.columns:
        raise BacktestError(
            f"no metadata column 'size_b' to group runs by; columns: {list(table.runs.columns)}"
        )
    sizes = pd.to_numeric(table.runs["size_b"], errors="coerce").astype(float)
    run_ids = table.runs["run_id"].astype(str)
    groups: dict[float, list[str]] = {}
    for size, run_id in zip(sizes, run_ids, strict=True):
        if np.isfinite(size):
            groups.setdefault(float(size), []).append(run_id)
    return {size: groups[size] for size in sorted(groups) if len(groups[size]) >= int(min_runs)}


def size_out_populations(
    table: RunsTable,
    fit_kwargs: Mapping[str, Any] | None = None,
    random_seed: int = 0,
    *,
    model_kwargs: Mapping[str, Any] | None = None,
    min_runs: int = 2,
    sizes: Sequence[float] | None = None,
) -> dict[str, RewardModel]:
    """Fit one population per model size on the runs of every other size.

    Parameters
    ----------
    table : RunsTable
    fit_kwargs : mapping, optional
        Passed to :meth:`RewardModel.fit`; ``progressbar`` defaults to False and
        ``random_seed`` to ``random_seed + i`` for the i-th size.
    random_seed : int
    model_kwargs : mapping, optional
        Passed to :class:`RewardModel` (pooling must stay partial).
    min_runs : int
        Sizes with fewer runs are not held out (:func:`size_groups`).
    sizes : sequence of float, optional
        Hold out only these sizes (each must have ``min_runs`` runs); default all.

    Returns
    -------
    dict
        ``run_id -> fitted RewardModel`` for the runs of the held-out sizes (runs of one size
        share one object). Runs of unknown size and of smaller groups are never held out but
        are in every population.
    """
    groups = size_groups(table, min_runs)
    if sizes is not None:
        unknown = [s for s in sizes if float(s) not in groups]
        if unknown:
            raise BacktestError(
                f"sizes {unknown} have fewer than {min_runs} runs; sizes to hold out: {list(groups)}"
            )
        groups = {float(s): groups[float(s)] for s in sizes}
    if not groups:
        raise BacktestError(f"no model size has {min_runs} or more runs to hold out")
    return held_out_populations(
        table, groups, fit_kwargs, random_seed, model_kwargs=model_kwargs, label="size %g held out"
    )


def family_out_populations(
    table: RunsTable,
    fit_kwargs: Mapping[str, Any] | None = None,
    random_seed: int = 0,
    *,
    model_kwargs: Mapping[str, Any] | None = None,
    families: Sequence[str] | None = None,
) -> dict[str, RewardModel]:
    """Leave one family out: one population per model family, fitted on every other family's runs.

    Each held-out run is then, to its population, a run of a family it has never seen: its
    prediction draws the family's effect from the between-family spread.

    Parameters
    ----------
    table : RunsTable
    fit_kwargs, random_seed, model_kwargs
        As :func:`size_out_populations`.
    families : sequence of str, optional
        Hold out only these families (default: every family of the table).

    Returns
    -------
    dict
        ``run_id -> fitted RewardModel`` for the runs of the held-out families; runs of unknown
        family are never held out but are in every population.
    """
    if "family" not in table.runs.columns:
        raise BacktestError(f"no metadata column 'family'; columns: {list(table.runs.columns)}")
    groups: dict[str, list[str]] = {}
    for family, run_id in zip(table.runs["family"], table.runs["run_id"].astype(str), strict=True):
        if isinstance(family, str) and family.strip():
            groups.setdefault(family, []).append(run_id)
    if families is not None:
        unknown = sorted(set(families) - set(groups))
        if unknown:
            raise BacktestError(f"families {unknown} are not in the table; families: {sorted(groups)}")
        groups = {f: groups[f] for f in families}
    if len(groups) < 2 and families is None:
        raise BacktestError(
            f"leaving a family out needs two families or more; the table has {sorted(groups)}"
        )
    return held_out_populations(
        table, groups, fit_kwargs, random_seed, model_kwargs=model_kwargs, label="family %s held out"
    )


def run_out_populations(
    table: RunsTable,
    run_ids: Sequence[str] | None = None,
    fit_kwargs: Mapping[str, Any] | None = None,
    random_seed: int = 0,
    *,
    model_kwargs: Mapping[str, Any] | None = None,
) -> dict[str, RewardModel]:
    """Leave-one-run-out: one population per held-out run, fitted on every other run.

    Parameters
    ----------
    table : RunsTable
    run_ids : sequence of str, optional
        The runs to hold out, one at a time (default: the runs with a stated reward range, the
        only ones a zero-shot prediction can be made for: :func:`known_reward_bounds`).
    fit_kwargs, random_seed, model_kwargs
        As :func:`size_out_populations`.

    Returns
    -------
    dict
        ``run_id -> fitted RewardModel`` that never saw that run.
    """
    if run_ids is None:
        run_ids = [
            row["run_id"] for row in table.runs.to_dict("records") if known_reward_bounds(row) is not None
        ]
    missing = sorted(set(run_ids) - set(table.run_ids))
    if missing:
        raise BacktestError(f"runs {missing[:5]} are not in the table")
    if not run_ids:
        raise BacktestError("no run to hold out (none states reward_min and reward_max)")
    return held_out_populations(
        table,
        {r: [r] for r in run_ids},
        fit_kwargs,
        random_seed,
        model_kwargs=model_kwargs,
        label="run %s held out",
    )
