"""The ``bayesgrpo`` command line.

Subcommands import what they need when they run, so ``bayesgrpo --help`` starts fast and never
imports PyMC.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import warnings
from collections.abc import Sequence
from typing import Any

EXIT_OK = 0
EXIT_USER_ERROR = 2


def _parse_columns(text: str | None) -> dict[str, str] | None:
    if not text:
        return None
    mapping = {}
    for part in text.split(","):
        if "=" not in part:
            raise argparse.ArgumentTypeError(f"--columns wants name=column pairs, got {part!r}")
        key, value = part.split("=", 1)
        mapping[key.strip()] = value.strip()
    return mapping


def _format_number(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(number):
        return "-"
    return f"{number:.{digits}g}"


def _run_lines(summary: Any) -> list[str]:
    """One fixed-width line per run."""
    header = f"{'run_id':<48} {'family':<8} {'size_b':>6} {'points':>6} {'steps':>11} {'reward range':>19}  metrics"
    lines = [header]
    for row in summary.itertuples(index=False):
        run_id = row.run_id if len(row.run_id) <= 48 else row.run_id[:45] + "..."
        family = "-" if row.family is None or (isinstance(row.family, float)) or str(row.family) == "<NA>" else str(row.family)
        steps = "-" if row.n_points == 0 else f"{row.first_step}-{row.last_step}"
        reward_range = f"{_format_number(row.reward_min)} .. {_format_number(row.reward_max)}"
        shown = ", ".join(row.metrics[:4]) + (f" +{len(row.metrics) - 4}" if len(row.metrics) > 4 else "")
        lines.append(
            f"{run_id:<48} {family[:8]:<8} {_format_number(row.size_b):>6} {row.n_points:>6} {steps:>11} "
            f"{reward_range:>19}  {shown}"
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


def _report_lines(table: Any, verbose: bool) -> list[str]:
    issues = [i for i in table.report.issues if verbose or i.action != "info"]
    report = table.report
    lines = [
        f"read {report.records_read} records from {len(report.sources)} source(s): "
        f"kept {report.records_kept}, dropped {report.records_dropped}"
        + ("" if report.balanced else "  (ACCOUNTING MISMATCH: please report this bug)")
    ]
    if not issues:
        lines.append("nothing repaired or skipped" + ("" if verbose else " (--verbose lists notes)"))
    lines.extend(f"  {issue}" for issue in issues)
    return lines


def cmd_runs(args: argparse.Namespace) -> int:
    """``bayesgrpo runs PATH...``: one line per run and the reader's report."""
    from bayesgrpo.readers import load_runs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the report below says it all
        table = load_runs(
            args.paths,
            format=args.format,
            reward=args.reward,
            metadata=args.metadata,
            columns=_parse_columns(args.columns),
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
        print(line)
    if not args.quiet:
        print()
        for line in _report_lines(table, args.verbose):
            print(line)


def cmd_demo(args: argparse.Namespace) -> int:
    """``bayesgrpo demo``: the main job on the bundled real runs."""
    from bayesgrpo.datasets import load_bundled

    table = load_bundled(warn=False)
    _print_table(table, args)
    if not args.json:
        summary = table.summary()
        print()
        print(
            f"{len(summary)} runs, {int(summary['n_points'].sum())} reward points, "
            f"families: {', '.join(sorted(table.runs['family'].dropna().unique()))}"
        )
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (kept free of heavy imports)."""
    parser = argparse.ArgumentParser(
        prog="bayesgrpo",
        description="Forecast, stop and transfer RL fine-tuning reward curves (GRPO, PPO, DAPO, RLOO).",
    )
    from bayesgrpo._version import __version__

    parser.add_argument("--version", action="version", version=f"bayesgrpo {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def output_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.add_argument("-q", "--quiet", action="store_true", help="no reader report")
        p.add_argument("-v", "--verbose", action="store_true", help="list notes as well as repairs")

    runs = sub.add_parser("runs", help="summarise training logs: one line per run, and what was repaired or skipped")
    runs.add_argument("paths", nargs="+", help="log files or folders (read recursively)")
    runs.add_argument("--format", help="force a format (tensorboard, verl-console, trl-state, trl-console, notebook, wandb-csv, csv, jsonl, parquet)")
    runs.add_argument("--reward", help="metric to use as the reward (default: each format's train reward)")
    runs.add_argument("--metadata", help="CSV or YAML of run metadata keyed by run_id")
    runs.add_argument("--columns", help="plain tables: step=COL,reward=COL,run_id=COL")
    runs.add_argument("--logging-steps", type=int, help="TRL console logs: the trainer's logging_steps")
    runs.add_argument("--strict", action="store_true", help="fail at the first record that would be repaired or dropped")
    runs.add_argument("--skip-unreadable", action="store_true", help="skip (and report) files that cannot be read")
    output_flags(runs)
    runs.set_defaults(handler=cmd_runs)

    demo = sub.add_parser("demo", help="the main job on the bundled real runs")
    output_flags(demo)
    demo.set_defaults(handler=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bayesgrpo`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_OK
    from bayesgrpo.errors import BayesGRPOError

    try:
        return int(args.handler(args))
    except BayesGRPOError as exc:
        print(f"bayesgrpo: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
