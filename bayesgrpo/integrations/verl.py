"""verl: a stop hook fed with the metrics verl logs each step. Does not import verl.

What verl offers (read in the verl 0.9.1 wheel, whose default trainer is the V1 ``PPOTrainer``,
``trainer.use_v1: true``; the legacy ``RayPPOTrainer`` shipped beside it works the same way)
---------------------------------------------------------------------------------------------
- Every step's metrics go through one call: ``Tracking.log(data=metrics, step=global_steps)``
  (``verl/trainer/ppo/v1/trainer_base.py`` line 514 in ``PPOTrainer.fit``; the legacy
  ``RayPPOTrainer.fit``, ``verl/trainer/ppo/ray_trainer.py`` line 1802), and
  ``Tracking.log`` (``verl/utils/tracking.py`` lines 191-194) calls
  ``backend.log(data=data, step=step)`` on every object in its ``logger`` dict.
- Those backends cannot be extended from the config: ``trainer.logger`` names are checked
  against a fixed ``supported_backend`` list (``tracking.py`` lines 49-60, assert at line 71).
  So a custom backend is added to a ``Tracking`` *instance*: the V1 trainer keeps it as
  ``self.logger`` (``trainer_base.py`` line 423) before calling its ``on_train_begin`` hook
  (line 465; a method a ``PPOTrainer`` subclass overrides, registered with ``register_trainer``
  and chosen with ``trainer.v1.trainer_mode``); the legacy trainer makes it a local of ``fit``, reachable
  only by wrapping ``Tracking.__init__`` (:func:`install`).
- A run ends cleanly when ``global_steps >= total_training_steps`` at the top of a step: that
  step saves a checkpoint and validates (``is_last_step``, ``trainer_base.py`` lines 467-468,
  481-485, 491-492; ``ray_trainer.py`` line 1507). Lowering ``trainer.total_training_steps`` from
  the hook stops the run after one more step, with its checkpoint (:func:`stop_after_next_step`).
- Without code: ``trainer.logger=['console','tensorboard']`` writes the console lines and the
  event folder ``tensorboard_log/<project>/<experiment>`` (``$TENSORBOARD_DIR``) that
  ``bayesgrpo watch`` follows.

Here
----
:class:`BayesStopHook` is both: ``hook(metrics, step) -> Decision | None`` for a loop of your
own, and a ``Tracking`` backend (``hook.log(data=..., step=...)``, errors logged, never raised
into training). :func:`attach` adds it to a ``Tracking`` instance; :func:`install` to every
``Tracking`` made afterwards.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.logs.readers.verl.config import metadata_from_config
from bayesgrpo.logs.table import RunsTable, coerce_metadata
from bayesgrpo.questions.live import live_forecaster
from bayesgrpo.questions.stopping import default_rule

if TYPE_CHECKING:
    from bayesgrpo.questions.live import LiveForecaster, LiveUpdate
    from bayesgrpo.questions.stopping import Decision, StoppingRule

logger = logging.getLogger(__name__)

#: The key under which :func:`attach` registers the hook in ``Tracking.logger``.
BACKEND_NAME = "bayesgrpo"
#: Train reward metrics verl logs, in order of preference (as ``bayesgrpo.logs.readers.verl``).
REWARD_KEYS: tuple[str, ...] = ("critic/score/mean", "critic/rewards/mean")


def _plain(value: Any) -> Any:
    """A config (OmegaConf ``DictConfig`` or mappings of mappings) as plain dicts."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _number(value: Any) -> float | None:
    """A logged metric as a float (numpy and torch scalars included), None if not a finite number."""
    if hasattr(value, "item") and callable(value.item):
        try:
            value = value.item()
        except (TypeError, ValueError):
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


class BayesStopHook:
    """Stop advice for a verl run from the metrics it logs, conditioned on a population.

    Parameters
    ----------
    rule : StoppingRule, optional
        Default :func:`~bayesgrpo.questions.stopping.default_rule`, ``FixedBudgetRule(0.65)``: stop at
        65% of ``horizon``, the posterior's P(plateau) and expected gain beside it as information.
    prior : RewardModel, LiveForecaster, path of a saved model, or None
        The population a new run is placed in (its prior); default the population shipped with
        bayesgrpo (``bayesgrpo.model.datasets.bundled_population()``), loaded at the first decision.
    horizon : float, optional
        The step the run is planned to end at (verl's ``trainer.total_training_steps``); default
        ``metadata["total_steps"]``.
    reward : str, optional
        The metric to forecast; default the first of :data:`REWARD_KEYS` logged.
    run_id : str
    metadata : mapping, optional
        What the population conditions on: ``family``, ``size_b``, ``task``, ``group_size``,
        ``batch_size``, ``total_steps``, and the reward's bounds ``reward_min``/``reward_max``
        when known (verl's rule-based GSM8K/MATH scores: 0 and 1; DAPO's: -1 and 1); unknown
        bounds are taken from the data, as for a log read from disk.
    min_points : int
        Rewards logged before the first decision.
    every : int
        Decide at every ``every``-th logged reward (1: each step).
    on_stop : callable, optional
        Called once, with the :class:`~bayesgrpo.questions.stopping.Decision`, the first time the rule says
        stop (e.g. :func:`stop_after_next_step`).
    random_seed : int, optional

    Attributes
    ----------
    points : dict of int to float
        The rewards received (a step logged again keeps its latest value).
    last_decision : Decision or None
    last_update : LiveUpdate or None
    stop_requested : bool

    Examples
    --------
    >>> hook = BayesStopHook(horizon=500, metadata={"family": "qwen", "size_b": 7})  # doctest: +SKIP
    >>> for step in range(1, 501):  # doctest: +SKIP
    ...     decision = hook(metrics_of(step), step)
    ...     if decision is not None and decision.stop:
    ...         break
    """

    def __init__(
        self,
        rule: StoppingRule | None = None,
        prior: Any = None,
        horizon: float | None = None,
        *,
        reward: str | None = None,
        run_id: str = "verl-run",
        metadata: Mapping[str, Any] | None = None,
        min_points: int = 5,
        every: int = 1,
        on_stop: Callable[[Decision], Any] | None = None,
        random_seed: int | None = 1,
    ) -> None:
        if rule is None:
            rule = default_rule()
        if int(min_points) < 1 or int(every) < 1:
            raise BayesGRPOError(f"min_points and every must be at least 1; got {min_points} and {every}")
        self.rule = rule
        self.prior = prior
        self.reward = reward
        self.run_id = str(run_id)
        self.metadata = dict(metadata or {})
        self.horizon = float(horizon) if horizon is not None else _number(self.metadata.get("total_steps"))
        self.min_points = int(min_points)
        self.every = int(every)
        self.on_stop = on_stop
        self.random_seed = random_seed
        self.points: dict[int, float] = {}
        self.last_decision: Decision | None = None
        self.last_update: LiveUpdate | None = None
        self.stop_requested = False
        self._live: LiveForecaster | None = None
        self._received = 0

    @classmethod
    def from_verl_config(
        cls, config: Mapping[str, Any], *, horizon: float | None = None, **kwargs: Any
    ) -> BayesStopHook:
        """A hook whose metadata and horizon come from verl's resolved config.

        Reads what ``bayesgrpo.logs.readers.verl`` reads from a logged config: ``group_size`` =
        ``actor_rollout_ref.rollout.n``, ``batch_size`` = ``data.train_batch_size``, ``model``,
        ``algorithm``, ``total_steps`` = ``trainer.total_training_steps`` (often null: pass
        ``horizon=trainer.total_training_steps``, which verl computes from the epochs); the run id
        is ``trainer.experiment_name``. Keyword arguments go to the constructor (``metadata``
        given there wins).
        """
        plain = _plain(config)
        stated = metadata_from_config(plain)
        trainer = plain.get("trainer", {}) if isinstance(plain.get("trainer"), dict) else {}
        metadata = {**stated, **dict(kwargs.pop("metadata", None) or {})}
        if horizon is None:
            horizon = _number(metadata.get("total_steps"))
        run_id = kwargs.pop("run_id", None) or str(trainer.get("experiment_name") or "verl-run")
        return cls(horizon=horizon, run_id=run_id, metadata=metadata, **kwargs)

    # -- the decision --------------------------------------------------------------------------

    @property
    def live(self) -> LiveForecaster:
        """The live forecaster, made on first use from ``prior``."""
        if self._live is None:
            self._live = live_forecaster(self.prior, self.random_seed)
        return self._live

    def _reward_of(self, metrics: Mapping[str, Any]) -> float | None:
        if self.reward is None:
            key = next((k for k in REWARD_KEYS if _number(metrics.get(k)) is not None), None)
            if key is None:
                return None
            self.reward = key
            logger.info("bayesgrpo verl hook: forecasting %r", key)
        return _number(metrics.get(self.reward))

    def table(self) -> RunsTable:
        """The rewards received so far as a one-run table (what the population is conditioned on)."""
        steps = sorted(self.points)
        points = pd.DataFrame(
            {
                "run_id": pd.Series([self.run_id] * len(steps), dtype="string"),
                "step": np.array(steps, dtype=np.int64),
                "reward": np.array([self.points[s] for s in steps], dtype=float),
            }
        )
        runs = {"run_id": self.run_id, "format": "verl-hook", "reward_key": self.reward, **self.metadata}
        if self.horizon is not None:
            runs["total_steps"] = self.horizon
        return RunsTable(points=points, runs=coerce_metadata(pd.DataFrame([runs])))

    def __call__(self, metrics: Mapping[str, Any], step: int) -> Decision | None:
        """Take one step's metrics; return the rule's decision when one is due, else None.

        None when the step logs no reward (verl's validation-only step 0), fewer than
        ``min_points`` rewards were received, or it is not an ``every``-th reward.

        Raises
        ------
        BayesGRPOError
            No horizon (give ``horizon=``), or a step past it.
        """
        value = self._reward_of(metrics)
        if value is None:
            return None
        self.points[int(step)] = value
        self._received += 1
        if len(self.points) < self.min_points or (self._received - self.min_points) % self.every:
            return None
        return self.decide(int(step))

    def decide(self, step: int | None = None) -> Decision:
        """Condition the population on the rewards so far and ask the rule (at ``step``, default
        the last step received).
        """
        if not self.points:
            raise BayesGRPOError("no reward received yet: nothing to decide on")
        if self.horizon is None:
            raise BayesGRPOError(
                "no horizon: pass horizon= (verl's trainer.total_training_steps) or metadata total_steps"
            )
        step = max(self.points) if step is None else int(step)
        if step > self.horizon:
            raise BayesGRPOError(f"step {step} is past the horizon {self.horizon:g}; pass a larger horizon")
        update = self.live.update(self.table(), horizon=self.horizon)
        decision = self.rule.decide(update.curve_draws, float(step), self.horizon)[0]
        self.last_update, self.last_decision = update, decision
        if decision.stop and not self.stop_requested:
            self.stop_requested = True
            range_note = update.range_note() if callable(getattr(update, "range_note", None)) else ""
            logger.warning(
                "bayesgrpo: stop advised at step %d: %s%s",
                step,
                decision.reason,
                f" ({range_note})" if range_note else "",
            )
            if self.on_stop is not None:
                self.on_stop(decision)
        return decision

    # -- verl's Tracking backend protocol ---------------------------------------------------------

    def log(self, data: Mapping[str, Any], step: int) -> None:
        """What ``Tracking.log`` calls on each backend; never raises into the training loop."""
        try:
            self(data, step)
        except Exception as exc:  # noqa: BLE001 - a forecast problem must never stop training
            logger.warning("bayesgrpo verl hook: no decision at step %s: %s", step, exc)

    def finish(self, *args: Any, **kwargs: Any) -> None:
        """What ``Tracking`` calls on backends it finishes (nothing to flush)."""


# --------------------------------------------------------------------------------------------
# Wiring into verl (duck-typed: verl is not imported unless asked to)
# --------------------------------------------------------------------------------------------


def attach(hook: BayesStopHook, tracking: Any, name: str = BACKEND_NAME) -> Any:
    """Add the hook as a backend of a verl ``Tracking`` instance (``trainer.logger`` in V1).

    Returns the instance. Raises BayesGRPOError when it has no ``logger`` dict of backends.
    """
    backends = getattr(tracking, "logger", None)
    if not isinstance(backends, dict):
        raise BayesGRPOError(
            f"{type(tracking).__name__} has no 'logger' dict of backends: pass verl's Tracking instance "
            "(verl.utils.tracking.Tracking; the V1 trainer keeps it as trainer.logger)"
        )
    backends[name] = hook
    return tracking


def install(
    hook: BayesStopHook, tracking_cls: type | None = None, name: str = BACKEND_NAME
) -> Callable[[], None]:
    """Add the hook to every ``Tracking`` made from now on (for the legacy ``RayPPOTrainer``,
    whose ``fit`` keeps its ``Tracking`` in a local variable).

    Must run in the process that calls ``trainer.fit()`` (verl's ``TaskRunner`` Ray actor).

    Parameters
    ----------
    hook : BayesStopHook
    tracking_cls : type, optional
        Default ``verl.utils.tracking.Tracking`` (imported here, and only here).
    name : str

    Returns
    -------
    callable
        Undoes the installation.
    """
    if tracking_cls is None:
        from verl.utils.tracking import Tracking as tracking_cls  # type: ignore[no-redef]  # the default class
    original = getattr(tracking_cls, "__init__")  # noqa: B009 - the class's own __init__, replaced below

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        attach(hook, self, name)

    setattr(tracking_cls, "__init__", __init__)  # noqa: B010 - patching a class attribute on purpose

    def uninstall() -> None:
        setattr(tracking_cls, "__init__", original)  # noqa: B010 - restores the original

    return uninstall


def stop_after_next_step(trainer: Any) -> Callable[[Decision], None]:
    """An ``on_stop`` that ends a verl run cleanly after one more step.

    Sets ``trainer.total_training_steps`` to the step after the decision: verl's loop makes
    that step its last (``is_last_step``), saving a checkpoint and validating, then returns.
    """

    def stop(decision: Decision) -> None:
        last = int(decision.step) + 1
        current = getattr(trainer, "total_training_steps", None)
        trainer.total_training_steps = last if current is None else min(int(current), last)
        logger.warning(
            "bayesgrpo: verl run set to end at step %d (%s)", trainer.total_training_steps, decision.reason
        )

    return stop


__all__ = ["BACKEND_NAME", "REWARD_KEYS", "BayesStopHook", "attach", "install", "stop_after_next_step"]
