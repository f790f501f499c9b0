"""What a held-out run's prediction is told: its metadata for zero-shot, none for the population mean."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from bayesgrpo.questions.live import stated_reward_range

#: Metadata a zero-shot prediction uses besides the reward range (the population mean drops all).
COVARIATES: tuple[str, ...] = ("family", "size_b", "task", "samples_per_step", "batch_size", "group_size")
#: Shares of a run's step span observed by the prefix methods.

# --------------------------------------------------------------------------------------------
# Metadata
# --------------------------------------------------------------------------------------------


def known_reward_bounds(metadata: Mapping[str, Any]) -> tuple[float, float] | None:
    """The reward range stated in a run's metadata, or None when missing or not a range.

    Parameters
    ----------
    metadata : mapping
        ``reward_min`` and ``reward_max``.

    Returns
    -------
    (float, float) or None
    """
    return stated_reward_range(metadata)


def _present(value: Any) -> bool:
    return value is not None and (isinstance(value, str) or not bool(pd.isna(value)))


def zero_shot_metadata(metadata: Mapping[str, Any], initial_reward: float | None = None) -> dict[str, Any]:
    """What a zero-shot prediction may know of a run: its covariates, reward range and id.

    Parameters
    ----------
    metadata : mapping
        A run's metadata row (``RunsTable.runs``).
    initial_reward : float, optional
        The run's reward before training, added as ``initial_reward``.

    Returns
    -------
    dict
        :data:`COVARIATES` that are present, ``reward_min``, ``reward_max``, ``run_id``; nothing
        about the run's logged points (``total_steps`` is not passed: the horizon is given to
        the prediction separately).
    """
    out = {
        key: metadata[key] for key in (*COVARIATES, "reward_min", "reward_max", "run_id") if key in metadata
    }
    out = {key: value for key, value in out.items() if _present(value)}
    if initial_reward is not None:
        out["initial_reward"] = float(initial_reward)
    return out


def population_mean_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The population's average run with this run's reward range: every covariate removed."""
    return {key: value for key, value in zero_shot_metadata(metadata).items() if key not in COVARIATES}


def prefix_label(fraction: float) -> str:
    """``0.05 -> "5pct"``: the suffix of the prefix methods and windows."""
    return f"{100 * float(fraction):g}pct"
