"""bayesgrpo: hierarchical Bayesian forecasts of RL fine-tuning reward curves.

The package is laid out as its pipeline, one folder a layer, each importing only those before it
(``docs/ARCHITECTURE.md``; an import-linter contract in ``pyproject.toml`` keeps it so):

1. ``bayesgrpo.logs``: readers and writers of training logs, the runs table;
2. ``bayesgrpo.model``: curve families, the population model, one run's Laplace conditioning;
3. ``bayesgrpo.questions``: live updates, stopping, transfer, diagnostics, history;
4. ``bayesgrpo.interfaces`` and ``bayesgrpo.integrations``: figures, report, CLI, watch, and the
   TRL and verl hooks;
5. ``bayesgrpo.evaluate``: backtests and baselines.

Names are imported on first use (PEP 562), so ``import bayesgrpo`` and the command line start
fast; reading logs needs numpy and pandas, the model modules import PyMC themselves. The old
top-level module paths (``bayesgrpo.stopping``, ``bayesgrpo.live``, ...) keep working
(:mod:`bayesgrpo._moved`).
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from bayesgrpo import _moved
from bayesgrpo._version import __version__

_moved.install()

# ArviZ 0.22+ announces its coming 1.0 refactor with a FutureWarning when it is imported. It
# concerns code written against ArviZ, not a bayesgrpo user: nothing they can act on, so it is not
# shown (only that one message; every other warning of ArviZ still is).
warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning)

_LAZY = {
    "BacktestError": "bayesgrpo.errors",
    "BaselineInputError": "bayesgrpo.errors",
    "BayesGRPOError": "bayesgrpo.errors",
    "BayesGRPOWarning": "bayesgrpo.errors",
    "LiveUpdateWarning": "bayesgrpo.errors",
    "ForecastDepartureWarning": "bayesgrpo.errors",
    "FitWarning": "bayesgrpo.errors",
    "ModelConfigError": "bayesgrpo.errors",
    "FitTooLargeError": "bayesgrpo.errors",
    "NotFittedError": "bayesgrpo.errors",
    "ScoreInputError": "bayesgrpo.errors",
    "EmptyLogError": "bayesgrpo.errors",
    "EngineLostError": "bayesgrpo.errors",
    "RecordTooLargeError": "bayesgrpo.errors",
    "LogReadError": "bayesgrpo.errors",
    "MalformedRecordError": "bayesgrpo.errors",
    "MetadataError": "bayesgrpo.errors",
    "ReadWarning": "bayesgrpo.errors",
    "TruncatedLogError": "bayesgrpo.errors",
    "UnknownFormatError": "bayesgrpo.errors",
    "UnknownMetricError": "bayesgrpo.errors",
    "ReadIssue": "bayesgrpo.logs.report",
    "ReadReport": "bayesgrpo.logs.report",
    "RunsTable": "bayesgrpo.logs.table",
    "load_runs": "bayesgrpo.logs.readers",
    "load_bundled": "bayesgrpo.model.datasets",
    "RewardModel": "bayesgrpo.model.reward_model",
    "LiveForecaster": "bayesgrpo.questions.live",
    "CurveDraws": "bayesgrpo.questions.stopping",
    "PlateauRule": "bayesgrpo.questions.stopping",
    "BudgetRule": "bayesgrpo.questions.stopping",
    "GainRateRule": "bayesgrpo.questions.stopping",
    "GuardedBudgetRule": "bayesgrpo.questions.stopping",
    "FixedBudgetRule": "bayesgrpo.questions.stopping",
    "TargetRule": "bayesgrpo.questions.stopping",
    "Confirmed": "bayesgrpo.questions.stopping",
}

if TYPE_CHECKING:
    from bayesgrpo.errors import (
        BacktestError,
        BaselineInputError,
        BayesGRPOError,
        BayesGRPOWarning,
        EmptyLogError,
        EngineLostError,
        FitTooLargeError,
        FitWarning,
        ForecastDepartureWarning,
        LiveUpdateWarning,
        LogReadError,
        MalformedRecordError,
        MetadataError,
        ModelConfigError,
        NotFittedError,
        ReadWarning,
        RecordTooLargeError,
        ScoreInputError,
        TruncatedLogError,
        UnknownFormatError,
        UnknownMetricError,
    )
    from bayesgrpo.logs.readers import load_runs
    from bayesgrpo.logs.report import ReadIssue, ReadReport
    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.datasets import load_bundled
    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.questions.live import LiveForecaster
    from bayesgrpo.questions.stopping import (
        BudgetRule,
        Confirmed,
        CurveDraws,
        FixedBudgetRule,
        GainRateRule,
        GuardedBudgetRule,
        PlateauRule,
        TargetRule,
    )


#: Subpackages (and moved modules' old names) that ``bayesgrpo.<name>`` imports on first use.
_SUBMODULES = ("errors", "logs", "model", "questions", "interfaces", "integrations", "evaluate")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES or f"{__name__}.{name}" in _moved.MOVED_MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'bayesgrpo' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))


__all__ = [
    "BacktestError",
    "BaselineInputError",
    "BayesGRPOError",
    "BayesGRPOWarning",
    "BudgetRule",
    "GainRateRule",
    "FixedBudgetRule",
    "GuardedBudgetRule",
    "CurveDraws",
    "EmptyLogError",
    "FitTooLargeError",
    "LiveForecaster",
    "Confirmed",
    "FitWarning",
    "ForecastDepartureWarning",
    "LiveUpdateWarning",
    "LogReadError",
    "EngineLostError",
    "RecordTooLargeError",
    "MalformedRecordError",
    "MetadataError",
    "ModelConfigError",
    "NotFittedError",
    "PlateauRule",
    "ReadIssue",
    "ReadReport",
    "ReadWarning",
    "RewardModel",
    "RunsTable",
    "ScoreInputError",
    "TargetRule",
    "TruncatedLogError",
    "UnknownFormatError",
    "UnknownMetricError",
    "__version__",
    "load_bundled",
    "load_runs",
]
