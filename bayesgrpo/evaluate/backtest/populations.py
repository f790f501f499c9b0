"""Populations that never saw the run scored: folds stratified by source, one fit per fold, or one
fit per source with every run of that source left out (:func:`leave_one_source_out_populations`).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
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


# --------------------------------------------------------------------------------------------
# Leave one source out
# --------------------------------------------------------------------------------------------

#: Words of a notebook's file name that mark a copy of the same notebook (a platform's edition,
#: a precision, a dated save), dropped before notebooks are compared.
_NOTEBOOK_EDITION = re.compile(
    r"^(kaggle|huggingface course|openenv)[-_ ]+|[-_ ]?(bf16|fp8|dgx_spark|\d{8})$"
)


def source_group(metadata: Mapping[str, Any]) -> str:
    """The source a run comes from, as a user's run would *not* share it with the population.

    Runs of one source are near copies: the same notebook saved at another commit, on another
    platform (Kaggle, the Hugging Face course) or precision (BF16, FP8), in the same repository
    or copied into another one; the runs of one verl recipe or one pull request. A notebook is
    named by its file name, lower-cased, without its edition words (``Kaggle-``, ``_BF16``, a
    trailing date) and a minor model version (``Llama3_1``/``Llama3_2`` -> ``llama3``), and
    without punctuation, whichever repository holds it. A verl recipe is its repository and
    ``recipe/<name>``. Any other run is grouped by its ``source`` (its repository), and a run
    without one is its own source.

    Parameters
    ----------
    metadata : mapping
        A run's metadata row: ``source`` and ``source_path`` (as the bundled manifest has them).

    Returns
    -------
    str
        ``notebook:<name>``, ``<repository>:recipe/<name>``, the repository, or ``run:<run_id>``.
    """
    source = _text_or_empty(metadata.get("source"))
    path = _text_or_empty(metadata.get("source_path")).split(" (")[0]
    if path.endswith(".ipynb"):
        stem = path.rsplit("/", 1)[-1].removesuffix(".ipynb").lower()
        stem = _NOTEBOOK_EDITION.sub("", _NOTEBOOK_EDITION.sub("", stem))
        stem = re.sub(r"(llama3)[._]\d", r"\1", stem)
        name = re.sub(r"[^a-z0-9]", "", stem)
        # a notebook of the trainer's own repository is a recipe of that repository
        return f"{source}:{name}" if "verl" in source else f"notebook:{name}"
    if path.startswith("recipe/"):
        return f"{source}:{'/'.join(path.split('/')[:2])}"
    return source or f"run:{_text_or_empty(metadata.get('run_id'))}"


def source_groups(table: RunsTable) -> dict[str, list[str]]:
    """Runs grouped by :func:`source_group`, groups and runs sorted."""
    groups: dict[str, list[str]] = {}
    for row in table.runs.to_dict("records"):
        groups.setdefault(source_group(row), []).append(str(row["run_id"]))
    return {name: sorted(groups[name]) for name in sorted(groups)}


def leave_one_source_out_populations(
    table: RunsTable,
    fit_kwargs: Mapping[str, Any] | None = None,
    random_seed: int = 0,
    *,
    model_kwargs: Mapping[str, Any] | None = None,
    cache_dir: str | Path | None = None,
) -> dict[str, RewardModel]:
    """One population per source (:func:`source_groups`), fitted on the runs of every other source.

    This is the split a user's run meets: no run of its notebook, recipe or repository is in
    the population that forecasts it. With ``cache_dir``, each source's population is saved as
    it is fitted (``<i>.nc`` beside ``<i>.json``, the settings and the runs it held out) and
    loaded instead of refitted when the settings match, so an interrupted backtest resumes.

    Parameters
    ----------
    table : RunsTable
    fit_kwargs : mapping, optional
        Passed to :meth:`RewardModel.fit`; ``progressbar`` defaults to False and
        ``random_seed`` to ``random_seed + i`` for the i-th source.
    random_seed : int
    model_kwargs : mapping, optional
        Passed to :class:`RewardModel`.
    cache_dir : str or Path, optional
        Folder of the fitted populations, reused across calls.

    Returns
    -------
    dict
        ``run_id -> fitted RewardModel`` (the runs of one source share one object).
    """
    groups = source_groups(table)
    populations: dict[str, RewardModel] = {}
    for i, (name, held) in enumerate(groups.items()):
        kwargs = {"progressbar": False, "random_seed": int(random_seed) + i, **dict(fit_kwargs or {})}
        key = {
            "source": name,
            "held_out": held,
            "runs": sorted(table.run_ids),
            "fit": {k: v for k, v in kwargs.items() if k != "progressbar"},
            "model": dict(model_kwargs or {}),
        }
        model = _cached_population(cache_dir, i, key)
        if model is None:
            model = held_out_populations(
                table, {name: held}, kwargs, model_kwargs=model_kwargs, label="source %s"
            )[held[0]]
            if cache_dir is not None:
                folder = Path(cache_dir)
                folder.mkdir(parents=True, exist_ok=True)
                model.save(folder / f"{i}.nc")
                (folder / f"{i}.json").write_text(json.dumps(key, sort_keys=True, default=str))
        populations.update({run_id: model for run_id in held})
    return populations


def _cached_population(
    cache_dir: str | Path | None, index: int, key: Mapping[str, Any]
) -> RewardModel | None:
    """The population saved under ``index`` in ``cache_dir`` when it was fitted with ``key``."""
    if cache_dir is None:
        return None
    settings, path = Path(cache_dir) / f"{index}.json", Path(cache_dir) / f"{index}.nc"
    if not (settings.exists() and path.exists()):
        return None
    if json.loads(settings.read_text()) != json.loads(json.dumps(key, sort_keys=True, default=str)):
        logger.info("cached population %s was fitted with other settings: refitting", path)
        return None
    return RewardModel.load(path)


def _text_or_empty(value: Any) -> str:
    """A metadata value as text, empty when missing."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    text = str(value)
    return "" if text in ("<NA>", "nan", "None") else text
