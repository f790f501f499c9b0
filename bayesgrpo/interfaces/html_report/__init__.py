"""A self-contained HTML report of a set of runs: forecasts, stop decisions, phases, pooling,
transfer and diagnostics on one page.

The page needs nothing beyond itself: figures are base64 PNGs in ``data:`` URIs, the style is
inline, there is no script and nothing is fetched. For a fleet (hundreds to thousands of runs),
:func:`write_fleet_report` writes one sortable table instead, with figures only for the runs to
look at (its sorting script is inline too). Every string that came from a log (run ids,
families, tasks, file names, reader notes, evidence) is HTML-escaped.

Two ways to get each run's forecast:

* with a fitted ``population`` (e.g. ``RewardModel.load("model.nc")`` or
  ``datasets.bundled_population()``), each run is conditioned on it live
  (``bayesgrpo.questions.live.LiveForecaster``, milliseconds per run, no refit);
* without one, the pooled model is fitted on the runs themselves (``RewardModel().fit``).

Examples
--------
>>> from bayesgrpo.model.datasets import load_bundled  # doctest: +SKIP
>>> write_report(load_bundled(), "report.html", fit_kwargs={"draws": 300})  # doctest: +SKIP
"""

from __future__ import annotations

from bayesgrpo.interfaces.html_report.fleet import write_fleet_report
from bayesgrpo.interfaces.html_report.page import run_cli, write_report
from bayesgrpo.interfaces.html_report.runs import ReportRun
from bayesgrpo.interfaces.html_report.sections import transfer_specs

__all__ = [
    "ReportRun",
    "run_cli",
    "transfer_specs",
    "write_fleet_report",
    "write_report",
]
