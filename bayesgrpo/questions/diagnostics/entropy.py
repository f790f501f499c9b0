"""Policy concentration: the policy's entropy collapses."""

from __future__ import annotations

from typing import Any

from bayesgrpo.questions.diagnostics.finding import ACTIONS, Finding
from bayesgrpo.questions.diagnostics.trend import (
    MIN_POINTS,
    clean_series,
    edge_count,
    end_level,
    start_level,
    trend,
    trend_evidence,
)

# --- policy concentration ---------------------------------------------------------------------
#: Entropy at the end below this share of its start level, and falling: "warning" ...
ENTROPY_WARNING_RATIO = 0.1
#: ... below this share: "high".
ENTROPY_HIGH_RATIO = 0.03


def detect_policy_concentration(steps: Any, entropy: Any, *, run_id: str = "") -> list[Finding]:
    """Entropy collapse: the end level falls below a small share of the start level.

    ``ratio = end / start`` (medians of the first and last :data:`EDGE_FRACTION`); with the entropy
    falling significantly over the run, ``ratio < ENTROPY_WARNING_RATIO`` is a ``"warning"`` and
    ``ratio < ENTROPY_HIGH_RATIO`` ``"high"``.

    Parameters
    ----------
    steps, entropy : array_like, shape (n,)
    run_id : str
    """
    x, h = clean_series(steps, entropy)
    n = len(x)
    if n < MIN_POINTS:
        return []
    start, end = start_level(h), end_level(h)
    if not start > 0:
        return []
    ratio = end / start
    tr = trend(x, h)
    if not tr.falling() or ratio >= ENTROPY_WARNING_RATIO:
        return []
    severity = "high" if ratio < ENTROPY_HIGH_RATIO else "warning"
    evidence = {
        "signal": "entropy",
        "start_level": start,
        "end_level": end,
        "ratio": ratio,
        **trend_evidence("run", tr),
    }
    k = edge_count(n)
    return [
        Finding(
            run_id,
            "policy_concentration",
            severity,
            int(x[-k]),
            int(x[-1]),
            evidence,
            ACTIONS["policy_concentration"],
        )
    ]
