"""Runs, cuts and horizons of the backtests, and the seeds that make them reproducible.

:func:`run_points` gives a run's logged points, :func:`cut_points` cuts it at a fraction of its
step span (a :class:`Cut`), :func:`planned_horizon` reads the step it was planned to end at, and
:func:`run_seed` gives a seed per (run, cut, method...) that does not depend on the order runs
are visited in.
"""

from __future__ import annotations

import zlib
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from bayesgrpo.errors import BacktestError, BayesGRPOError
from bayesgrpo.logs.table import RunsTable

#: Name of the Bayesian model among the methods of :func:`forecast_backtest`.
BAYES_METHOD = "bayesgrpo"
DEFAULT_CUTS: tuple[float, ...] = (0.1, 0.25, 0.5)
DEFAULT_METHODS: tuple[str, ...] = (
    BAYES_METHOD,
    "persistence",
    "exp_least_squares",
    "scalerl_sigmoid",
    "domhan_ensemble",
)
#: Share of a run's logged points whose mean is its final reward (at least one point).
FINAL_FRACTION = 0.05
#: Width of the centred rolling mean of the stopping backtest, as a share of a run's points.
SMOOTHING_FRACTION = 0.05
#: Fewest observed points a cut must leave for a forecast to be scored.
MIN_OBSERVED = 3


# What a live update may raise on an odd prefix (the package's own errors; numpy's LinAlgError is
# a ValueError). The backtests record it for that forecast or check and go on; others propagate.
UPDATE_ERRORS = (BayesGRPOError, ValueError, ArithmeticError)


# --------------------------------------------------------------------------------------------
# Runs, cuts, horizons
# --------------------------------------------------------------------------------------------


def run_points(table: RunsTable, run_id: str) -> pd.DataFrame:
    """One run's logged points with a finite reward, sorted by step: columns ``step``, ``reward``."""
    points = table.points
    frame = points.loc[points["run_id"] == run_id, ["step", "reward"]]
    frame = frame[np.isfinite(frame["reward"].to_numpy(dtype=float))]
    if frame.empty:
        raise BacktestError(f"run {run_id!r} has no logged point with a finite reward")
    return frame.sort_values("step").reset_index(drop=True)


class Cut(NamedTuple):
    """A run cut in two: the observed prefix and the held-out rest.

    Attributes
    ----------
    step : float
        The cut: points at steps ``<= step`` are observed.
    observed, held_out : DataFrame
        The run's points up to the cut and after it.
    """

    step: float
    observed: pd.DataFrame
    held_out: pd.DataFrame


def cut_points(run_points: pd.DataFrame, fraction: float) -> Cut:
    """Cut a run at the first ``fraction`` of its step span.

    The cut step is ``first + fraction * (last - first)`` with ``first`` and ``last`` the run's
    first and last logged steps; points at steps up to it (inclusive) are observed, the rest held
    out.

    Parameters
    ----------
    run_points : DataFrame
        One run's points with a ``step`` column (sorted or not).
    fraction : float
        In (0, 1).

    Returns
    -------
    Cut
    """
    fraction = float(fraction)
    if not 0.0 < fraction < 1.0:
        raise BacktestError(f"a cut must be a fraction strictly between 0 and 1 of the run; got {fraction}")
    if len(run_points) == 0:
        raise BacktestError("cannot cut a run without points")
    frame = run_points.sort_values("step").reset_index(drop=True)
    steps = frame["step"].to_numpy(dtype=float)
    step = float(steps[0] + fraction * (steps[-1] - steps[0]))
    observed = steps <= step
    return Cut(step, frame[observed].reset_index(drop=True), frame[~observed].reset_index(drop=True))


def planned_horizon(run: RunsTable) -> float:
    """The step one run is planned to end at, as a population fit reads it: metadata
    ``total_steps`` when stated and not before the last logged step, else the last logged step.

    The live update of a cut prefix needs it: the prefix's own last step is not the run's end.
    """
    if len(run.runs) != 1:
        raise BacktestError(f"planned_horizon takes one run; got {len(run.runs)}")
    run_id = str(run.runs["run_id"].iloc[0])
    last = float(run_points(run, run_id)["step"].iloc[-1])
    planned = pd.to_numeric(pd.Series([run.runs.iloc[0].get("total_steps")]), errors="coerce").iloc[0]
    return float(planned) if pd.notna(planned) and float(planned) >= last else last


def prefix_table(run: RunsTable, observed: pd.DataFrame) -> RunsTable:
    """The run's table holding only its observed points (metadata unchanged)."""
    run_id = str(run.runs["run_id"].iloc[0])
    points = run.points[(run.points["run_id"] == run_id) & run.points["step"].isin(observed["step"])]
    return RunsTable(points=points.reset_index(drop=True), runs=run.runs, report=run.report)


def run_seed(random_seed: int, *parts: Any) -> int:
    """A seed per (run, cut, method...) that does not depend on the order runs are visited."""
    words = [int(random_seed) & 0xFFFFFFFF] + [zlib.crc32(str(p).encode()) for p in parts]
    return int(np.random.SeedSequence(words).generate_state(1)[0])
