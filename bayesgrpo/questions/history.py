"""What a stopping rule would have said at successive steps of one run (the numbers behind
``plotting.plot_stop_probability``).

:func:`stop_history` cuts a run at a series of steps and, for each prefix, conditions the
population on the points logged so far (``bayesgrpo.questions.live.LiveForecaster.update``, no refit),
then asks the rule (``bayesgrpo.questions.stopping``) and the phase question at that step. One row per cut:
the history a live callback would have produced had it run during training.

Examples
--------
>>> from bayesgrpo.model.datasets import bundled_population, load_bundled  # doctest: +SKIP
>>> table = load_bundled()  # doctest: +SKIP
>>> stop_history(bundled_population(), table.select([table.run_ids[0]]), steps=10)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.logs.table import RunsTable
from bayesgrpo.model.laplace import LiveUpdateWarning
from bayesgrpo.questions.live import LiveForecaster
from bayesgrpo.questions.stopping import default_rule, phase

if TYPE_CHECKING:
    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.questions.stopping import StoppingRule

logger = logging.getLogger(__name__)

__all__ = ["HISTORY_COLUMNS", "MIN_PREFIX_POINTS", "default_rule", "run_horizon", "stop_history"]

#: Fewest logged points of a prefix: with fewer the update is the population prior alone.
MIN_PREFIX_POINTS = 3

#: Columns of :func:`stop_history`'s table.
HISTORY_COLUMNS: tuple[str, ...] = (
    "run_id",
    "step",
    "horizon_step",
    "n_points",
    "rule",
    "decision",
    "p_stop",
    "phase",
    "p_phase",
    "slow_start",
    "rapid",
    "plateau",
    "expected_gain",
    "gain_lower",
    "gain_upper",
    "pareto_k",
)


def run_horizon(run: RunsTable, horizon: float | None = None) -> float:
    """The step a run is planned to end at: ``horizon``, else its ``total_steps``, else its
    last logged step (with a finite reward).
    """
    if horizon is not None:
        return float(horizon)
    planned = (
        pd.to_numeric(run.runs["total_steps"], errors="coerce").iloc[0]
        if "total_steps" in run.runs
        else np.nan
    )
    if pd.notna(planned) and float(planned) > 0:
        return float(planned)
    finite = run.points[np.isfinite(run.points["reward"].to_numpy(dtype=float))]
    return float(finite["step"].max())


def _cut_steps(logged: np.ndarray, steps: Sequence[float] | np.ndarray | int) -> np.ndarray:
    """The steps to cut at: ``steps`` itself, or that many evenly spread over the logged steps
    from the :data:`MIN_PREFIX_POINTS`-th point to the last.
    """
    if isinstance(steps, (int, np.integer)):
        if steps < 1:
            raise BayesGRPOError(f"steps={steps}: give a positive number of cuts or a list of steps")
        first = logged[min(MIN_PREFIX_POINTS, len(logged)) - 1]
        grid = np.linspace(first, logged[-1], int(steps))
        # each cut at the last logged step at or before the grid point, without repeats
        return np.unique(logged[np.searchsorted(logged, grid, side="right") - 1])
    cuts = np.unique(np.asarray(steps, dtype=float))
    if cuts.size == 0 or not np.isfinite(cuts).all():
        raise BayesGRPOError(f"steps must be finite numbers; got {list(np.atleast_1d(steps))[:5]}")
    if cuts[0] < logged[0]:
        raise BayesGRPOError(
            f"step {cuts[0]:g} is before the run's first logged step {logged[0]:g}: "
            "there is nothing to condition on there"
        )
    return cuts


def stop_history(
    population: RewardModel | LiveForecaster,
    run_table: RunsTable,
    steps: Sequence[float] | np.ndarray | int = 12,
    rule: StoppingRule | None = None,
    *,
    horizon: float | None = None,
    n_draws: int = 1000,
    random_seed: int | None = 0,
) -> pd.DataFrame:
    """The rule's decision, its probability and the run's phase at successive steps of one run.

    Parameters
    ----------
    population : RewardModel or LiveForecaster
        A fitted population (``pooling="partial"``), e.g. ``datasets.bundled_population()``, or
        a ``LiveForecaster`` of one (its cached priors are reused across runs; its own
        ``n_draws`` and ``random_seed`` then apply).
    run_table : RunsTable
        One run (``table.select([run_id])``).
    steps : int or sequence of float
        The steps to cut the run at (each prefix holds the points logged at or before it), or a
        number of cuts spread evenly over the logged steps.
    rule : StoppingRule, optional
        Default :func:`default_rule`.
    horizon : float, optional
        The step the run is planned to end at (default: its ``total_steps``, else its last
        logged step). Fixed for every prefix.
    n_draws : int
        Draws of each live update.
    random_seed : int, optional

    Returns
    -------
    pandas.DataFrame
        One row per cut, columns :data:`HISTORY_COLUMNS`: ``p_stop`` is the probability the rule
        compares with its threshold (for :class:`~bayesgrpo.questions.stopping.PlateauRule`
        ``P(gain < eps)``), ``phase`` the most probable phase and ``p_phase`` its probability,
        ``slow_start``/``rapid``/``plateau`` the three phase probabilities, ``pareto_k`` the live
        update's importance-sampling diagnostic.

    Raises
    ------
    BayesGRPOError
        More or less than one run, a run without a finite reward, a step before its first point,
        or a horizon before its last cut.
    """
    if len(run_table.runs) != 1:
        raise BayesGRPOError(
            f"stop_history takes one run; got {len(run_table.runs)} (select one with table.select([run_id]))"
        )
    run_id = run_table.run_ids[0]
    points = run_table.points[np.isfinite(run_table.points["reward"].to_numpy(dtype=float))]
    if points.empty:
        raise BayesGRPOError(f"run {run_id!r} has no finite reward point")
    logged = np.sort(points["step"].to_numpy(dtype=float))
    cuts = _cut_steps(logged, steps)
    T = run_horizon(run_table, horizon)
    if cuts[-1] > T:
        raise BayesGRPOError(
            f"run {run_id!r}: cut at step {cuts[-1]:g} is past the horizon {T:g}; pass horizon=..."
        )
    rule = default_rule() if rule is None else rule
    if isinstance(population, LiveForecaster):
        live = population
    else:
        live = LiveForecaster(population, n_draws=n_draws, random_seed=random_seed)
    rows = []
    for cut in cuts:
        prefix = RunsTable(
            points=points[points["step"] <= cut].reset_index(drop=True),
            runs=run_table.runs,
            report=run_table.report,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LiveUpdateWarning)  # reported per row as pareto_k
            update = live.update(prefix, horizon=T)
        decision = rule.decide(update.curve_draws, update.step, T)[0]
        phases = phase(update.curve_draws, update.step).iloc[0]
        rows.append(
            {
                "run_id": run_id,
                "step": update.step,
                "horizon_step": T,
                "n_points": len(prefix.points),
                "rule": decision.rule,
                "decision": decision.decision,
                "p_stop": decision.probability,
                "phase": phases["phase"],
                "p_phase": float(phases["probability"]),
                "slow_start": float(phases["slow_start"]),
                "rapid": float(phases["rapid"]),
                "plateau": float(phases["plateau"]),
                "expected_gain": decision.expected_gain,
                "gain_lower": decision.gain_lower,
                "gain_upper": decision.gain_upper,
                "pareto_k": update.posterior.pareto_k,
            }
        )
    logger.debug("stop history of %s: %d cuts", run_id, len(rows))
    return pd.DataFrame(rows, columns=list(HISTORY_COLUMNS))
