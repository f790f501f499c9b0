"""The package's own error and warning types.

Every failure a user can cause with their input is one of these: a reader never lets a
``KeyError``, ``ValueError`` or ``json.JSONDecodeError`` escape. Each message says what was
found, where (file, line, step), and what to do about it.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any


class BayesGRPOError(Exception):
    """Base class of every error bayesgrpo raises on purpose."""


class LogReadError(BayesGRPOError):
    """A log could not be read as the format it claims to be.

    Parameters
    ----------
    message : str
        What was found and what to do.
    path : str or Path, optional
        The file the problem is in.
    location : str, optional
        Where in the file: ``"line 12"``, ``"byte 4096"``, ``"log_history[3]"``.
    """

    def __init__(self, message: str, path: str | Path | None = None, location: str | None = None):
        self.path = None if path is None else str(path)
        self.location = location
        where = ""
        if self.path is not None:
            where = self.path + (f", {location}" if location else "") + ": "
        super().__init__(where + message)


class EmptyLogError(LogReadError):
    """A log holds no data points at all (an empty file, or no line of the expected shape)."""


class TruncatedLogError(LogReadError):
    """A log ends mid-record (a JSON cut mid-way, a torn TensorBoard record) and ``strict=True``."""


class MalformedRecordError(LogReadError):
    """A record is malformed (bad step, non-number value...) and ``strict=True`` forbids repairs."""


class RecordTooLargeError(LogReadError):
    """A record is past a reader's bound: a line longer than ``MAX_LINE_BYTES`` or with more than
    ``MAX_METRICS_PER_LINE`` metrics (``bayesgrpo.logs.readers._limits``); raised before it is parsed.
    """


class EngineLostError(BayesGRPOError):
    """The engine lost what runs the work (a Ray node, its raylet or agent, the cluster) before
    every item was answered.

    Parameters
    ----------
    message : str
        What was lost, and how many items were answered before.
    done : dict of int to result
        The results of the items answered before, by the items' index in the map.
    """

    def __init__(self, message: str, done: dict[int, Any]) -> None:
        super().__init__(message)
        self.done = done


class UnknownFormatError(LogReadError):
    """No reader recognises a file; the message lists the formats that were tried."""


class UnknownMetricError(BayesGRPOError, KeyError):
    """A metric name (for example the ``reward=`` key) matches no column of the log.

    Parameters
    ----------
    name : str
        The name asked for.
    available : list of str
        The metric names the log has.
    where : str, optional
        The file or run the name was looked up in.
    """

    def __init__(self, name: str, available: list[str], where: str | None = None):
        self.name = name
        self.available = sorted(available)
        close = difflib.get_close_matches(name, self.available, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        shown = ", ".join(repr(a) for a in self.available[:40])
        more = f" (+{len(self.available) - 40} more)" if len(self.available) > 40 else ""
        location = f" in {where}" if where else ""
        self.message = f"no metric named {name!r}{location}.{hint} Available: {shown}{more}."
        super().__init__(self.message)

    def __str__(self) -> str:  # KeyError would quote the whole message otherwise
        return self.message


class MetadataError(BayesGRPOError, ValueError):
    """User-given run metadata is malformed (wrong type, no ``run_id`` key, unreadable file)."""


class ModelConfigError(BayesGRPOError):
    """A model's configuration is invalid, or a saved model's does not match what it claims or what
    this version builds (raised by ``RewardModel(...)`` and ``RewardModel.load``), or a model read
    from its live summary finds, when it first reads its posterior, that its file was replaced.
    """


class FitTooLargeError(BayesGRPOError, MemoryError):
    """A fit would need more memory than the machine has free; raised before sampling starts.

    Carries ``needed_bytes`` and ``available_bytes``; the message names the population's size and
    the faster path (fewer draws, ``sampler="advi"`` or ``"pathfinder"``).
    """

    def __init__(self, message: str, needed_bytes: int, available_bytes: int) -> None:
        super().__init__(message)
        self.needed_bytes = needed_bytes
        self.available_bytes = available_bytes


class NotFittedError(BayesGRPOError):
    """A method needs a fitted model (``RewardModel.predict``, ``LiveForecaster`` on an unfitted one...)."""


class BacktestError(BayesGRPOError, ValueError):
    """A backtest was asked something it cannot do (unknown method, run without a population...)."""


class BaselineInputError(BayesGRPOError, ValueError):
    """The observed prefix or the target steps given to a baseline cannot be used."""


class ScoreInputError(BayesGRPOError, ValueError):
    """Draws or observations that cannot be scored (shapes disagree, non-finite values)."""


class BayesGRPOWarning(UserWarning):
    """Base class of every warning bayesgrpo issues on purpose: filter them all with this one."""


class ReadWarning(BayesGRPOWarning):
    """Rows or values were repaired or dropped while reading; the report says which and where."""


class LiveUpdateWarning(BayesGRPOWarning):
    """The live update's importance weights were unreliable (Pareto k above 0.7) and its MCMC
    fallback mixed poorly too.
    """


class ForecastDepartureWarning(LiveUpdateWarning):
    """A run's latest logged points lie outside its live update's 90% predictive band far more
    often than the band allows (``questions.live.departure.recent_departure``): the run has left
    every curve the population finds plausible, or its noise has grown past what the update
    estimated. The forecast is not changed; trust its band less until the run settles.
    """


class FitWarning(BayesGRPOWarning):
    """A population fit that did not mix well: divergences, chains that disagree, few effective
    draws, or an approximate sampler. Issued once per message by ``RewardModel.fit``; the same
    messages are in ``RewardModel.diagnostics.warnings``.
    """
