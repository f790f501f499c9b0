"""One row a run: its forecast, stop decision, phase and reward now (:class:`ReportRun`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bayesgrpo.interfaces.html_report.markup import fmt_text
from bayesgrpo.interfaces.text import NO_HORIZON
from bayesgrpo.model.draws import band_draws
from bayesgrpo.questions.history import run_horizon
from bayesgrpo.questions.stopping import CurveDraws, phase

if TYPE_CHECKING:
    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.questions.stopping import StoppingRule

#: Logged rewards averaged into a run's "reward now".
RECENT_POINTS = 5
#: The decision of a run that gets none (no horizon, or past it).
NO_ANSWER = "no answer"


@dataclass(frozen=True)
class ReportRun:
    """What the report says about one run (one row of its summary table).

    Attributes
    ----------
    run_id, family, task : str or None
    size_b : float
    n_points : int
    step, horizon_step : float
        The last logged step and the step the run is planned to end at.
    reward_now : float
        Mean of the last :data:`RECENT_POINTS` logged rewards.
    final_median, final_lower, final_upper : float
        The reward at the horizon: median and 90% interval of ``band``.
    decision : str
        ``stop``, ``continue``, ``undecided``, or :data:`NO_ANSWER` (no horizon: ``reason`` says
        why, and the reward at the horizon and ``probability`` are NaN).
    probability : float
        The rule's probability (``P(gain < eps)`` for a plateau rule).
    reason : str
    phase : str
    phase_probability : float
    pareto_k : float
        The live update's importance-sampling diagnostic (NaN for a fitted model).
    band : {"predictive", "curve"}
        Which band the final reward's interval is: of a logged reward (noise included, whenever
        the draws carry the noise) or of the expected curve.
    method : str
        The path that gave the draws (``importance`` or ``ensemble_mcmc`` for a live update,
        ``nuts`` for a fitted model).
    departure_note : str
        What a live update saw when the run's latest points had left its band
        (``LiveUpdate.departure.note()``); empty when they had not, or for a fitted model.
    """

    run_id: str
    family: str | None
    task: str | None
    size_b: float
    n_points: int
    step: float
    horizon_step: float
    reward_now: float
    final_median: float
    final_lower: float
    final_upper: float
    decision: str
    probability: float
    reason: str
    phase: str
    phase_probability: float
    pareto_k: float = float("nan")
    band: str = "predictive"
    method: str = "nuts"
    departure_note: str = ""


def planned_horizons(
    table: RunsTable, horizon: float | Mapping[str, float] | None
) -> tuple[dict[str, float], dict[str, str]]:
    """Each run's horizon, and why each run that gets no stop advice gets none.

    A run's horizon is ``horizon`` (one for all, or per run), else its ``total_steps``. A run
    with neither, or already past it, is forecast up to its last logged step, and gets no
    decision: a stop rule weighs the gain left before the horizon, and without one any answer
    would be made up (as ``bayesgrpo stop`` says: "give --horizon").

    Returns
    -------
    horizons : dict
        ``run_id -> step`` for every run (its last logged step where it has no usable horizon).
    unanswered : dict
        ``run_id -> why`` for the runs that get no decision.
    """
    out: dict[str, float] = {}
    unanswered: dict[str, str] = {}
    for run_id in table.run_ids:
        one = table.select([run_id])
        given = horizon.get(run_id) if isinstance(horizon, Mapping) else horizon
        finite = one.points[np.isfinite(one.points["reward"].to_numpy(dtype=float))]
        last = float(finite["step"].max())
        planned = run_horizon(one, None if given is None else float(given))
        stated = given is not None or _states_total_steps(one)
        why = (
            NO_HORIZON
            if not stated
            else (f"already at step {last:.0f}, past the horizon {planned:g}" if planned < last else None)
        )
        if why is not None:
            unanswered[run_id] = why
            planned = max(planned, last)
        out[run_id] = planned
    return out, unanswered


def _states_total_steps(run: RunsTable) -> bool:
    """Whether a run's metadata state its planned total steps."""
    if "total_steps" not in run.runs:
        return False
    value = pd.to_numeric(run.runs["total_steps"], errors="coerce").iloc[0]
    return bool(pd.notna(value) and float(value) > 0)


def recent_reward(table: RunsTable) -> dict[str, float]:
    """Each run's reward now: the mean of its last :data:`RECENT_POINTS` logged rewards."""
    out = {}
    for run_id, frame in table.points.groupby("run_id", sort=False):
        reward = frame.sort_values("step")["reward"].to_numpy(dtype=float)
        reward = reward[np.isfinite(reward)]
        out[str(run_id)] = float(reward[-RECENT_POINTS:].mean()) if reward.size else float("nan")
    return out


def run_rows(
    table: RunsTable,
    draws: Mapping[str, CurveDraws],
    steps: Mapping[str, float],
    rule: StoppingRule,
    pareto: Mapping[str, float],
    methods: Mapping[str, str] | None = None,
    departures: Mapping[str, str] | None = None,
    unanswered: Mapping[str, str] | None = None,
) -> list[ReportRun]:
    """One :class:`ReportRun` per run from its curve draws (one run each); the final reward's
    interval is the predictive band where the draws carry the noise, else the curve's.
    ``departures``: the note of each run whose latest points had left its live update's band.
    ``unanswered``: why each run with no usable horizon gets no decision
    (:func:`planned_horizons`): its row says so, with no reward at a horizon and no probability.
    """
    recent = recent_reward(table)
    meta = table.runs.set_index("run_id")
    counts = table.points[np.isfinite(table.points["reward"].to_numpy(dtype=float))].groupby("run_id").size()
    rows = []
    for run_id in table.run_ids:
        cd = draws[run_id]
        horizon = float(np.asarray(cd.horizon_step)[0])
        band = "predictive" if cd.has_noise else "curve"
        final = band_draws(cd, [horizon], band, 0)[:, 0, 0]
        low, median, high = np.quantile(final, [0.05, 0.5, 0.95])
        why = (unanswered or {}).get(run_id)
        decision = (
            rule.decide(cd, steps[run_id], horizon)[0]
            if why is None
            else SimpleNamespace(decision=NO_ANSWER, probability=float("nan"), reason=why)
        )
        if why is not None:
            horizon, low, median, high = (float("nan"),) * 4
        phases = phase(cd, steps[run_id]).iloc[0]
        rows.append(
            ReportRun(
                run_id=run_id,
                family=fmt_text(meta.loc[run_id, "family"]),
                task=fmt_text(meta.loc[run_id, "task"]),
                size_b=float(meta.loc[run_id, "size_b"]),
                n_points=int(counts.get(run_id, 0)),
                step=float(steps[run_id]),
                horizon_step=horizon,
                reward_now=recent.get(run_id, float("nan")),
                final_median=float(median),
                final_lower=float(low),
                final_upper=float(high),
                decision=decision.decision,
                probability=decision.probability,
                reason=decision.reason,
                phase=str(phases["phase"]),
                phase_probability=float(phases["probability"]),
                pareto_k=float(pareto.get(run_id, float("nan"))),
                band=band,
                method=(methods or {}).get(run_id, "nuts"),
                departure_note=(departures or {}).get(run_id, ""),
            )
        )
    return rows


def split_by_run(cd: CurveDraws) -> dict[str, CurveDraws]:
    """Curve draws of several runs as one ``CurveDraws`` per run (their noise and recent rise kept)."""
    assert cd.run_ids is not None  # set by CurveDraws.__post_init__
    return {run_id: cd.select([run_id]) for run_id in cd.run_ids}
