"""The stopping backtest: each rule run on every run as it would have been run live.

Bayesian rules (anything with a ``decide`` method) are asked at every ``check_every_fraction`` of
a run's step span, seeing only the points logged so far; the baselines are :class:`FixedFraction`,
:class:`Patience` and :class:`MedianPruning`. :func:`frontier` summarises steps saved against
reward given up per rule.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd

from bayesgrpo.evaluate import baselines
from bayesgrpo.evaluate.backtest.cuts import (
    SMOOTHING_FRACTION,
    UPDATE_ERRORS,
    BacktestError,
    planned_horizon,
    prefix_table,
    run_points,
)
from bayesgrpo.evaluate.backtest.engine import backtest_engine
from bayesgrpo.evaluate.backtest.smoothing import dip_at_stop, reward_given_up, smoothed_reward
from bayesgrpo.model.laplace import LiveUpdateWarning

if TYPE_CHECKING:
    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.questions.live import LiveForecaster

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# Stopping backtest
# --------------------------------------------------------------------------------------------


def check_indices(points: pd.DataFrame, fraction: float) -> list[int]:
    """Indices (into the run's points) of the online checks: the last point at or before each
    ``k * fraction`` of the step span, k = 1, 2... before the end, without repeats.
    """
    steps = points["step"].to_numpy(dtype=float)
    first, last = steps[0], steps[-1]
    indices: list[int] = []
    for k in range(1, math.ceil(1.0 / fraction)):
        i = int(np.searchsorted(steps, first + k * fraction * (last - first), side="right")) - 1
        if i >= 0 and i < len(steps) - 1 and (not indices or i > indices[-1]):
            indices.append(i)
    return indices


@dataclass(frozen=True)
class FixedFraction:
    """Stop at a fixed fraction of the run's planned steps (its last logged step here)."""

    fraction: float

    def __str__(self) -> str:
        return f"fixed_fraction({self.fraction:g})"


@dataclass(frozen=True)
class Patience:
    """Patience on a causally smoothed reward (:func:`baselines.stop_patience`).

    Parameters
    ----------
    patience : float
        Logged points without improvement before stopping, as a share of the run's points.
    window : float
        Trailing rolling-mean window, as a share of the run's points.
    """

    patience: float = 0.1
    window: float = 0.05

    def __str__(self) -> str:
        return f"patience({self.patience:g}, window {self.window:g})"


@dataclass(frozen=True)
class MedianPruning:
    """Optuna-style median pruning against the other runs (:func:`baselines.stop_median_pruning`).

    Reward scales differ between tasks, so a run is compared with the other runs that share
    its ``peers`` metadata (by default its source: the same notebook or repository, the same
    reward functions), the runs of one study in Optuna's terms; a run with fewer than
    ``n_startup_trials`` peers is never pruned.
    """

    warmup_fraction: float = 0.1
    check_every: float = 0.05
    n_startup_trials: int = 5
    peers: str = "source"

    def __str__(self) -> str:
        return f"median_pruning(warmup {self.warmup_fraction:g}, {self.n_startup_trials} startup)"


def _rule_kind(rule: Any) -> str:
    if isinstance(rule, FixedFraction):
        return "fixed_fraction"
    if isinstance(rule, Patience):
        return "patience"
    if isinstance(rule, MedianPruning):
        return "median_pruning"
    if callable(getattr(rule, "decide", None)):
        return "bayes"
    raise BacktestError(
        f"unknown stopping rule {rule!r}: give FixedFraction, Patience, MedianPruning or a rule with "
        "decide(curve_draws, step_now, horizon_step) (PlateauRule, BudgetRule, TargetRule)"
    )


def _peer_runs(table: RunsTable, run_id: str, peers: str) -> list[tuple[np.ndarray, np.ndarray]]:
    runs = table.runs
    if peers not in runs.columns:
        raise BacktestError(f"no metadata column {peers!r} to choose median-pruning peers by")
    values = runs.set_index("run_id")[peers]
    own = values.get(run_id)
    if own is None or pd.isna(own):
        return []
    others = [str(r) for r, v in values.items() if str(r) != run_id and pd.notna(v) and v == own]
    out = []
    for other in others:
        points = run_points(table, other)
        out.append((points["step"].to_numpy(dtype=float), points["reward"].to_numpy(dtype=float)))
    return out


def _baseline_stop(
    rule: Any, table: RunsTable, run_id: str, steps: np.ndarray, rewards: np.ndarray
) -> float | None:
    n = len(steps)
    if isinstance(rule, FixedFraction):
        stop = baselines.stop_fixed_fraction(steps, float(steps[-1]), rule.fraction)
    elif isinstance(rule, Patience):
        stop = baselines.stop_patience(
            steps,
            rewards,
            patience=max(1, round(rule.patience * n)),
            smoothing_window=max(1, round(rule.window * n)),
        )
    else:
        stop = baselines.stop_median_pruning(
            steps,
            rewards,
            _peer_runs(table, run_id, rule.peers),
            rule.warmup_fraction,
            rule.check_every,
            total_steps=float(steps[-1]),
            n_startup_trials=rule.n_startup_trials,
        )
    return None if stop is None else float(stop)


def update_at_check(
    live: LiveForecaster, run: RunsTable, points: pd.DataFrame, i: int, horizon: float
) -> Any:
    """The live update of a run's points up to index ``i`` (an online check), or None when there
    is no answer: a single point (it says nothing about a slope) or an update that failed
    (logged).
    """
    if i + 1 < 2:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LiveUpdateWarning)
            return live.update(prefix_table(run, points.iloc[: i + 1]), horizon=horizon)
    except UPDATE_ERRORS as exc:
        logger.warning(
            "live update of %s at step %g failed (%s); going on",
            run.run_ids[0],
            float(points["step"].iloc[i]),
            exc,
        )
        return None


def _bayes_stops(
    rules: Mapping[str, Any],
    live: LiveForecaster,
    run: RunsTable,
    points: pd.DataFrame,
    check_every_fraction: float,
) -> dict[str, tuple[float | None, float]]:
    """Online: at each check the run's prefix is updated live and every rule not yet stopped is
    asked; returns ``name -> (stop step or None, probability behind the stop)``.
    """
    steps = points["step"].to_numpy(dtype=float)
    last = float(steps[-1])
    horizon = planned_horizon(run)
    stops: dict[str, tuple[float | None, float]] = {name: (None, np.nan) for name in rules}
    pending = dict(rules)
    for i in check_indices(points, check_every_fraction):
        if not pending:
            break
        update = update_at_check(live, run, points, i, horizon)
        if update is None:  # no answer at this check: the rules keep going
            continue
        for name, rule in list(pending.items()):
            decision = rule.decide(update.curve_draws, steps[i], horizon_step=last)[0]
            if decision.decision == "stop":
                stops[name] = (float(steps[i]), float(decision.probability))
                del pending[name]
    return stops


def stopping_backtest(
    table: RunsTable,
    populations: Mapping[str, RewardModel] | None,
    rules: Mapping[str, Any],
    check_every_fraction: float = 0.05,
    *,
    smoothing_fraction: float | str = SMOOTHING_FRACTION,
    n_draws: int = 1000,
    random_seed: int = 0,
    workers: int | None = None,
    address: str | None = None,
) -> pd.DataFrame:
    """Run every stopping rule on every run; what each stop saves and what it gives up.

    Parameters
    ----------
    table : RunsTable
    populations : mapping run_id -> RewardModel, or None
        For the Bayesian rules: a population fitted without the run (:func:`kfold_populations`).
    rules : mapping name -> rule
        :class:`FixedFraction`, :class:`Patience`, :class:`MedianPruning`, or a Bayesian rule
        with ``decide(curve_draws, step_now, horizon_step)`` (``PlateauRule(eps, prob,
        relative=True)``...). A Bayesian rule is asked online: at the last logged point before
        each ``check_every_fraction`` of the run's step span (not at its end), from a live update
        of the points logged so far (normalised progress on the run's :func:`planned_horizon`),
        with the run's last logged step as the horizon of the question; the run stops at the
        first ``"stop"``.
    check_every_fraction : float
        Spacing of the Bayesian rules' checks, as a share of the run's step span.
    smoothing_fraction : float or "cv"
        Window of the centred rolling mean the reward given up is measured on
        (:func:`smoothed_reward`).
    n_draws : int
        Draws of each live update.
    random_seed : int
    workers, address : optional
        Run each run's rules on Ray (``bayesgrpo[ray]``): this many local worker processes, or the
        cluster at ``address``; the rows equal the serial ones.

    Returns
    -------
    DataFrame
        One row per (run, rule): ``run_id, rule, kind, stop_step, last_step, steps_saved,
        reward_given_up, reward_vs_end, dip, stopped, probability``. ``stop_step`` is the last step
        when the rule never stops (``stopped`` False). ``steps_saved = (last_step - stop_step) /
        last_step``; ``reward_given_up = max(0, max(smoothed) - smoothed at stop_step) /
        range`` with ``range`` the max minus the min of the run's logged rewards (1 when
        constant); ``reward_vs_end = (smoothed at the last step - smoothed at stop_step) /
        range`` (signed: negative when the stop is better than running to the end). ``dip``:
        the smoothed logged reward at the stop minus its mean over the 10% of the run around it,
        a share of the range (:func:`~bayesgrpo.evaluate.backtest.smoothing.dip_at_stop`;
        negative: the stop sat in a dip). ``probability`` is the Bayesian rule's posterior
        probability behind its stop.
    """
    if not 0.0 < check_every_fraction < 1.0:
        raise BacktestError(f"check_every_fraction must lie in (0, 1); got {check_every_fraction}")
    if not rules:
        raise BacktestError("no stopping rules given")
    kinds = {name: _rule_kind(rule) for name, rule in rules.items()}
    has_bayes = any(kind == "bayes" for kind in kinds.values())
    if has_bayes and populations is None:
        raise BacktestError("Bayesian stopping rules need populations (run_id -> fitted RewardModel)")
    work = StoppingWork(table, dict(rules), kinds, check_every_fraction, smoothing_fraction)
    engine, index = backtest_engine(
        populations if has_bayes else None,
        table.run_ids,
        n_draws,
        random_seed,
        workers=workers,
        address=address,
    )
    with engine:
        rows = engine.map(stopping_run, [(r, index.get(r)) for r in table.run_ids], work)
    return pd.DataFrame([row for per_run in rows for row in per_run], columns=list(STOPPING_COLUMNS))


#: Columns of :func:`stopping_backtest`'s table.
STOPPING_COLUMNS: tuple[str, ...] = (
    "run_id",
    "rule",
    "kind",
    "stop_step",
    "last_step",
    "steps_saved",
    "reward_given_up",
    "reward_vs_end",
    "dip",
    "stopped",
    "probability",
)


@dataclass(frozen=True)
class StoppingWork:
    """What every run of a stopping backtest is asked (sent to each worker with its batch; the
    table travels whole, as median pruning compares a run with its peers).
    """

    table: RunsTable
    rules: Mapping[str, Any]
    kinds: Mapping[str, str]
    check_every_fraction: float
    smoothing_fraction: float | str


class ScoredRun(NamedTuple):
    """A run as the stopping backtest scores its stops: its points, their steps and rewards, the
    smoothed reward a stop is measured on and the run's logged range (the unit; 1 when flat).
    """

    points: pd.DataFrame
    steps: np.ndarray
    rewards: np.ndarray
    smooth: np.ndarray
    spread: float


def scored_run(table: RunsTable, run_id: str, smoothing_fraction: float | str) -> ScoredRun:
    """What :func:`reward_given_up` needs to score a stop of ``run_id`` (see :class:`ScoredRun`)."""
    points = run_points(table, run_id)
    rewards = points["reward"].to_numpy(dtype=float)
    spread = float(rewards.max() - rewards.min())
    return ScoredRun(
        points,
        points["step"].to_numpy(dtype=float),
        rewards,
        smoothed_reward(rewards, smoothing_fraction),
        spread if spread > 0 else 1.0,
    )


def stopping_run(
    item: tuple[str, int | None], forecaster_of: Callable[[int], LiveForecaster], work: StoppingWork
) -> list[dict[str, Any]]:
    """One run's rows of the stopping backtest, a row a rule (an engine's work function; ``item``
    is the run id and its population's index, None without Bayesian rules).
    """
    run_id, population = item
    table = work.table
    points, steps, rewards, smooth, spread = scored_run(table, run_id, work.smoothing_fraction)
    last = float(steps[-1])
    if last <= 0:
        logger.info("stopping backtest: run %s skipped (last step %g)", run_id, last)
        return []
    stops: dict[str, tuple[float | None, float]] = {}
    bayes_rules = {}
    for name, rule in work.rules.items():
        if work.kinds[name] != "bayes":
            stops[name] = (_baseline_stop(rule, table, run_id, steps, rewards), np.nan)
        else:
            bayes_rules[name] = rule
    if bayes_rules:
        assert population is not None  # every run has one when a Bayesian rule is asked
        live = forecaster_of(population)
        stops.update(
            _bayes_stops(bayes_rules, live, table.select([run_id]), points, work.check_every_fraction)
        )
    rows = []
    for name in work.rules:
        stop, probability = stops[name]
        stop_step = last if stop is None else stop
        given_up, vs_end = reward_given_up(smooth, spread, steps, stop_step)
        rows.append(
            {
                "run_id": run_id,
                "rule": name,
                "kind": work.kinds[name],
                "stop_step": stop_step,
                "last_step": last,
                "steps_saved": (last - stop_step) / last,
                "reward_given_up": given_up,
                "reward_vs_end": vs_end,
                "dip": dip_at_stop(steps, rewards, stop_step),
                "stopped": stop is not None and stop_step < last,
                "probability": probability,
            }
        )
    logger.info("stopping backtest: run %s done", run_id)
    return rows


def frontier(stopping: pd.DataFrame) -> pd.DataFrame:
    """Compute saved against reward given up, per rule.

    Parameters
    ----------
    stopping : DataFrame
        Output of :func:`stopping_backtest`.

    Returns
    -------
    DataFrame
        One row per rule, sorted by mean steps saved (most first): ``rule, kind, n_runs,
        steps_saved_mean, steps_saved_median, given_up_mean, given_up_p90, given_up_max,
        vs_end_mean, dip_mean, share_stopped, on_frontier`` (``dip_mean`` only when the rows carry
        a ``dip``). ``on_frontier`` is True when no other rule
        saves at least as many steps on average at no more mean reward given up (one of the two
        strictly better).
    """
    if stopping.empty:
        raise BacktestError("the stopping table is empty: nothing to summarise")
    grouped = stopping.groupby("rule", sort=False)
    table = pd.DataFrame(
        {
            "kind": grouped["kind"].first(),
            "n_runs": grouped["run_id"].nunique(),
            "steps_saved_mean": grouped["steps_saved"].mean(),
            "steps_saved_median": grouped["steps_saved"].median(),
            "given_up_mean": grouped["reward_given_up"].mean(),
            "given_up_p90": grouped["reward_given_up"].quantile(0.9),
            "given_up_max": grouped["reward_given_up"].max(),
            "vs_end_mean": grouped["reward_vs_end"].mean(),
            **({"dip_mean": grouped["dip"].mean()} if "dip" in stopping.columns else {}),
            "share_stopped": grouped["stopped"].mean(),
        }
    ).reset_index()
    saved = table["steps_saved_mean"].to_numpy()
    lost = table["given_up_mean"].to_numpy()
    better_or_equal = (saved[None, :] >= saved[:, None]) & (lost[None, :] <= lost[:, None])
    strictly = (saved[None, :] > saved[:, None]) | (lost[None, :] < lost[:, None])
    table["on_frontier"] = ~(better_or_equal & strictly).any(axis=1)
    return table.sort_values("steps_saved_mean", ascending=False, kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------------------------
# The oracle: how much any rule asked at the same checks could save
# --------------------------------------------------------------------------------------------


def stop_candidates(
    table: RunsTable,
    check_every_fraction: float,
    smoothing_fraction: float | str = SMOOTHING_FRACTION,
) -> pd.DataFrame:
    """Every stop a rule asked at the backtest's checks can make, scored as the backtest scores it.

    Parameters
    ----------
    table : RunsTable
    check_every_fraction : float
        The checks' spacing, a share of each run's step span (as :func:`stopping_backtest`).
    smoothing_fraction : float or "cv"
        As :func:`stopping_backtest`.

    Returns
    -------
    DataFrame
        One row per run and check, plus the run's end (no stop): ``run_id, stop_step,
        steps_saved, reward_given_up, reward_vs_end``.
    """
    rows = []
    for run_id in table.run_ids:
        points, steps, _, smooth, spread = scored_run(table, run_id, smoothing_fraction)
        last = float(steps[-1])
        if last <= 0:
            continue
        for stop_step in [*(float(steps[i]) for i in check_indices(points, check_every_fraction)), last]:
            given_up, vs_end = reward_given_up(smooth, spread, steps, stop_step)
            rows.append(
                {
                    "run_id": run_id,
                    "stop_step": stop_step,
                    "steps_saved": (last - stop_step) / last,
                    "reward_given_up": given_up,
                    "reward_vs_end": vs_end,
                }
            )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class OracleBound:
    """What a rule that knew every run's future could save at a bound on the mean reward given up.

    Attributes
    ----------
    max_given_up : float
        The bound on the mean of ``given_up`` (a share of each run's range).
    saved_bound : float
        No choice of one stop per run among the candidates saves more steps on average while
        keeping the mean given up within ``max_given_up`` (a Lagrangian bound: exact up to the
        gaps between the candidates' hull points).
    saved, given_up : float
        A choice that attains the bound's side: the most steps saved found at a mean given up
        within ``max_given_up``.
    """

    max_given_up: float
    saved_bound: float
    saved: float
    given_up: float


def oracle_stop_bound(
    candidates: pd.DataFrame, max_given_up: float, given_up: str = "reward_vs_end"
) -> OracleBound:
    """The most steps any stopping rule could save at a mean reward given up within a bound.

    Each run stops at one of its candidates (:func:`stop_candidates`). The best choice maximises
    the mean of ``steps_saved`` subject to mean ``given_up`` <= ``max_given_up``; its Lagrangian
    dual, ``min over lam >= 0 of lam * max_given_up + mean over runs of max over candidates of
    (saved - lam * given_up)``, bounds it from above at every ``lam``, and each ``lam``'s
    choice is a feasible point when its mean given up is within the bound.

    Parameters
    ----------
    candidates : DataFrame
        ``run_id``, ``steps_saved`` and the ``given_up`` column, several rows per run.
    max_given_up : float
    given_up : str
        The column that is bounded (``reward_vs_end``: against the run's end, the headline).

    Returns
    -------
    OracleBound
    """
    if candidates.empty:
        raise BacktestError("no stop candidates: nothing to bound")
    runs = candidates["run_id"].to_numpy()
    _, run_index = np.unique(runs, return_inverse=True)
    n_runs = int(run_index.max()) + 1
    saved = candidates["steps_saved"].to_numpy(dtype=float)
    lost = candidates[given_up].to_numpy(dtype=float)
    bound, best_saved, best_lost = np.inf, -np.inf, np.nan
    for lam in np.concatenate([[0.0], np.geomspace(1e-4, 1e5, 2000)]):
        score = saved - lam * lost
        # each run's best candidate at this lam; ties go to the one giving up least
        order = np.lexsort((lost, -score, run_index))
        first = order[np.r_[True, run_index[order][1:] != run_index[order][:-1]]]
        dual = lam * max_given_up + score[first].sum() / n_runs
        bound = min(bound, dual)
        mean_saved, mean_lost = saved[first].mean(), lost[first].mean()
        if mean_lost <= max_given_up and mean_saved > best_saved:
            best_saved, best_lost = mean_saved, mean_lost
    return OracleBound(max_given_up, float(bound), float(best_saved), float(best_lost))
