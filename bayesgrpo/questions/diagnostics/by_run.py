"""Every detector over a runs table: :func:`diagnose` and :func:`findings_by_run`."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo.questions.diagnostics.advantage import ZERO_STD_TOL, detect_advantage_degeneracy
from bayesgrpo.questions.diagnostics.entropy import detect_policy_concentration
from bayesgrpo.questions.diagnostics.finding import FINDING_COLUMNS, SEVERITIES, Finding
from bayesgrpo.questions.diagnostics.hacking import LENGTH_COLUMNS, VALIDATION_COLUMNS, detect_reward_hacking
from bayesgrpo.questions.diagnostics.oscillation import detect_oscillation
from bayesgrpo.questions.diagnostics.reward import STALL_EPS, detect_collapse, detect_stall, reward_at_ceiling
from bayesgrpo.questions.diagnostics.trend import MIN_POINTS, clean_series, end_level, smoothed
from bayesgrpo.questions.stopping import prob_gain_below

if TYPE_CHECKING:
    from bayesgrpo.logs.table import RunsTable

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# Over a runs table
# --------------------------------------------------------------------------------------------


def _series(frame: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray] | None:
    if column not in frame.columns:
        return None
    sub = frame[["step", column]].dropna()
    if len(sub) == 0:
        return None
    return sub["step"].to_numpy(dtype=float), sub[column].to_numpy(dtype=float)


def _find_column(frame: pd.DataFrame, candidates: Sequence[str]) -> str | None:
    present = [c for c in frame.columns if frame[c].notna().any()]
    for name in candidates:
        for column in present:
            if column == name or (name.endswith("/") and column.startswith(name)):
                return column
    return None


def _bound(meta: pd.Series, name: str) -> float | None:
    value = meta.get(name)
    if value is None or pd.isna(value):
        return None
    return float(value)


def peer_summaries(runs: RunsTable, peer_keys: Sequence[str] = ("family", "task")) -> list[dict[str, Any]]:
    """What the stall test's peer reference needs of each run with enough points: its end level,
    the span of its smoothed reward, its ``peer_keys`` values and its reward bounds (a record a
    run; the fleet collects them run by run, :func:`peer_references` puts them together).
    """
    meta = runs.runs.set_index("run_id")
    finite = runs.points[np.isfinite(runs.points["reward"].to_numpy(dtype=float))]
    out = []
    for run_id, frame in finite.groupby("run_id", sort=False):
        _, y = clean_series(frame["step"], frame["reward"])
        if len(y) < MIN_POINTS or str(run_id) not in meta.index:
            continue
        smooth = smoothed(y)
        row = meta.loc[str(run_id)]
        out.append(
            {
                "run_id": str(run_id),
                "end": end_level(y),
                "span": (float(smooth.min()), float(smooth.max())),
                "keys": {k: (row.get(k) if k in meta.columns else None) for k in peer_keys},
                "bounds": (_bound(row, "reward_min"), _bound(row, "reward_max")),
            }
        )
    return out


def peer_references(
    summaries: Sequence[dict[str, Any]], peer_keys: Sequence[str] = ("family", "task")
) -> dict[str, tuple[float, float, float]]:
    """Per run with comparable runs: (reference level, lower, upper) of its stall test.

    Runs are comparable when they share every metadata value in ``peer_keys`` (missing values
    match nothing). The reference is the best end level among the group (the run included); the
    range is the reward's known bounds, or the span of the group's smoothed rewards.
    """
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for summary in summaries:
        values = tuple(summary["keys"].get(k) for k in peer_keys)
        if any(v is None or (not isinstance(v, str) and bool(pd.isna(v))) for v in values):
            continue
        groups.setdefault(values, []).append(summary)
    out: dict[str, tuple[float, float, float]] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        reference = max(m["end"] for m in members)
        span_lo = min(m["span"][0] for m in members)
        span_hi = max(m["span"][1] for m in members)
        for m in members:
            lower, upper = m["bounds"]
            if lower is None or upper is None or not upper > lower:
                lower, upper = span_lo, span_hi
            out[m["run_id"]] = (reference, lower, upper)
    return out


def _prob_no_gain(fitted_model: Any, last_steps: dict[str, float]) -> dict[str, float]:
    """``P(R(2s) - R(s) < STALL_EPS * range)`` per fitted run, at its last observed step ``s``."""
    cd = fitted_model.curve_draws()
    ids = list(cd.run_ids or [])
    s = np.array([last_steps.get(r, np.nan) for r in ids], dtype=float)
    known = np.isfinite(s)
    if not known.any():
        return {}
    s = np.where(known, s, 0.0)
    probs = prob_gain_below(cd, s, 2.0 * s, eps=STALL_EPS, relative=True)
    return {r: float(p) for r, p, k in zip(ids, probs, known, strict=True) if k}


def findings_by_run(
    runs: RunsTable,
    fitted_model: Any = None,
    *,
    peer_keys: Sequence[str] = ("family", "task"),
    oscillation: bool = False,
    random_seed: int = 0,
    references: Mapping[str, tuple[float, float, float]] | None = None,
) -> dict[str, list[Finding]]:
    """Every detector on every run of a table.

    Parameters
    ----------
    runs : RunsTable
    fitted_model : optional
        A fitted model with ``curve_draws()`` (:class:`bayesgrpo.model.RewardModel`); its posterior
        replaces the stall detector's trend test for the runs it was fitted on.
    peer_keys : sequence of str
        Metadata columns that make runs comparable for the stall detector's reference level.
    oscillation : bool
        Also run :func:`detect_oscillation`: three small MCMC fits per run, a few seconds each
        (plus about a minute to compile them once per process), so off by default.
    random_seed : int
        Seed of the oscillation fits.
    references : mapping run_id -> (level, lower, upper), optional
        The stall test's peer references, when they were put together elsewhere (the fleet reads
        runs one by one: :func:`peer_summaries` of each, :func:`peer_references` of all); default
        from ``runs`` itself.

    Returns
    -------
    dict of str to list of Finding
        Every run of the table, in its order, with its findings (possibly none).
    """
    if references is None:
        references = peer_references(peer_summaries(runs, peer_keys), peer_keys)
    meta = runs.runs.set_index("run_id")
    grouped = dict(tuple(runs.points.groupby("run_id", sort=False)))
    out: dict[str, list[Finding]] = {}
    last_steps: dict[str, float] = {}
    for run_id in runs.run_ids:
        frame = grouped.get(run_id)
        series = None if frame is None else _series(frame, "reward")
        if series is not None:
            last_steps[run_id] = float(series[0].max())
    prob_no_gain = {} if fitted_model is None else _prob_no_gain(fitted_model, last_steps)
    for run_id in runs.run_ids:
        found: list[Finding] = []
        frame = grouped.get(run_id)
        out[run_id] = found
        if frame is None:
            continue
        frame = frame.dropna(axis=1, how="all")
        reward = _series(frame, "reward")
        if reward is not None:
            collapse = detect_collapse(*reward, floor=_bound(meta.loc[run_id], "reward_min"), run_id=run_id)
            found += collapse
            reference, lower, upper = references.get(run_id, (None, None, None))
            if not collapse:  # a collapsed run is not also called stalled
                found += detect_stall(
                    *reward,
                    reference=reference,
                    lower=lower,
                    upper=upper,
                    prob_no_gain=prob_no_gain.get(run_id),
                    run_id=run_id,
                )
            if oscillation:
                found += detect_oscillation(
                    *reward,
                    lower=_bound(meta.loc[run_id], "reward_min"),
                    upper=_bound(meta.loc[run_id], "reward_max"),
                    run_id=run_id,
                    random_seed=random_seed,
                )
        solved = reward is not None and reward_at_ceiling(
            *reward, reward_max=_bound(meta.loc[run_id], "reward_max")
        )
        frac = _series(frame, "frac_reward_zero_std")
        if frac is not None:
            found += detect_advantage_degeneracy(*frac, run_id=run_id, solved=solved)
        else:
            spread = _series(frame, "reward_std")
            if spread is not None:
                zero = (np.abs(spread[1]) <= ZERO_STD_TOL).astype(float)
                found += detect_advantage_degeneracy(
                    spread[0], zero, signal="reward_std == 0 (every group)", run_id=run_id, solved=solved
                )
        entropy = _series(frame, "entropy")
        if entropy is not None:
            found += detect_policy_concentration(*entropy, run_id=run_id)
        if reward is not None:
            val_column = _find_column(frame, VALIDATION_COLUMNS)
            length_column = _find_column(frame, LENGTH_COLUMNS)
            val = _series(frame, val_column) if val_column else None
            length = _series(frame, length_column) if length_column else None
            found += detect_reward_hacking(
                *reward,
                val_steps=None if val is None else val[0],
                val_reward=None if val is None else val[1],
                length_steps=None if length is None else length[0],
                length=None if length is None else length[1],
                val_signal=val_column or "val_reward",
                length_signal=length_column or "completion_length",
                run_id=run_id,
            )
        if found:
            logger.debug("run %s: %s", run_id, ", ".join(f"{f.name} ({f.severity})" for f in found))
    return out


def diagnose(
    runs: RunsTable,
    fitted_model: Any = None,
    *,
    peer_keys: Sequence[str] = ("family", "task"),
    oscillation: bool = False,
    random_seed: int = 0,
    references: Mapping[str, tuple[float, float, float]] | None = None,
) -> pd.DataFrame:
    """Findings of every run of a table, one row per finding.

    Parameters
    ----------
    runs, fitted_model, peer_keys, oscillation, random_seed, references
        As :func:`findings_by_run`.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`FINDING_COLUMNS`; ``evidence`` holds a dict per row. Sorted by run (table
        order), then severity (highest first).

    Examples
    --------
    >>> from bayesgrpo.model.datasets import load_bundled
    >>> table = diagnose(load_bundled())  # doctest: +SKIP
    >>> table[table["severity"] == "high"][["run_id", "name"]]  # doctest: +SKIP
    """
    found_by_run = findings_by_run(
        runs,
        fitted_model,
        peer_keys=peer_keys,
        oscillation=oscillation,
        random_seed=random_seed,
        references=references,
    )
    rows = [asdict(f) for found in found_by_run.values() for f in found]
    table = pd.DataFrame(rows, columns=list(FINDING_COLUMNS))
    if len(table):
        rank = table["severity"].map({s: -i for i, s in enumerate(SEVERITIES)})
        order = {r: i for i, r in enumerate(runs.run_ids)}
        table = (
            table.assign(_run=table["run_id"].map(order), _rank=rank)
            .sort_values(["_run", "_rank"], kind="stable")
            .drop(columns=["_run", "_rank"])
            .reset_index(drop=True)
        )
    return table
