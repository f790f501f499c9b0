"""An Optuna pruner that reads each trial's intermediate values as a reward curve.

:class:`RewardCurvePruner` is an ``optuna.pruners.BasePruner``. At a trial's checks it turns the
trial's reported values into a one-run :class:`~bayesgrpo.logs.table.RunsTable` (step = the
reported step; for a minimised objective the value's negative is the "reward"), conditions it on a
population (:class:`~bayesgrpo.questions.live.LiveForecaster`: no sampling, tens of milliseconds),
and prunes when the posterior probability that the trial's final value beats the best finished
trial's falls below ``min_prob_beat_best``. Optionally (``plateau=``) it also prunes a trial whose
curve has levelled off (the plateau rule says stop) while it is unlikely to beat the best.

Like Optuna's own pruners it waits for ``n_startup_trials`` finished trials and ``n_warmup_steps``,
and checks every ``interval_steps`` (by default from 10% of each trial's horizon, every 5% of it:
at most about 20 checks a trial). It never prunes on an error, nor on a forecast whose importance
weights are unreliable (it skips the MCMC fallback that would take a second or two): a failed
forecast is logged once per kind and the trial goes on. Each check leaves its decision,
probability and reason in the trial's user attributes (``bayesgrpo:decision``,
``bayesgrpo:p_beat_best``, ``bayesgrpo:reason``, ``bayesgrpo:step``,
``bayesgrpo:final_q05/q50/q95``), so they are in the study's storage.

The population is the one shipped with bayesgrpo, a saved or fitted ``RewardModel``, or one fitted
on the study's own finished trials once there are ``fit_after`` of them (refitted when their
number has doubled, kept in memory and, with ``cache_dir``, on disk).

optuna is an optional dependency (``pip install 'bayesgrpo[optuna]'``); importing this module
without it raises an ``ImportError`` that says so. ``import bayesgrpo`` never imports it.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

try:
    import optuna
    from optuna.pruners import BasePruner
    from optuna.study import StudyDirection
    from optuna.trial import FrozenTrial, TrialState
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "bayesgrpo.integrations.optuna needs optuna: install the extra with `pip install 'bayesgrpo[optuna]'`"
    ) from exc

from bayesgrpo.errors import BayesGRPOError, FitWarning, LiveUpdateWarning
from bayesgrpo.logs.table import RunsTable, coerce_metadata
from bayesgrpo.model.laplace import check_likelihood_weight
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.questions.live import LiveForecaster, resolve_population
from bayesgrpo.questions.stopping import PlateauRule

logger = logging.getLogger(__name__)

#: Prefix of the user attributes the pruner writes on each trial it checks.
ATTR = "bayesgrpo:"
#: What a failed forecast may raise (the package's errors; numpy's LinAlgError is a ValueError).
FORECAST_ERRORS = (BayesGRPOError, ValueError, ArithmeticError)
#: The pruner's weight of a trial's reported values in its live update (a value counts for half).
#: Measured on 5 studies replayed from the bundled runs, not yet on the corpus's: it kept the mean
#: regret at 0.006 of the range (worst 0.047) where counting the values in full (1) pruned a
#: late-rising best trial and reached 0.055 (worst 0.486;
#: ``git show 3123ed6:benchmarks/results/optuna_pruning_w1.md``).
PRUNER_LIKELIHOOD_WEIGHT = 0.5


@dataclass(frozen=True)
class PruneCheck:
    """One check of one trial: what the pruner decided and why.

    Attributes
    ----------
    decision : {"prune", "continue", "undecided", "waiting", "error"}
        ``waiting``: no forecast yet (startup trials, too few points); ``undecided``: the
        forecast's importance weights were unreliable (Pareto k above the forecaster's limit), so
        it is not acted on; ``error``: the forecast failed. The trial goes on in all three.
    step : int
        The trial's last reported step.
    p_beat_best : float
        Posterior probability that the trial's final value beats the best finished trial's
        (NaN when no forecast was made).
    reason : str
    final : tuple of float
        5%, 50% and 95% quantiles of the trial's final value (objective units; NaN when none).
    """

    decision: str
    step: int
    p_beat_best: float
    reason: str
    final: tuple[float, float, float] = (math.nan, math.nan, math.nan)

    @property
    def prune(self) -> bool:
        """Whether the trial is pruned."""
        return self.decision == "prune"

    def user_attrs(self) -> dict[str, Any]:
        """The check as JSON-safe trial user attributes (NaN written as None)."""

        def plain(value: float) -> float | None:
            return None if not math.isfinite(value) else round(float(value), 6)

        return {
            f"{ATTR}decision": self.decision,
            f"{ATTR}step": int(self.step),
            f"{ATTR}p_beat_best": plain(self.p_beat_best),
            f"{ATTR}reason": self.reason,
            f"{ATTR}final_q05": plain(self.final[0]),
            f"{ATTR}final_q50": plain(self.final[1]),
            f"{ATTR}final_q95": plain(self.final[2]),
        }


class RewardCurvePruner(BasePruner):
    """Prune a trial whose reward curve will, with high probability, not beat the best trial.

    Parameters
    ----------
    horizon : int or callable
        The step every trial ends at (its last report), or ``horizon(trial) -> int`` for trials of
        different lengths (e.g. read from ``trial.params`` or ``trial.user_attrs``).
    population : RewardModel, str, Path or None
        The population the trials are conditioned on: None for the one shipped with bayesgrpo, a
        file written by ``RewardModel.save``, or a fitted model.
    min_prob_beat_best : float
        Prune when P(final value beats the best finished trial's) is below this (default 0.05).
        Higher spends fewer steps for more regret: on the corpus's replayed studies 0.05 spent
        72% of the steps at a mean regret of 0.010 of the range, 0.2 61% at 0.027
        (``benchmarks/results/optuna_pruning.md``); neither is ahead of Optuna's own pruners.
    plateau : PlateauRule, optional
        Also prune when this rule says the curve has levelled off and P(beat best) is below
        ``plateau_max_prob_beat_best``: a finished plateau that is not the best has nothing to add.
    plateau_max_prob_beat_best : float
        See ``plateau`` (default 0.5).
    final_points : int, optional
        What the trial's final value is: the mean of its last ``final_points`` reported values
        (1: the last report as it is), drawn as the curve at the horizon plus one logged value's
        noise shrunk by ``sqrt(final_points)``; None (default) the expected reward at the horizon
        itself (an objective that smooths its last evaluations well).
    n_startup_trials : int
        No pruning until this many trials have finished (default 2, the setting
        ``benchmarks/optuna_pruning.py`` measures; Optuna's ``MedianPruner`` waits for 5).
    n_warmup_steps : int, optional
        No pruning before this step; None (default): 10% of the trial's horizon.
    interval_steps : int, optional
        Check at the first reported step on or past each ``n_warmup_steps + k * interval_steps``
        (a trial that reports every 10 steps is still checked); None (default): 5% of the trial's
        horizon, so a trial is checked about 20 times however long it is (a check is tens of
        milliseconds).
    min_points : int
        Fewest finite reported values for a forecast.
    metadata : mapping or callable, optional
        The trials' metadata (``reward_min``/``reward_max``: the objective's range, which makes
        the prior sharper; ``family``, ``size_b``...), or ``metadata(trial) -> mapping``.
    study_reach : bool
        For a trial without a stated range: its whole range covers what the finished trials
        reported (the trials of a study share one objective), rather than only what its own
        values so far imply (``LiveForecaster.update(reach=...)``). Default True: a trial flat
        at its start is not read as one whose range is its noise, which would prune a late
        riser.
    fit_after : int, optional
        Fit a population on the study's own finished trials once this many have finished (and
        again each time their number doubles); until then, ``population``. None: never.
    fit_kwargs : mapping, optional
        Passed to ``RewardModel.fit`` for those fits (default 2 chains x (300 + 300) draws).
    cache_dir : str or Path, optional
        Keep the fitted populations there (``population_<study>_<n>.nc``), reused across
        processes of the same study.
    n_draws : int
        Posterior draws of each live update.
    random_seed : int, optional
    likelihood_weight : float
        The weight of a trial's reported values against the population's prior in its live
        update (``LiveForecaster(likelihood_weight=...)``), in (0, 1]. Default
        :data:`PRUNER_LIKELIHOOD_WEIGHT` (0.5: a value counts for half). On 5 studies replayed
        from the bundled runs 1 (every value in full) saved more steps and pruned a late-rising
        best trial from its flat start.
    """

    def __init__(
        self,
        horizon: int | Callable[[FrozenTrial], int],
        *,
        population: RewardModel | str | Path | None = None,
        min_prob_beat_best: float = 0.05,
        plateau: PlateauRule | None = None,
        plateau_max_prob_beat_best: float = 0.5,
        final_points: int | None = None,
        n_startup_trials: int = 2,
        n_warmup_steps: int | None = None,
        interval_steps: int | None = None,
        min_points: int = 5,
        metadata: Mapping[str, Any] | Callable[[FrozenTrial], Mapping[str, Any]] | None = None,
        study_reach: bool = True,
        fit_after: int | None = None,
        fit_kwargs: Mapping[str, Any] | None = None,
        cache_dir: str | Path | None = None,
        n_draws: int = 1000,
        random_seed: int | None = 1,
        likelihood_weight: float = PRUNER_LIKELIHOOD_WEIGHT,
    ) -> None:
        for name, value in (("min_prob_beat_best", min_prob_beat_best),
                            ("plateau_max_prob_beat_best", plateau_max_prob_beat_best)):  # fmt: skip
            if not 0.0 <= float(value) <= 1.0:
                raise BayesGRPOError(f"{name} must lie in [0, 1]; got {value!r}")
        for name, count, least in (
            ("n_startup_trials", n_startup_trials, 0),
            ("n_warmup_steps", n_warmup_steps, 0),
            ("interval_steps", interval_steps, 1),
            ("min_points", min_points, 2),
        ):
            if count is None and name in ("n_warmup_steps", "interval_steps"):
                continue
            if isinstance(count, bool) or not isinstance(count, int) or count < least:
                raise BayesGRPOError(f"{name} must be a whole number >= {least}; got {count!r}")
        if fit_after is not None and (not isinstance(fit_after, int) or fit_after < 2):
            raise BayesGRPOError(f"fit_after must be a whole number >= 2 or None; got {fit_after!r}")
        if not callable(horizon) and (not isinstance(horizon, (int, np.integer)) or horizon < 2):
            raise BayesGRPOError(f"horizon must be a step >= 2 or a callable; got {horizon!r}")
        self.horizon = horizon
        self.population = population
        self.min_prob_beat_best = float(min_prob_beat_best)
        self.plateau = plateau
        self.plateau_max_prob_beat_best = float(plateau_max_prob_beat_best)
        if final_points is not None and (isinstance(final_points, bool) or not isinstance(final_points, int)
                                         or final_points < 1):  # fmt: skip
            raise BayesGRPOError(f"final_points must be a whole number >= 1 or None; got {final_points!r}")
        self.final_points = final_points
        self.n_startup_trials = n_startup_trials
        self.n_warmup_steps = n_warmup_steps
        self.interval_steps = interval_steps
        self.min_points = min_points
        self.metadata = metadata
        self.study_reach = bool(study_reach)
        self.fit_after = fit_after
        self.fit_kwargs = {"draws": 300, "tune": 300, "chains": 2, **dict(fit_kwargs or {})}
        self.fit_kwargs["progressbar"] = False
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.n_draws = int(n_draws)
        self.random_seed = random_seed
        self.likelihood_weight = check_likelihood_weight(likelihood_weight)
        self.checks: list[PruneCheck] = []
        self._forecaster: LiveForecaster | None = None
        self._fitted_on = 0
        self._errors_said: set[str] = set()

    # optuna's interface ------------------------------------------------------------------
    def prune(self, study: optuna.study.Study, trial: FrozenTrial) -> bool:
        """Whether to prune ``trial`` now (Optuna calls this from ``trial.should_prune()``).

        A check's answer is written to the trial's user attributes (the storage API Optuna's own
        pruners use) and kept in :attr:`checks`; steps between checks write nothing.
        """
        check = self.check(study, trial)
        if check is None:
            return False
        for key, value in check.user_attrs().items():
            study._storage.set_trial_user_attr(trial._trial_id, key, value)
        self.checks.append(check)
        return check.prune

    def check(self, study: optuna.study.Study, trial: FrozenTrial) -> PruneCheck | None:
        """The decision for ``trial`` now, without writing it anywhere (what :meth:`prune` acts on).

        None when the trial's last step is not a check step (before ``n_warmup_steps``, between
        ``interval_steps``) or it has reported nothing.
        """
        step = trial.last_step
        if step is None or not self._is_check_step(trial, step):
            return None
        finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if len(finished) < self.n_startup_trials:
            reason = f"{len(finished)} of {self.n_startup_trials} startup trials finished"
            return PruneCheck("waiting", step, math.nan, reason)
        try:
            return self._forecast_check(study, trial, finished, step)
        except FORECAST_ERRORS as exc:
            kind = type(exc).__name__
            if kind not in self._errors_said:
                logger.warning(
                    "bayesgrpo pruner: the forecast of trial %d failed (%s); not pruning", trial.number, exc
                )
                self._errors_said.add(kind)
            return PruneCheck("error", step, math.nan, f"forecast failed, not pruning: {kind}: {exc}")

    # the forecast ------------------------------------------------------------------------
    def _forecast_check(
        self, study: optuna.study.Study, trial: FrozenTrial, finished: list[FrozenTrial], step: int
    ) -> PruneCheck:
        sign = 1.0 if study.direction == StudyDirection.MAXIMIZE else -1.0
        metadata = self._metadata(trial)
        table, kept, offset = trial_table(trial, sign, metadata, self._horizon(trial))
        if kept < self.min_points:
            return PruneCheck(
                "waiting", step, math.nan, f"{kept} of {self.min_points} values needed for a forecast"
            )
        forecaster = self._get_forecaster(study, finished, sign)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LiveUpdateWarning)  # the update names its method
            update = forecaster.update(
                table,
                horizon=self._horizon(trial) + offset,
                reach=self._reach(metadata, finished, sign),
                mcmc_fallback=False,
            )
        if update.posterior.pareto_k > forecaster.pareto_k_limit:
            reason = (
                f"importance weights unreliable (Pareto k {update.posterior.pareto_k:.2f} > "
                f"{forecaster.pareto_k_limit:g}): not acted on, continue"
            )
            return PruneCheck("undecided", step, math.nan, reason)
        final = update.reward_draws([update.horizon_step], band="curve")[:, 0]
        if self.final_points is not None:  # one logged value's noise, averaged over the last points
            noise = update.reward_draws([update.horizon_step], band="predictive")[:, 0] - final
            final = final + noise / math.sqrt(self.final_points)
        values = [t.value for t in finished if t.value is not None and math.isfinite(t.value)]
        best = max(sign * v for v in values)
        p_beat = float(np.mean(final > best))
        low, mid, high = (float(sign * q) for q in np.quantile(final, [0.05, 0.5, 0.95]))
        quantiles = (low, mid, high) if sign > 0 else (high, mid, low)
        best_text = f"{sign * best:.4g}"
        head = f"P(final value beats the best trial's {best_text}) = {p_beat:.3f}"
        if p_beat < self.min_prob_beat_best:
            return PruneCheck(
                "prune", step, p_beat, f"{head} < {self.min_prob_beat_best:g}: prune", quantiles
            )
        if self.plateau is not None and p_beat < self.plateau_max_prob_beat_best:
            decision = self.plateau.decide(update.curve_draws, update.step, update.horizon_step)[0]
            if decision.stop:
                reason = (
                    f"{head} < {self.plateau_max_prob_beat_best:g} and the curve has levelled off "
                    f"({decision.reason}): prune"
                )
                return PruneCheck("prune", step, p_beat, reason, quantiles)
        return PruneCheck("continue", step, p_beat, f"{head}: continue", quantiles)

    def _reach(
        self, metadata: Mapping[str, Any], finished: list[FrozenTrial], sign: float
    ) -> tuple[float, float] | None:
        """The span of the finished trials' reported values (as rewards), for a trial without a
        stated range; None with a stated range, ``study_reach=False`` or nothing reported.
        """
        if not self.study_reach or (
            metadata.get("reward_min") is not None and metadata.get("reward_max") is not None
        ):
            return None
        values = np.array(
            [sign * float(v) for t in finished for v in t.intermediate_values.values()], dtype=float
        )
        values = values[np.isfinite(values)]
        return (float(values.min()), float(values.max())) if values.size else None

    def _is_check_step(self, trial: FrozenTrial, step: int) -> bool:
        """Whether ``step`` is the first the trial reported on or past a check point
        (``warm-up + k * interval``; both by default shares of the trial's horizon).
        """
        horizon = self._horizon(trial)
        warmup = round(0.1 * horizon) if self.n_warmup_steps is None else self.n_warmup_steps
        interval = max(1, round(0.05 * horizon)) if self.interval_steps is None else self.interval_steps
        if step < warmup:
            return False
        previous = max((s for s in trial.intermediate_values if s < step), default=None)
        if previous is None or previous < warmup:
            return True
        return (step - warmup) // interval > (previous - warmup) // interval

    def _horizon(self, trial: FrozenTrial) -> int:
        horizon = self.horizon(trial) if callable(self.horizon) else self.horizon
        return int(horizon)

    def _metadata(self, trial: FrozenTrial) -> dict[str, Any]:
        if self.metadata is None:
            return {}
        return dict(self.metadata(trial) if callable(self.metadata) else self.metadata)

    def _get_forecaster(
        self, study: optuna.study.Study, finished: list[FrozenTrial], sign: float
    ) -> LiveForecaster:
        due = (
            self.fit_after is not None
            and len(finished) >= self.fit_after
            and len(finished) >= 2 * max(self._fitted_on, self.fit_after // 2)
        )
        if due:
            self._forecaster = LiveForecaster(
                self._study_population(study, finished, sign),
                n_draws=self.n_draws,
                random_seed=self.random_seed,
                likelihood_weight=self.likelihood_weight,
            )
            self._fitted_on = len(finished)
        if self._forecaster is None:
            self._forecaster = LiveForecaster(
                resolve_population(self.population),
                n_draws=self.n_draws,
                random_seed=self.random_seed,
                likelihood_weight=self.likelihood_weight,
            )
        return self._forecaster

    def _study_population(
        self, study: optuna.study.Study, finished: list[FrozenTrial], sign: float
    ) -> RewardModel:
        path = None
        if self.cache_dir is not None:
            path = self.cache_dir / f"population_{_safe(study.study_name)}_{len(finished)}.nc"
            if path.exists():
                return RewardModel.load(path)
        tables = []
        for trial in finished:
            table, kept, _ = trial_table(trial, sign, self._metadata(trial), self._horizon(trial))
            if kept >= self.min_points:
                tables.append(table)
        if len(tables) < 2:
            raise BayesGRPOError(
                f"{len(tables)} finished trials have {self.min_points} values or more: too few to fit"
            )
        runs = RunsTable(
            points=pd.concat([t.points for t in tables], ignore_index=True),
            runs=pd.concat([t.runs for t in tables], ignore_index=True),
        )
        logger.info("bayesgrpo pruner: fitting a population on %d finished trials", len(tables))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FitWarning)  # its diagnostics stay on the model
            model = RewardModel().fit(runs, random_seed=self.random_seed, **self.fit_kwargs)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            model.save(path)
        return model


def trial_table(
    trial: FrozenTrial, sign: float, metadata: Mapping[str, Any], horizon: int
) -> tuple[RunsTable, int, int]:
    """A trial's reported values as a one-run table.

    Parameters
    ----------
    trial : FrozenTrial
    sign : float
        1 for a maximised objective, -1 for a minimised one (its values negated: a "reward").
    metadata : mapping
        The run's metadata; a stated ``reward_min``/``reward_max`` is negated and swapped with
        the values.
    horizon : int
        The trial's last step (``total_steps``).

    Returns
    -------
    table : RunsTable
        Step = the reported step, shifted by one when the trial reports from step 0 (a curve's
        first logged point is at step 1). Values that are NaN or infinite are left out.
    kept : int
        How many values the table holds.
    offset : int
        The shift applied to the steps (0 or 1).
    """
    values = trial.intermediate_values
    offset = 1 if values and min(values) == 0 else 0
    steps = np.array(sorted(values), dtype=np.int64)
    rewards = np.array([sign * float(values[s]) for s in steps], dtype=float)
    finite = np.isfinite(rewards)
    run_id = f"trial_{trial.number}"
    points = pd.DataFrame(
        {
            "run_id": pd.Series([run_id] * int(finite.sum()), dtype="string"),
            "step": steps[finite] + offset,
            "reward": rewards[finite],
        }
    )
    meta = {k: v for k, v in metadata.items() if k not in ("reward_min", "reward_max")}
    low, high = metadata.get("reward_min"), metadata.get("reward_max")
    if low is not None and high is not None:
        low, high = sorted((sign * float(low), sign * float(high)))
        meta.update(reward_min=low, reward_max=high)
    runs = {"run_id": run_id, "format": "optuna", **meta, "total_steps": int(horizon) + offset}
    return RunsTable(points=points, runs=coerce_metadata(pd.DataFrame([runs]))), int(finite.sum()), offset


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:80]
