"""A trainer's in-memory log history as a runs table, and the forecast numbers a callback logs.

The TRL callback (:mod:`bayesgrpo.integrations.trl`) reads ``state.log_history`` the way the TRL
reader reads ``trainer_state.json`` (:func:`log_history_table`) and writes back the metrics of
:func:`forecast_metrics`. Nothing here imports transformers: it works on any object with the
trainer state's attributes, so it is tested without a trainer.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo.errors import EmptyLogError, UnknownMetricError
from bayesgrpo.logs.readers import ReadOptions, Source, merge_metadata
from bayesgrpo.logs.readers._records import tidy_run
from bayesgrpo.logs.readers.trl.columns import STATE_EXTRA, STATE_METADATA, TRL_REWARD_CANDIDATES, trl_run
from bayesgrpo.logs.readers.trl.metadata import state_metadata
from bayesgrpo.logs.readers.trl.state import history_store
from bayesgrpo.logs.report import ReadReport
from bayesgrpo.logs.table import RunsTable, coerce_metadata
from bayesgrpo.questions.stopping import prob_gain_below, reward_at

if TYPE_CHECKING:
    import pandas as pd

    from bayesgrpo.questions.live import LiveUpdate
    from bayesgrpo.questions.stopping import Decision


#: Prefix of every metric the callback logs (TensorBoard shows them as ``train/bayesgrpo/...``).
PREFIX = "bayesgrpo/"
#: Interval of the ``forecast_final_predictive_*`` and ``forecast_final_curve_*`` bands.
FORECAST_INTERVAL = 0.9
#: Label of the in-memory log history in the read report.
HISTORY_SOURCE = "state.log_history"
MODES = ("stop", "advise")


# --------------------------------------------------------------------------------------------
# log_history -> RunsTable (the TRL reader's path, on the trainer's in-memory history)
# --------------------------------------------------------------------------------------------


def log_history_table(
    log_history: Sequence[Any],
    *,
    run_id: str = "run",
    reward_key: str | None = None,
    state_values: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    keep: Collection[str] | None = None,
) -> RunsTable:
    """One run's table from a trainer's ``state.log_history``, read as ``trainer_state.json`` is.

    Entries are filed as :func:`bayesgrpo.logs.readers.trl.state.read_trainer_state` files them (training
    and evaluation rows at their ``step``, the summary row to the metadata, entries that are not
    dicts dropped), then cleaned by the readers' ``tidy_run`` (duplicate steps merged, the
    reward chosen: ``reward_key``, else the TRL defaults ``reward``, ``objective/scores``,
    ``objective/rlhf_reward``). Keys starting with ``bayesgrpo/`` (this callback's own output)
    are left out.

    Parameters
    ----------
    log_history : sequence of dict
        ``TrainerState.log_history``.
    run_id : str
    reward_key : str, optional
        The metric to forecast, by its name in the logs (or a canonical name).
    state_values : mapping, optional
        Top-level ``TrainerState`` values (``max_steps``, ``logging_steps``...), mapped to
        metadata as the reader maps them (``max_steps`` -> ``total_steps``).
    metadata : mapping, optional
        Run metadata that wins over what the history states (``family``, ``size_b``,
        ``reward_min``...).
    keep : collection of str, optional
        Read only these metrics (default all, as the reader); a live update needs only the
        reward (:func:`forecast_keys`), and each metric read costs time.

    Returns
    -------
    RunsTable

    Raises
    ------
    EmptyLogError
        No step record yet, or the reward has no finite value.
    UnknownMetricError
        ``reward_key`` names no logged metric, or no default reward metric is logged.
    """
    stated, issues = state_metadata(dict(state_values or {}), HISTORY_SOURCE)
    filed = history_store(log_history, keep, exclude_prefix=PREFIX)
    store, dropped = filed.store, len(filed.not_objects)
    stated.update(filed.summary)
    source = Source("trl-state", (Path(HISTORY_SOURCE),), run_id)
    options = ReadOptions(reward=reward_key, run_id=run_id)
    try:
        if len(store) == 0:
            raise EmptyLogError("log_history holds no step record yet", HISTORY_SOURCE)
        raw = trl_run(source, options, store, dropped, issues, stated, location_label="log_history entry")
        tidy = tidy_run(raw, reward=reward_key)
    except (EmptyLogError, UnknownMetricError) as exc:
        if keep is None:
            raise
        # name every metric of the history, not only those kept, in the message
        logged = sorted({str(k) for e in log_history if isinstance(e, Mapping) for k in e} - {"step"})
        wanted = reward_key or TRL_REWARD_CANDIDATES[0]
        if not any(k in logged for k in ((reward_key,) if reward_key else TRL_REWARD_CANDIDATES)):
            raise UnknownMetricError(
                wanted,
                [k for k in logged if not k.startswith(PREFIX)],
                HISTORY_SOURCE
                + (
                    ""
                    if reward_key
                    else f" (none of the default reward metrics {list(TRL_REWARD_CANDIDATES)} "
                    "is logged; pass reward_key='<metric>')"
                ),
            ) from exc
        raise
    runs, notes = _runs_frame(tidy.metadata, dict(metadata or {}))
    report = ReadReport(sources=[tidy.account], notes=notes)
    return RunsTable(points=tidy.points, runs=runs, report=report)


def _runs_frame(stated: dict[str, Any], given: dict[str, Any]) -> tuple[pd.DataFrame, list[Any]]:
    """The metadata row as ``load_runs`` builds it (the user's values win), cached: it is the
    same at every update of a run, and building it costs more than the points.
    """
    try:
        key = (tuple(sorted(stated.items())), tuple(sorted(given.items())))
        hash(key)
    except TypeError:
        return _build_runs_frame(stated, given)
    runs, notes = _cached_runs_frame(key)
    return runs.copy(), list(notes)


@functools.lru_cache(maxsize=32)
def _cached_runs_frame(
    key: tuple[tuple[tuple[str, Any], ...], tuple[tuple[str, Any], ...]],
) -> tuple[pd.DataFrame, tuple[Any, ...]]:
    runs, notes = _build_runs_frame(dict(key[0]), dict(key[1]))
    return runs, tuple(notes)


def _build_runs_frame(stated: dict[str, Any], given: dict[str, Any]) -> tuple[pd.DataFrame, list[Any]]:

    run_id = stated["run_id"]
    merged, notes = merge_metadata(pd.DataFrame([stated]), {run_id: given} if given else None)
    return coerce_metadata(merged), list(notes)


def forecast_keys(reward_key: str | None = None) -> frozenset[str]:
    """The logged metrics a live update reads: the reward (``reward_key`` or the TRL defaults)
    and the completion length (the ``compute`` progress axis).
    """
    rewards = (reward_key,) if reward_key else TRL_REWARD_CANDIDATES
    return frozenset((*rewards, "completions/mean_length", "completion_length"))


def trainer_metadata(args: Any) -> dict[str, Any]:
    """What a trainer's arguments state about the run, in the schema's names.

    ``samples_per_step`` is the total train batch (per-device batch x gradient accumulation x
    processes, as the trainer's banner states it and the TRL reader reads it); ``group_size`` is
    TRL's ``num_generations``; ``algorithm`` the config class without ``Config``
    (``GRPOConfig`` -> ``"grpo"``). Values that are missing stay missing.
    """
    out: dict[str, Any] = {}
    per_device = positive_or_none(getattr(args, "per_device_train_batch_size", None))
    accumulation = positive_or_none(getattr(args, "gradient_accumulation_steps", None))
    world = positive_or_none(getattr(args, "world_size", None))
    if per_device is not None and accumulation is not None and world is not None:
        out["samples_per_step"] = per_device * accumulation * world
    group = positive_or_none(getattr(args, "num_generations", None))
    if group is not None:
        out["group_size"] = group
    learning_rate = positive_or_none(getattr(args, "learning_rate", None))
    if learning_rate is not None:
        out["learning_rate"] = learning_rate
    name = type(args).__name__
    if name.endswith("Config") and name != "Config":
        out["algorithm"] = name.removesuffix("Config").lower()
    return out


def positive_or_none(value: Any) -> float | None:
    """``value`` as a float when it is a positive finite number, else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def state_values(state: Any) -> dict[str, Any]:
    """The top-level ``TrainerState`` values the TRL reader turns into metadata."""
    values = {key: getattr(state, key, None) for key in (*STATE_METADATA, *STATE_EXTRA)}
    if positive_or_none(values.get("max_steps")) is None:
        values["max_steps"] = None  # 0 before training starts: unknown, not a horizon of 0
    return values


# --------------------------------------------------------------------------------------------
# the numbers the callback logs
# --------------------------------------------------------------------------------------------


def forecast_metrics(
    update: LiveUpdate,
    decision: Decision,
    *,
    eps: float,
    relative: bool = False,
    interval: float = FORECAST_INTERVAL,
) -> dict[str, float]:
    """The callback's log entries for one live update and the rule's decision on it.

    Parameters
    ----------
    update : LiveUpdate
    decision : Decision
        The rule's decision for ``update`` (its expected gain is logged).
    eps : float
        Gain that counts as nothing for ``p_plateau`` (reward units, or a fraction of the reward
        range when ``relative``).
    relative : bool
    interval : float
        Of the final-reward forecast.

    Returns
    -------
    dict
        ``bayesgrpo/p_plateau``, ``bayesgrpo/expected_gain``, ``bayesgrpo/forecast_final`` (the
        expected reward at the horizon), the ``interval`` band of a logged reward there
        (``bayesgrpo/forecast_final_predictive_low``/``_high``: noise included; left out when
        the update carries no noise draws) and of the expected curve
        (``bayesgrpo/forecast_final_curve_low``/``_high``), ``bayesgrpo/pareto_k`` (above 0.7 the
        update came from its MCMC fallback), ``bayesgrpo/departed`` (1: the run's latest points
        have left the update's band, ``LiveUpdate.departure``), ``bayesgrpo/recent_rise`` (the
        rise of the logged reward over the run's latest tenth, where the draws carry it),
        ``bayesgrpo/held_while_rising`` (1: the rule held a stop because of that rise; rules that
        have the guard only), ``bayesgrpo/stopped_flat`` (1: the rule's opt-in flat stop stopped
        the run, ``GuardedBudgetRule(flat_eps=...)`` only), ``bayesgrpo/stop``, as Python floats.
    """
    draws = update.curve_draws
    p_plateau = prob_gain_below(draws, update.step, update.horizon_step, eps=eps, relative=relative)[0]
    final = reward_at(draws, [update.horizon_step])[:, 0, 0]
    tail = (1.0 - interval) / 2.0
    metrics = {
        f"{PREFIX}p_plateau": float(p_plateau),
        f"{PREFIX}expected_gain": float(decision.expected_gain),
        f"{PREFIX}forecast_final": float(final.mean()),
    }
    if update.curve_draws.has_noise:
        low, _, high = update.final_interval(interval, band="predictive")
        metrics[f"{PREFIX}forecast_final_predictive_low"] = low
        metrics[f"{PREFIX}forecast_final_predictive_high"] = high
    low, high = np.quantile(final, [tail, 1.0 - tail])
    metrics[f"{PREFIX}forecast_final_curve_low"] = float(low)
    metrics[f"{PREFIX}forecast_final_curve_high"] = float(high)
    if update.posterior is not None:
        metrics[f"{PREFIX}pareto_k"] = float(update.posterior.pareto_k)
    if update.departure is not None:
        metrics[f"{PREFIX}departed"] = 1.0 if update.departed else 0.0
    rise = draws.recent_rise
    if rise is not None and np.isfinite(rise[0]):
        metrics[f"{PREFIX}recent_rise"] = float(rise[0])
    if "held_while_rising" in decision.details:
        metrics[f"{PREFIX}held_while_rising"] = float(decision.details["held_while_rising"])
    if "stopped_flat" in decision.details:
        metrics[f"{PREFIX}stopped_flat"] = float(decision.details["stopped_flat"])
    metrics[f"{PREFIX}stop"] = 1.0 if decision.stop else 0.0
    return metrics


@dataclass(frozen=True)
class ForecastRecord:
    """One update of the callback: where the run stood and what was forecast.

    Attributes
    ----------
    step, horizon_step : float
    n_points : int
        Reward points the update conditioned on.
    metrics : dict
        What was logged (``bayesgrpo/...`` keys).
    decision : Decision
    acted : bool
        Whether this update stopped training.
    seconds : float
        Time of the whole update (table, forecast, rule).
    range_note : str
        Which reward range a relative eps was a share of: stated, or estimated from the run's
        points (``LiveUpdate.range_note``); empty when the forecaster does not say.
    """

    step: float
    horizon_step: float
    n_points: int
    metrics: Mapping[str, float]
    decision: Decision
    acted: bool
    seconds: float
    range_note: str = ""
