"""bayesgrpo: hierarchical Bayesian forecasts of RL fine-tuning reward curves.

Reading logs (``load_runs``) needs only numpy and pandas; the model modules import PyMC when
they are imported themselves, so the command line starts fast.
"""

from bayesgrpo._version import __version__
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
from bayesgrpo.table import RunsTable

__all__ = [
    "BayesGRPOError",
    "EmptyLogError",
    "LogReadError",
    "MalformedRecordError",
    "MetadataError",
    "ReadIssue",
    "ReadReport",
    "ReadWarning",
    "RunsTable",
    "TruncatedLogError",
    "UnknownFormatError",
    "UnknownMetricError",
    "__version__",
    "load_runs",
]
