"""Is the stop probability right? Each online check's probability set against what the run then did."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo.evaluate.backtest.cuts import BacktestError, planned_horizon, run_points, run_seed
from bayesgrpo.evaluate.backtest.forecast import live_forecasters, logged_reward_draws
from bayesgrpo.evaluate.backtest.smoothing import rolling_mean, smoothing_window
from bayesgrpo.evaluate.backtest.stopping import check_indices, update_at_check
from bayesgrpo.questions.stopping import prob_gain_below

if TYPE_CHECKING:
    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.reward_model import RewardModel

logger = logging.getLogger(__name__)


def stop_probability_calibration(
    table: RunsTable,
    populations: Mapping[str, RewardModel],
    eps_values: Sequence[float] = (0.01, 0.02),
    check_every_fraction: float = 0.05,
    *,
    smoothing_fraction: float | str = "cv",
    n_draws: int = 1000,
    random_seed: int = 0,
    reference: Mapping[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """Is ``P(gain < eps)`` right as often as it says? Every check of every run, scored.

    At the same online checks as :func:`stopping_backtest` (the last logged point before each
    ``check_every_fraction`` of a run's step span), a live update on the run's prefix (from a
    population that never saw the run) gives ``P(R(last) - R(s) < eps)`` for each eps, in the
    rule's unit (a share of the reward bounds the update used). The run's later points say what
    happened: the gain of its smoothed reward (:func:`smoothed_reward`) from the check to its
    last step, in the same unit.

    Parameters
    ----------
    table : RunsTable
    populations : mapping run_id -> RewardModel
    eps_values : sequence of float
    check_every_fraction : float
    smoothing_fraction : float or "cv"
        The reference the realised gain is read on (default: the run's cross-validated window;
        a narrow window leaves noise that reads as gain or loss).
    n_draws : int
    random_seed : int
    reference : mapping run_id -> ndarray, optional
        The curve each run's realised gain is read on, one value per logged point (sorted by
        step), in place of its smoothed reward: for a simulated run, its true mean, so that the
        rule's probability (of the curve's gain) is judged against the curve itself. The
        predictive probability is still of the smoothed logged gain, and the rows then carry
        that gain too (``smoothed_gain``, ``smoothed_below``).

    Returns
    -------
    DataFrame
        One row per (run, check, eps): ``run_id, step, progress, eps, probability,
        predictive_probability, realised_gain, below`` (``below``: the realised gain was under
        eps). ``probability`` is the rule's, of the curve's gain; ``predictive_probability`` is
        the model's probability of the outcome itself, the smoothed *logged* gain: later points
        drawn with their noise and smoothed like the reference, so that noise the reference keeps
        is not counted against the model. ``progress`` is the check's share of the run's step span.
        With a ``reference``, also ``smoothed_gain, smoothed_below``: the smoothed reward's gain,
        the outcome without one.
    """
    if not 0.0 < check_every_fraction < 1.0:
        raise BacktestError(f"check_every_fraction must lie in (0, 1); got {check_every_fraction}")
    live = live_forecasters(populations, table.run_ids, n_draws, random_seed)
    rows = []
    for run_id in table.run_ids:
        points = run_points(table, run_id)
        steps = points["step"].to_numpy(dtype=float)
        rewards = points["reward"].to_numpy(dtype=float)
        window = smoothing_window(rewards, smoothing_fraction)
        smooth = rolling_mean(rewards, window)
        curve = smooth
        if reference is not None:
            curve = np.asarray(reference[run_id], dtype=float)
            if curve.shape != rewards.shape:
                raise BacktestError(
                    f"the reference curve of run {run_id!r} has {curve.size} values for its "
                    f"{rewards.size} logged points"
                )
        run = table.select([run_id])
        horizon = planned_horizon(run)
        for i in check_indices(points, check_every_fraction):
            update = update_at_check(live[run_id], run, points, i, horizon)
            if update is None:
                continue
            unit = float(np.ravel(update.curve_draws.reward_scale)[0])
            realised = float(curve[-1] - curve[i]) / unit
            smoothed = float(smooth[-1] - smooth[i]) / unit
            predicted = (
                _smoothed_gain_draws(
                    update, rewards, steps, i, window, run_seed(random_seed, "calibration", run_id, i)
                )
                / unit
            )
            for eps in eps_values:
                probability = float(
                    prob_gain_below(update.curve_draws, steps[i], steps[-1], eps=eps, relative=True)[0]
                )
                row = {
                    "run_id": run_id,
                    "step": float(steps[i]),
                    "progress": float((steps[i] - steps[0]) / (steps[-1] - steps[0])),
                    "eps": float(eps),
                    "probability": probability,
                    "predictive_probability": float((predicted < eps).mean()),
                    "realised_gain": realised,
                    "below": realised < eps,
                }
                if reference is not None:
                    row |= {"smoothed_gain": smoothed, "smoothed_below": smoothed < eps}
                rows.append(row)
        logger.info("calibration: run %s done", run_id)
    return pd.DataFrame(
        rows,
        columns=[
            "run_id",
            "step",
            "progress",
            "eps",
            "probability",
            "predictive_probability",
            "realised_gain",
            "below",
            *(["smoothed_gain", "smoothed_below"] if reference is not None else []),
        ],
    )


def _smoothed_gain_draws(
    update: Any, rewards: np.ndarray, steps: np.ndarray, i: int, window: int, seed: int
) -> np.ndarray:
    """Predictive draws (S,) of the smoothed reward's gain from point ``i`` to the last point,
    in reward units: the points up to ``i`` as logged, the later ones drawn (curve plus a logged
    point's noise), each draw smoothed over ``window`` like the reference.
    """
    n = rewards.size
    future = logged_reward_draws(update, steps[i + 1 :], seed)  # (S, n - i - 1)
    full = np.concatenate([np.broadcast_to(rewards[: i + 1], (future.shape[0], i + 1)), future], axis=1)
    half = window // 2

    def window_mean(j: int) -> np.ndarray:
        return full[:, max(0, j - half) : min(n, j + half + 1)].mean(axis=1)

    return window_mean(n - 1) - window_mean(i)


#: Probability bins of :func:`calibration_table`.
CALIBRATION_BINS: tuple[float, ...] = (0.0, 0.2, 0.5, 0.8, 0.9, 0.95, 1.0)


def calibration_table(
    calibration: pd.DataFrame, bins: Sequence[float] = CALIBRATION_BINS, column: str = "probability"
) -> pd.DataFrame:
    """Stated probability against how often it came true, per eps and probability bin.

    Parameters
    ----------
    calibration : DataFrame
        Output of :func:`stop_probability_calibration`.
    bins : sequence of float
        Bin edges of the stated probability (the last bin includes 1).
    column : str
        The probability judged: ``"probability"`` (the rule's, of the curve's gain) or
        ``"predictive_probability"`` (of the smoothed logged gain the outcome is read on).

    Returns
    -------
    DataFrame
        ``eps, bin, checks, runs, stated_mean, observed_share, brier`` with ``brier`` the mean
        squared difference of stated probability and outcome over the bin's checks.
    """
    if calibration.empty:
        raise BacktestError("the calibration table is empty: nothing to summarise")
    if column not in calibration.columns:
        raise BacktestError(f"no column {column!r} in the calibration table")
    frame = calibration.assign(
        probability=calibration[column],
        bin=pd.cut(calibration[column], bins=list(bins), include_lowest=True, right=False),
        outcome=calibration["below"].astype(float),
    )
    top = frame["probability"] >= bins[-1]
    if top.any():  # P = 1 belongs to the last bin
        frame.loc[top, "bin"] = frame["bin"].cat.categories[-1]
    frame["squared"] = (frame["probability"] - frame["outcome"]) ** 2
    grouped = frame.groupby(["eps", "bin"], observed=True, sort=True)
    out = grouped.agg(
        checks=("outcome", "size"),
        runs=("run_id", "nunique"),
        stated_mean=("probability", "mean"),
        observed_share=("outcome", "mean"),
        brier=("squared", "mean"),
    ).reset_index()
    out["bin"] = out["bin"].astype(str)
    return out
