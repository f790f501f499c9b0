"""Reward hacking: the training reward rises while a validation reward falls or the length runs away."""

from __future__ import annotations

from typing import Any

import numpy as np

from bayesgrpo.questions.diagnostics.finding import ACTIONS, Finding
from bayesgrpo.questions.diagnostics.trend import (
    MIN_POINTS,
    clean_series,
    end_level,
    last_half,
    start_level,
    trend,
    trend_evidence,
)

# --- reward hacking ---------------------------------------------------------------------------
#: A validation fall counts when its Theil-Sen change over the last half is at least this share of
#: the validation metric's range over the run.
HACK_MIN_VAL_DROP = 0.1
#: Completion length at the end at least this multiple of its start level, and rising over the
#: last half, is a runaway.
LENGTH_RUNAWAY_RATIO = 2.0
#: Validation metrics looked for, in order: an exact column name or a prefix.
VALIDATION_COLUMNS: tuple[str, ...] = ("val_reward", "val-core/", "val/", "test_score/", "val-aux/")
#: Completion-length metrics looked for, in order.
LENGTH_COLUMNS: tuple[str, ...] = ("completion_length", "response_length/mean")


def detect_reward_hacking(
    steps: Any,
    reward: Any,
    *,
    val_steps: Any = None,
    val_reward: Any = None,
    length_steps: Any = None,
    length: Any = None,
    val_signal: str = "val_reward",
    length_signal: str = "completion_length",
    run_id: str = "",
) -> list[Finding]:
    """The training reward rises while validation falls or the completion length runs away.

    Over the last half of the run's steps (from the middle step of the reward to its last step):
    the reward rises significantly (Mann-Kendall) and either the validation reward falls
    significantly over the same steps, by at least :data:`HACK_MIN_VAL_DROP` of its range over the
    run (``"high"``), or the completion length ends at least
    :data:`LENGTH_RUNAWAY_RATIO` times its start level and rises significantly over those steps
    (``"warning"``).

    Parameters
    ----------
    steps, reward : array_like, shape (n,)
    val_steps, val_reward : array_like, optional
        The validation metric (logged more sparsely).
    length_steps, length : array_like, optional
        The mean completion length.
    val_signal, length_signal : str
        The metrics' names, for the evidence.
    run_id : str
    """
    x, y = clean_series(steps, reward)
    if len(x) < MIN_POINTS:
        return []
    hx, hy = last_half(x, y)
    tr_reward = trend(hx, hy)
    if not tr_reward.rising():
        return []
    lo, hi = hx[0], hx[-1]
    evidence: dict[str, Any] = {"signal": "reward", **trend_evidence("reward", tr_reward)}
    reasons: list[str] = []
    severity = ""
    if val_steps is not None and val_reward is not None:
        vx, vy = clean_series(val_steps, val_reward)
        window = (vx >= lo) & (vx <= hi)
        if window.sum() >= 4:
            tr_val = trend(vx[window], vy[window])
            val_range = float(np.ptp(vy))
            if tr_val.falling() and -tr_val.change >= HACK_MIN_VAL_DROP * val_range > 0:
                severity = "high"
                reasons.append(f"{val_signal} falls")
                evidence.update(
                    {
                        "val_signal": val_signal,
                        "val_peak": float(vy.max()),
                        "val_end": end_level(vy),
                        **trend_evidence("val", tr_val),
                    }
                )
    if length_steps is not None and length is not None:
        lx, ly = clean_series(length_steps, length)
        if len(lx) >= MIN_POINTS:
            start = start_level(ly)
            end = end_level(ly)
            window = (lx >= lo) & (lx <= hi)
            tr_len = trend(lx[window], ly[window])
            if start > 0 and end / start >= LENGTH_RUNAWAY_RATIO and tr_len.rising():
                severity = severity or "warning"
                reasons.append(f"{length_signal} runs away")
                evidence.update(
                    {
                        "length_signal": length_signal,
                        "length_start": start,
                        "length_end": end,
                        "length_ratio": end / start,
                        **trend_evidence("length", tr_len),
                    }
                )
    if not reasons:
        return []
    what = " and ".join(reasons)
    return [
        Finding(
            run_id,
            "reward_hacking",
            severity,
            int(lo),
            int(hi),
            evidence,
            ACTIONS["reward_hacking"].format(what=what),
        )
    ]
