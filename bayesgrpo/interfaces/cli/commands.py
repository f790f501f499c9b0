"""The verbs of the ``bayesgrpo`` command: ``runs``, ``demo``, ``forecast``, ``stop``, ``watch``,
``diagnose`` and ``report``.

``runs``, ``watch`` and ``report`` are here; the others have a module each (``forecast.py`` for
``forecast`` and ``demo``, ``stop.py``, ``diagnose.py``), and what they share is in ``common.py``.
Every verb, the exit statuses and :func:`cut_table` stay importable from here.

Each verb imports what it needs when it runs, so ``bayesgrpo --help`` starts fast and never
imports PyMC (``benchmarks/cli_startup.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from typing import Any

from bayesgrpo._text import printable
from bayesgrpo.interfaces.cli.common import (
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USER_ERROR,
    format_number,
    parse_columns,
    say,
    short_name,
)
from bayesgrpo.interfaces.cli.diagnose import NOT_DIAGNOSED, cmd_diagnose
from bayesgrpo.interfaces.cli.forecast import cmd_demo, cmd_forecast, cut_table
from bayesgrpo.interfaces.cli.stop import CONFIRM_SPACING, cmd_stop, stop_rule
from bayesgrpo.interfaces.logs_input import report_lines

__all__ = [
    "CONFIRM_SPACING",
    "EXIT_INCOMPLETE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USER_ERROR",
    "NOT_DIAGNOSED",
    "cmd_demo",
    "cmd_diagnose",
    "cmd_forecast",
    "cmd_report",
    "cmd_runs",
    "cmd_stop",
    "cmd_watch",
    "cut_table",
]


def _run_lines(summary: Any) -> list[str]:
    """One fixed-width line per run."""
    header = (
        f"{'run_id':<48} {'family':<8} {'size_b':>6} {'points':>6} {'steps':>11} {'reward range':>19}  "
        "metrics"
    )
    lines = [header]
    for row in summary.itertuples(index=False):
        run_id = short_name(row.run_id, 48)
        family = (
            "-"
            if row.family is None or (isinstance(row.family, float)) or str(row.family) == "<NA>"
            else str(row.family)
        )
        steps = "-" if row.n_points == 0 else f"{row.first_step}-{row.last_step}"
        reward_range = f"{format_number(row.reward_min)} .. {format_number(row.reward_max)}"
        shown = ", ".join(row.metrics[:4]) + (f" +{len(row.metrics) - 4}" if len(row.metrics) > 4 else "")
        lines.append(
            printable(
                f"{run_id:<48} {family[:8]:<8} {format_number(row.size_b):>6} {row.n_points:>6} {steps:>11} "
                f"{reward_range:>19}  {shown}"
            )
        )
    return lines


def _summary_json(table: Any) -> dict[str, Any]:
    summary = table.summary()
    runs = []
    for record in summary.to_dict("records"):
        clean = {}
        for key, value in record.items():
            if isinstance(value, float) and math.isnan(value):
                value = None
            elif hasattr(value, "item"):
                value = value.item()
            elif value is not None and str(value) == "<NA>":
                value = None
            clean[key] = value
        runs.append(clean)
    return {"runs": runs, "report": table.report.to_dict()}


def cmd_runs(args: argparse.Namespace) -> int:
    """``bayesgrpo runs PATH...``: one line per run and the reader's report."""
    from bayesgrpo.logs.readers import load_runs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the report below says it all
        table = load_runs(
            args.paths,
            format=args.format,
            reward=args.reward,
            metadata=args.metadata,
            columns=parse_columns(args.columns),
            logging_steps=args.logging_steps,
            strict=args.strict,
            skip_unreadable=args.skip_unreadable,
            warn=False,
        )
    _print_table(table, args)
    return EXIT_OK


def _print_table(table: Any, args: argparse.Namespace) -> None:
    if args.json:
        json.dump(_summary_json(table), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return
    for line in _run_lines(table.summary()):
        say(line)
    if not args.quiet:
        print()
        for line in report_lines(table, args.verbose):
            say(line)


def cmd_watch(args: argparse.Namespace) -> int:
    """``bayesgrpo watch``: follow growing logs; per run, redraw its forecast and the rule's advice
    every few seconds (``bayesgrpo.interfaces.watch``).
    """
    from bayesgrpo.interfaces.watch import main_from_args

    return main_from_args(args, stop_rule(args))


def cmd_report(args: argparse.Namespace) -> int:
    """``bayesgrpo report LOGS... -o report.html``: a self-contained HTML report.

    The page is written by :mod:`bayesgrpo.interfaces.html_report`.
    """
    from bayesgrpo.interfaces.html_report import run_cli

    path, unanswered = run_cli(args)
    if not args.quiet:
        print(f"wrote {path}")
    if unanswered:  # as stop and forecast: an error only when no run can be answered
        for run_id, why in unanswered.items():
            say(f"{run_id}: no answer: {why}")
        print("bayesgrpo: error: no run could be answered; each row of the page says why", file=sys.stderr)
        return EXIT_USER_ERROR
    return EXIT_OK
