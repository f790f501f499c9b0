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
   ``bayesgrpo/p_plateau``                   ``P(R(T) - R(s) < eps)``, the rule's plateau eps
   ``bayesgrpo/expected_gain``               expected reward still to gain by the horizon
   ``bayesgrpo/forecast_final``              expected reward at the horizon (posterior mean)
   ``bayesgrpo/forecast_final_predictive_*`` 90% band (``_low``/``_high``: 5% and 95%) of a
                                             logged reward at the horizon, noise included
   ``bayesgrpo/forecast_final_curve_*``      90% band of the expected reward there (narrower)
   ``bayesgrpo/pareto_k``                    the live update's importance-weight diagnostic
                                             (above 0.7 it answered from its MCMC fallback)
   ``bayesgrpo/recent_rise``                 the logged reward's rise over the run's latest
                                             tenth (least squares), reward units
   ``bayesgrpo/held_while_rising``           1.0 when the rule held a stop because of it
                                             (the default rule's rise guard)
   ``bayesgrpo/stopped_flat``                1.0 when the rule's opt-in flat stop stopped the
                                             run (``GuardedBudgetRule(flat_eps=...)`` only)
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

import logging
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

try:
    from transformers import TrainerCallback
    from transformers.trainer_callback import DefaultFlowCallback
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "bayesgrpo.integrations.trl needs transformers (and, for GRPO, trl): install the extra with `pip "
        "install 'bayesgrpo[trl]'` (CPU-only torch first: `pip install torch --index-url "
        "https://download.pytorch.org/whl/cpu`)"
    ) from exc

import pandas as pd

from bayesgrpo.errors import BayesGRPOError, ForecastDepartureWarning
from bayesgrpo.integrations.trainer_history import (
    FORECAST_INTERVAL,
    MODES,
    PREFIX,
    ForecastRecord,
    forecast_keys,
    forecast_metrics,
    log_history_table,
    positive_or_none,
    state_values,
    trainer_metadata,
)
from bayesgrpo.logs.readers.trl.metadata import is_eval, is_summary
from bayesgrpo.logs.readers.trl.state import history_store
from bayesgrpo.model.laplace import single_threaded_blas
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.questions.live import LiveForecaster, resolve_population
from bayesgrpo.questions.stopping import DEFAULT_PLATEAU_EPS, default_rule

if TYPE_CHECKING:
    import pandas as pd

    from bayesgrpo.questions.live import LiveUpdate
    from bayesgrpo.questions.stopping import Decision, StoppingRule

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# the callback
# --------------------------------------------------------------------------------------------


def resolve_prior(prior: str | Path | RewardModel | None) -> RewardModel:
    """The population a live update starts from: the bundled one, a saved file, or a model."""
    return resolve_population(prior)


class BayesStopCallback(TrainerCallback):
    """Forecast the reward curve every ``every`` training logs; stop the run when the rule says so.

    Parameters
    ----------
    rule : StoppingRule, optional
        Anything with ``decide(curve_draws, step_now, horizon_step) -> list[Decision]``
        (:class:`~bayesgrpo.questions.stopping.PlateauRule`, ``BudgetRule``, ``TargetRule``). Default
        :func:`~bayesgrpo.questions.stopping.default_rule`, ``FixedBudgetRule(0.65)``: stop at 65% of
        ``max_steps``, the posterior's P(plateau) and expected gain beside it as information.
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
        The ``eps`` of ``bayesgrpo/p_plateau``; default the rule's plateau threshold, its
        ``plateau_eps`` (1% of the reward range for the default rule; the ``early_eps`` of a
        ``GuardedBudgetRule``; a ``PlateauRule``'s ``eps``), 0.01 where the rule has none.
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
        self.rule = default_rule() if rule is None else rule
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
        if horizon is not None and positive_or_none(horizon) is None:
            raise BayesGRPOError(f"horizon must be a step > 0; got {horizon!r}")
        if isinstance(min_points, bool) or not isinstance(min_points, int) or min_points < 1:
            raise BayesGRPOError(f"min_points must be a whole number >= 1; got {min_points!r}")
        if isinstance(prior, (str, Path)) and not Path(prior).is_file():
            raise BayesGRPOError(
                f"prior file {prior} does not exist; pass a file written by RewardModel.save, or None"
            )
        if prior is not None and not isinstance(prior, (str, Path)):
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
        # the rule's plateau threshold (StoppingRule's plateau_eps; a rule of one's own may have none)
        rule_eps = getattr(self.rule, "plateau_eps", None)
        if rule_eps is None:
            rule_eps = DEFAULT_PLATEAU_EPS
        self.eps = float(rule_eps) if eps is None else float(eps)
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
        self._departed = False
        #: What turning the log history into a run repaired or dropped (the last time it did)
        self.repairs: str | None = None
        self._repair_kinds: set[tuple[str, str]] = set()

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
        """Forget the forecasts of a previous ``train()`` call."""
        self._train_logs = 0

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        """Forecast the run from the trainer's log history every ``every`` logs; log, advise or stop."""
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
                "bayesgrpo: stopping training at step %d: %s%s",
                state.global_step,
                record.decision.reason,
                f" ({record.range_note})" if record.range_note and self.relative else "",
            )
        elif record.decision.stop and record.step < record.horizon_step:
            logger.info(
                "bayesgrpo (advise): the rule would stop at step %d: %s%s",
                state.global_step,
                record.decision.reason,
                f" ({record.range_note})" if record.range_note and self.relative else "",
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
        repairs = table.report.repair_line()
        kinds = {(issue.kind, issue.action) for issue in table.report.issues if issue.action != "info"}
        if kinds - self._repair_kinds:
            # said once for each new kind of repair, never silently (the counts grow as training logs)
            logger.warning(
                "bayesgrpo: reading the trainer's log history repaired or dropped records (%s)", repairs
            )
            self._repair_kinds |= kinds
        self.repairs = repairs
        n_points = int(np.isfinite(table.points["reward"].to_numpy(dtype=float)).sum())
        if n_points < self.min_points:
            return None
        forecaster = self._get_forecaster()
        horizon = (
            self.horizon if self.horizon is not None else positive_or_none(getattr(state, "max_steps", None))
        )
        if horizon is None:
            raise BayesGRPOError(
                "no horizon: state.max_steps is not set; pass BayesStopCallback(horizon=<the step the run "
                "ends at>)"
            )

        with single_threaded_blas(), warnings.catch_warnings():
            # said once in the log below and at every forecast in bayesgrpo/departed, not at each
            warnings.simplefilter("ignore", ForecastDepartureWarning)
            update = forecaster.update(table, horizon=horizon)
            decision = self.rule.decide(
                update.curve_draws, step_now=update.step, horizon_step=update.horizon_step
            )[0]
            metrics = forecast_metrics(update, decision, eps=self.eps, relative=self.relative)
        if update.departed and not self._departed:
            assert update.departure is not None  # departed says so
            logger.warning("bayesgrpo: at step %g %s", update.step, update.departure.note())
        self._departed = update.departed
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
                update.range_note() if callable(getattr(update, "range_note", None)) else "",
            )
        )
        return metrics

    def _get_forecaster(self) -> LiveForecaster:
        if self._forecaster is None:
            if self._load_error is not None:
                raise BayesGRPOError(f"the prior could not be loaded: {self._load_error}")

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
            "bayesgrpo: the forecast metrics are in trainer_state.json and the printed logs but not in the "
            "report_to integrations (%s), which ran before this callback; add it with "
            "callback.attach(trainer) instead of callbacks=[...] to have them there",
            args.report_to,
        )

    # -- for users -------------------------------------------------------------------------

    def history_frame(self) -> pd.DataFrame:
        """The updates as a table: step, horizon, points, the logged metrics, decision, reason."""
        rows = [
            {
                "step": record.step,
                "horizon_step": record.horizon_step,
                "n_points": record.n_points,
                **{k.removeprefix(PREFIX): v for k, v in record.metrics.items()},
                "decision": record.decision.decision,
                "acted": record.acted,
                "reason": record.decision.reason,
                "range_note": record.range_note,
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
