"""bayesgrpo: hierarchical Bayesian forecasts of RL fine-tuning reward curves.

Names are imported on first use (PEP 562), so ``import bayesgrpo`` and the command line start
fast; reading logs needs numpy and pandas, the model modules import PyMC themselves.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from bayesgrpo._version import __version__

_LAZY = {
    "BayesGRPOError": "bayesgrpo.errors",
    "EmptyLogError": "bayesgrpo.errors",
    "LogReadError": "bayesgrpo.errors",
    "MalformedRecordError": "bayesgrpo.errors",
    "MetadataError": "bayesgrpo.errors",
    "ReadWarning": "bayesgrpo.errors",
    "TruncatedLogError": "bayesgrpo.errors",
    "UnknownFormatError": "bayesgrpo.errors",
    "UnknownMetricError": "bayesgrpo.errors",
    "ReadIssue": "bayesgrpo.report",
    "ReadReport": "bayesgrpo.report",
    "RunsTable": "bayesgrpo.table",
    "load_runs": "bayesgrpo.readers",
    "load_bundled": "bayesgrpo.datasets",
    "RewardModel": "bayesgrpo.model.reward_model",
    "LiveForecaster": "bayesgrpo.live",
    "CurveDraws": "bayesgrpo.stopping",
    "PlateauRule": "bayesgrpo.stopping",
    "BudgetRule": "bayesgrpo.stopping",
    "TargetRule": "bayesgrpo.stopping",
}

if TYPE_CHECKING:
    from bayesgrpo.datasets import load_bundled
    from bayesgrpo.errors import (
        BayesGRPOError,
        EmptyLogError,
        LogReadError,
        MalformedRecordError,
        MetadataError,
        ReadWarning,
        TruncatedLogError,
        UnknownFormatError,
        UnknownMetricError,
    )
    from bayesgrpo.readers import load_runs
    from bayesgrpo.report import ReadIssue, ReadReport
    from bayesgrpo.live import LiveForecaster
    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.stopping import BudgetRule, CurveDraws, PlateauRule, TargetRule
    from bayesgrpo.table import RunsTable


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bayesgrpo' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))


__all__ = sorted([*_LAZY, "__version__"])
