"""A transformers / TRL callback that forecasts the reward curve as training runs, and can stop it.

:class:`BayesStopCallback` works with any ``transformers.Trainer`` (TRL's ``GRPOTrainer``,
``PPOTrainer``, ``RLOOTrainer``... are subclasses). Every ``every`` training log calls it

1. turns the trainer's own ``state.log_history`` into a one-run :class:`~bayesgrpo.logs.table.RunsTable`
   the way the TRL reader reads ``trainer_state.json`` (same records, same reward choice:
   ``reward`` for GRPO/RLOO, then PPO's ``objective/scores``...; ``reward_key=`` overrides);
2. conditions the population prior on it (:meth:`bayesgrpo.questions.live.LiveForecaster.update`: no
   sampling, a few tens of milliseconds) with the horizon ``horizon`` or ``state.max_steps``;
3. asks the stopping rule, and writes the answer into the trainer's logs:

   ========================================= ==================================================
   ``bayesgrpo/p_plateau``                   ``P(R(T) - R(s) < eps)``, eps of the rule
   ``bayesgrpo/expected_gain``               expected reward still to gain by the horizon
   ``bayesgrpo/forecast_final``              expected reward at the horizon (posterior mean)
   ``bayesgrpo/forecast_final_low``/``_high``  its 90% interval (5% and 95% quantiles)
   ``bayesgrpo/stop``                        1.0 when the rule says stop, else 0.0
   ========================================= ==================================================

4. with ``mode="stop"`` and a "stop" decision, sets ``control.should_training_stop`` (the reason
   goes to ``logging.info``); ``mode="advise"`` only logs.

Where the metrics go
--------------------
``Trainer.log`` appends a copy of the log dict to ``state.log_history`` and then calls the
callbacks' ``on_log`` in list order: ``DefaultFlowCallback``, the reporting callbacks of
``report_to`` (TensorBoard, W&B, MLflow...), the callbacks given by the user, the progress
printer. The callback writes its metrics into both the history entry (so they reach
``trainer_state.json``) and the ``logs`` dict (so every callback after it sees them). Given in
``callbacks=[...]`` it runs *after* the reporting callbacks, which have already written that
step; :meth:`BayesStopCallback.attach` places it right after ``DefaultFlowCallback`` instead, so
TensorBoard and W&B receive the metrics in the same record as the reward (no second ``log``
call, no recursion).

transformers is an optional dependency (``pip install 'bayesgrpo[trl]'``); importing this module
without it raises an ``ImportError`` that says so. ``import bayesgrpo`` never imports it.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

try:
    from transformers import TrainerCallback
    from transformers.trainer_callback import DefaultFlowCallback
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "bayesgrpo.integrations.trl needs transformers (and, for GRPO, trl): install the extra with "
        "`pip install 'bayesgrpo[trl]'` (CPU-only torch first: `pip install torch --index-url "
        "https://download.pytorch.org/whl/cpu`)"
    ) from exc

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.logs.readers.trl.state import history_store
from bayesgrpo.questions.stopping import PlateauRule

if TYPE_CHECKING:
    import pandas as pd

    from bayesgrpo.questions.live import LiveForecaster, LiveUpdate
    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.questions.stopping import Decision, StoppingRule
    from bayesgrpo.logs.table import RunsTable

logger = logging.getLogger(__name__)

#: Prefix of every metric the callback logs (TensorBoard shows them as ``train/bayesgrpo/...``).
PREFIX = "bayesgrpo/"
#: Interval of ``forecast_final_low`` / ``forecast_final_high``.
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
    from bayesgrpo.errors import EmptyLogError, UnknownMetricError
    from bayesgrpo.logs.readers import ReadOptions, Source
    from bayesgrpo.logs.readers._records import tidy_run
    from bayesgrpo.logs.readers.trl.columns import TRL_REWARD_CANDIDATES, trl_run
    from bayesgrpo.logs.readers.trl.metadata import state_metadata
    from bayesgrpo.logs.report import ReadReport
    from bayesgrpo.logs.table import RunsTable

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
    same at every update of a run, and building it costs more than the points."""
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
    import pandas as pd

    from bayesgrpo.logs.readers import merge_metadata
    from bayesgrpo.logs.table import coerce_metadata

    run_id = stated["run_id"]
    merged, notes = merge_metadata(pd.DataFrame([stated]), {run_id: given} if given else None)
    return coerce_metadata(merged), list(notes)


def forecast_keys(reward_key: str | None = None) -> frozenset[str]:
    """The logged metrics a live update reads: the reward (``reward_key`` or the TRL defaults)
    and the completion length (the ``compute`` progress axis)."""
    from bayesgrpo.logs.readers.trl.columns import TRL_REWARD_CANDIDATES

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
    per_device = _positive(getattr(args, "per_device_train_batch_size", None))
    accumulation = _positive(getattr(args, "gradient_accumulation_steps", None))
    world = _positive(getattr(args, "world_size", None))
    if per_device is not None and accumulation is not None and world is not None:
        out["samples_per_step"] = per_device * accumulation * world
    group = _positive(getattr(args, "num_generations", None))
    if group is not None:
        out["group_size"] = group
    learning_rate = _positive(getattr(args, "learning_rate", None))
    if learning_rate is not None:
        out["learning_rate"] = learning_rate
    name = type(args).__name__
    if name.endswith("Config") and name != "Config":
        out["algorithm"] = name.removesuffix("Config").lower()
    return out


def _positive(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def state_values(state: Any) -> dict[str, Any]:
    """The top-level ``TrainerState`` values the TRL reader turns into metadata."""
    from bayesgrpo.logs.readers.trl.columns import STATE_EXTRA, STATE_METADATA

    values = {key: getattr(state, key, None) for key in (*STATE_METADATA, *STATE_EXTRA)}
    if _positive(values.get("max_steps")) is None:
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
        ``bayesgrpo/p_plateau``, ``bayesgrpo/expected_gain``, ``bayesgrpo/forecast_final``,
        ``bayesgrpo/forecast_final_low``, ``bayesgrpo/forecast_final_high``, ``bayesgrpo/stop``,
        as Python floats.
    """
    from bayesgrpo.questions.stopping import prob_gain_below, reward_at

    draws = update.curve_draws
    p_plateau = prob_gain_below(draws, update.step, update.horizon_step, eps=eps, relative=relative)[0]
    final = reward_at(draws, [update.horizon_step])[:, 0, 0]
    tail = (1.0 - interval) / 2.0
    low, high = np.quantile(final, [tail, 1.0 - tail])
    return {
        f"{PREFIX}p_plateau": float(p_plateau),
        f"{PREFIX}expected_gain": float(decision.expected_gain),
        f"{PREFIX}forecast_final": float(final.mean()),
        f"{PREFIX}forecast_final_low": float(low),
        f"{PREFIX}forecast_final_high": float(high),
        f"{PREFIX}stop": 1.0 if decision.stop else 0.0,
    }


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
    """

    step: float
    horizon_step: float
    n_points: int
    metrics: Mapping[str, float]
    decision: Decision
    acted: bool
    seconds: float


# --------------------------------------------------------------------------------------------
# the callback
# --------------------------------------------------------------------------------------------


def resolve_prior(prior: str | Path | RewardModel | None) -> RewardModel:
    """The population a live update starts from: the bundled one, a saved file, or a model."""
    from bayesgrpo.model.reward_model import RewardModel

    if prior is None:
        from bayesgrpo.model.datasets import bundled_population

        return bundled_population()
    if isinstance(prior, (str, Path)):
        return RewardModel.load(prior)
    if isinstance(prior, RewardModel):
        return prior
    raise BayesGRPOError(
        f"prior must be None (the bundled population), a path to a saved RewardModel or a RewardModel; "
        f"got {type(prior).__name__}"
    )


class BayesStopCallback(TrainerCallback):
    """Forecast the reward curve every ``every`` training logs; stop the run when the rule says so.

    Parameters
    ----------
    rule : StoppingRule, optional
        Anything with ``decide(curve_draws, step_now, horizon_step) -> list[Decision]``
        (:class:`~bayesgrpo.questions.stopping.PlateauRule`, ``BudgetRule``, ``TargetRule``). Default
        ``PlateauRule(eps=0.01, prob=0.9)``.
    every : int
        Forecast at every ``every``-th training log (evaluation and summary logs do not count).
    prior : str, Path, RewardModel or None
        The population: ``None`` for the bundled one (:func:`bayesgrpo.model.datasets.bundled_population`),
        a file written by ``RewardModel.save``, or a fitted model. Loaded at the first update, once.
    mode : {"stop", "advise"}
        ``"stop"`` sets ``control.should_training_stop`` on a stop decision; ``"advise"`` only
        logs it.
    horizon : float, optional
        The step the run is planned to end at; default ``state.max_steps``.
    reward_key : str, optional
        The logged metric to forecast; default as the TRL reader (``reward``, then
        ``objective/scores``, ``objective/rlhf_reward``).
    metadata : mapping, optional
        The run's metadata (``family``, ``size_b``, ``task``, ``reward_min``/``reward_max``...):
        it places the run in the population. Wins over what the trainer's arguments state.
    eps : float, optional
        The ``eps`` of ``bayesgrpo/p_plateau``; default the rule's ``eps`` (0.01 if it has none).
    min_points : int
        Reward points needed before the first forecast.
    n_draws : int
        Draws of the live update.
    random_seed : int
        Fixed so that every process of a distributed run makes the same decision.
    run_id : str, optional
        Default: ``args.run_name``, else the output folder's name.

    Attributes
    ----------
    history : list of ForecastRecord
        Every update, in order.
    last_decision : Decision or None
    last_update : LiveUpdate or None
    failures : int
        Updates that raised (training went on; the first is logged as a warning).
    last_error : Exception or None
    stopped_at : int or None
        The step at which the callback stopped training.

    Examples
    --------
    >>> cb = BayesStopCallback(every=5, metadata={"family": "qwen2.5", "size_b": 1.5})  # doctest: +SKIP
    >>> trainer = GRPOTrainer(model=..., args=..., reward_funcs=..., train_dataset=...)  # doctest: +SKIP
    >>> cb.attach(trainer)  # before the TensorBoard/W&B callbacks  # doctest: +SKIP
    >>> trainer.train()  # doctest: +SKIP
    >>> cb.last_decision.reason  # doctest: +SKIP
    """

    def __init__(
        self,
        rule: StoppingRule | None = None,
        every: int = 1,
        prior: str | Path | RewardModel | None = None,
        mode: str = "stop",
        horizon: float | None = None,
        reward_key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        eps: float | None = None,
        min_points: int = 5,
        n_draws: int = 1000,
        random_seed: int = 0,
        run_id: str | None = None,
    ) -> None:
        self.rule = PlateauRule(eps=0.01, prob=0.9) if rule is None else rule
        if not callable(getattr(self.rule, "decide", None)):
            raise BayesGRPOError(
                f"rule must have a decide(curve_draws, step_now, horizon_step) method; got {self.rule!r}"
            )
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise BayesGRPOError(
                f"every must be a whole number >= 1 (training logs between forecasts); got {every!r}"
            )
        if mode not in MODES:
            raise BayesGRPOError(f"mode must be one of {MODES}; got {mode!r}")
        if horizon is not None and _positive(horizon) is None:
            raise BayesGRPOError(f"horizon must be a step > 0; got {horizon!r}")
        if isinstance(min_points, bool) or not isinstance(min_points, int) or min_points < 1:
            raise BayesGRPOError(f"min_points must be a whole number >= 1; got {min_points!r}")
        if isinstance(prior, (str, Path)) and not Path(prior).is_file():
            raise BayesGRPOError(
                f"prior file {prior} does not exist; pass a file written by RewardModel.save, or None"
            )
        if prior is not None and not isinstance(prior, (str, Path)):
            from bayesgrpo.model.reward_model import RewardModel

            if not isinstance(prior, RewardModel):
                raise BayesGRPOError(
                    f"prior must be None, a path or a RewardModel; got {type(prior).__name__}"
                )
        self.prior = prior
        self.every = every
        self.mode = mode
        self.horizon = None if horizon is None else float(horizon)
        self.reward_key = reward_key
        self.metadata = dict(metadata or {})
        self.eps = float(getattr(self.rule, "eps", 0.01)) if eps is None else float(eps)
        self.relative = bool(getattr(self.rule, "relative", False)) if eps is None else False
        self.min_points = min_points
        self.n_draws = n_draws
        self.random_seed = random_seed
        self.run_id = run_id
        self.history: list[ForecastRecord] = []
        self.last_decision: Decision | None = None
        self.last_update: LiveUpdate | None = None
        self.failures = 0
        self.last_error: BaseException | None = None
        self.stopped_at: int | None = None
        self._forecaster: LiveForecaster | None = None
        self._load_error: BaseException | None = None
        self._train_logs = 0
        self._attached = False
        self._told_about_order = False

    # -- placement -------------------------------------------------------------------------

    def attach(self, trainer: Any) -> BayesStopCallback:
        """Add the callback to ``trainer`` right after ``DefaultFlowCallback``.

        There it runs before the reporting callbacks (TensorBoard, W&B...), which then log the
        forecast in the same record as the reward. Moves it there if it was already added.

        Returns
        -------
        BayesStopCallback
            ``self``.
        """
        callbacks = trainer.callback_handler.callbacks
        if self in callbacks:
            callbacks.remove(self)
        index = next((i + 1 for i, cb in enumerate(callbacks) if isinstance(cb, DefaultFlowCallback)), 0)
        callbacks.insert(index, self)
        self._attached = True
        return self

    # -- events ----------------------------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._train_logs = 0

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        from bayesgrpo.logs.readers.trl.metadata import is_eval, is_summary

        if logs is None or is_eval(logs) or is_summary(logs):
            return control
        self._train_logs += 1
        if self._train_logs % self.every:
            return control
        metrics = self.forecast(args, state)
        if metrics is None:
            return control
        logs.update(metrics)
        entry = state.log_history[-1] if state.log_history else None
        if isinstance(entry, dict) and entry.get("step") == state.global_step:
            entry.update(metrics)  # Trainer.log appended a copy of logs before calling on_log
        self._tell_about_order(args)
        record = self.history[-1]
        if record.acted:
            control.should_training_stop = True
            self.stopped_at = int(state.global_step)
            logger.info(
                "bayesgrpo: stopping training at step %d: %s", state.global_step, record.decision.reason
            )
        elif record.decision.stop and record.step < record.horizon_step:
            logger.info(
                "bayesgrpo (advise): the rule would stop at step %d: %s",
                state.global_step,
                record.decision.reason,
            )
        return control

    # -- the update ------------------------------------------------------------------------

    def forecast(self, args: Any, state: Any) -> dict[str, float] | None:
        """Forecast from ``state.log_history`` now; the logged metrics, or None.

        None when the run has fewer than ``min_points`` reward points, or when the update
        failed (counted in ``failures``; training is never interrupted by it).
        """
        start = time.perf_counter()
        try:
            return self._forecast(args, state, start)
        except Exception as exc:  # noqa: BLE001 - a forecast must never end a training run
            self.failures += 1
            self.last_error = exc
            if self.failures == 1:
                logger.warning(
                    "bayesgrpo: forecast at step %s failed (%s: %s); training goes on, later failures are "
                    "logged at debug level and counted in callback.failures",
                    getattr(state, "global_step", "?"),
                    type(exc).__name__,
                    exc,
                )
            else:
                logger.debug("bayesgrpo: forecast failed again (%d): %s", self.failures, exc)
            return None

    def _forecast(self, args: Any, state: Any, start: float) -> dict[str, float] | None:
        run_id = self.run_id or _run_id(args)
        metadata = {**trainer_metadata(args), **self.metadata}
        table = log_history_table(
            state.log_history,
            run_id=run_id,
            reward_key=self.reward_key,
            state_values=state_values(state),
            metadata=metadata,
            keep=forecast_keys(self.reward_key),
        )
        n_points = int(np.isfinite(table.points["reward"].to_numpy(dtype=float)).sum())
        if n_points < self.min_points:
            return None
        forecaster = self._get_forecaster()
        horizon = self.horizon if self.horizon is not None else _positive(getattr(state, "max_steps", None))
        if horizon is None:
            raise BayesGRPOError(
                "no horizon: state.max_steps is not set; pass BayesStopCallback(horizon=<the step the run ends at>)"
            )
        from bayesgrpo.model.laplace import single_threaded_blas

        with single_threaded_blas():
            update = forecaster.update(table, horizon=horizon)
            decision = self.rule.decide(
                update.curve_draws, step_now=update.step, horizon_step=update.horizon_step
            )[0]
            metrics = forecast_metrics(update, decision, eps=self.eps, relative=self.relative)
        # at the horizon itself the rule says stop because no step remains: nothing to act on
        acted = decision.stop and self.mode == "stop" and update.step < update.horizon_step
        self.last_update = update
        self.last_decision = decision
        self.history.append(
            ForecastRecord(
                update.step,
                update.horizon_step,
                n_points,
                metrics,
                decision,
                acted,
                time.perf_counter() - start,
            )
        )
        return metrics

    def _get_forecaster(self) -> LiveForecaster:
        if self._forecaster is None:
            if self._load_error is not None:
                raise BayesGRPOError(f"the prior could not be loaded: {self._load_error}")
            from bayesgrpo.questions.live import LiveForecaster

            try:
                self._forecaster = LiveForecaster(
                    resolve_prior(self.prior), n_draws=self.n_draws, random_seed=self.random_seed
                )
            except Exception as exc:
                self._load_error = exc
                raise
        return self._forecaster

    def _tell_about_order(self, args: Any) -> None:
        if self._attached or self._told_about_order or not _reports(args):
            return
        self._told_about_order = True
        logger.warning(
            "bayesgrpo: the forecast metrics are in trainer_state.json and the printed logs but not in "
            "the report_to integrations (%s), which ran before this callback; add it with "
            "callback.attach(trainer) instead of callbacks=[...] to have them there",
            args.report_to,
        )

    # -- for users -------------------------------------------------------------------------

    def history_frame(self) -> pd.DataFrame:
        """The updates as a table: step, horizon, points, the logged metrics, decision, reason."""
        import pandas as pd

        rows = [
            {
                "step": record.step,
                "horizon_step": record.horizon_step,
                "n_points": record.n_points,
                **{k.removeprefix(PREFIX): v for k, v in record.metrics.items()},
                "decision": record.decision.decision,
                "acted": record.acted,
                "reason": record.decision.reason,
                "seconds": record.seconds,
            }
            for record in self.history
        ]
        return pd.DataFrame(rows)


def _run_id(args: Any) -> str:
    name = getattr(args, "run_name", None)
    if name:
        return str(name)
    output = getattr(args, "output_dir", None)
    return Path(str(output)).name if output else "run"


def _reports(args: Any) -> bool:
    """Whether the trainer reports to any integration (``report_to``)."""
    report_to = getattr(args, "report_to", None)
    if report_to is None:
        return False
    if isinstance(report_to, str):
        report_to = [report_to]
    return any(str(r) != "none" for r in report_to)


__all__ = [
    "FORECAST_INTERVAL",
    "PREFIX",
    "BayesStopCallback",
    "ForecastRecord",
    "forecast_keys",
    "forecast_metrics",
    "history_store",
    "log_history_table",
    "resolve_prior",
    "state_values",
    "trainer_metadata",
]
