"""Reading a command's logs: what the readers repaired, said once, on stderr.

Every command that reads logs (``stop``, ``forecast``, ``diagnose``, ``report``; ``runs`` prints
the whole report itself) reads them through :func:`read_logs`: one summary line on stderr when
anything was repaired or dropped, the full list with ``--verbose``, nothing with ``--quiet``,
and with ``--strict`` the first record that would be repaired or dropped is an error instead.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from bayesgrpo._text import printable


def report_lines(table: Any, verbose: bool) -> list[str]:
    """The reader's report as lines: totals, then each repair or drop (and notes when verbose)."""
    issues = [i for i in table.report.issues if verbose or i.action != "info"]
    report = table.report
    lines = [
        f"read {report.records_read} records from {len(report.sources)} source(s): kept "
        f"{report.records_kept}, dropped {report.records_dropped}"
        + ("" if report.balanced else "  (ACCOUNTING MISMATCH: please report this bug)")
    ]
    if not issues:
        lines.append("nothing repaired or skipped" + ("" if verbose else " (--verbose lists notes)"))
    lines.extend(f"  {issue}" for issue in issues)
    return lines


def repair_summary(report: Any) -> str | None:
    """One line saying what reading the logs repaired or dropped, or None when nothing was."""
    line = report.repair_line()
    if line is None:
        return None
    return (
        f"bayesgrpo: reading the logs repaired or dropped records ({line}); -v lists them, --strict "
        "refuses such logs"
    )


def read_logs(args: argparse.Namespace, paths: Any = None, *, skip_unreadable: bool = False) -> Any:
    """``load_runs`` for a command, and what it repaired said on stderr.

    One summary line when anything was repaired or dropped (none with ``--quiet``), every issue
    with ``--verbose`` (notes too), and with ``--strict`` the first record that would be repaired
    or dropped is an error instead. ``skip_unreadable``: a file a reader fails on is skipped and
    listed in the report (``bayesgrpo stop`` gives it an error row).
    """
    from bayesgrpo.logs.readers import load_runs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # said below, once
        table = load_runs(
            args.paths if paths is None else paths,
            reward=getattr(args, "reward", None),
            metadata=getattr(args, "metadata", None),
            strict=getattr(args, "strict", False),
            skip_unreadable=skip_unreadable,
            warn=False,
        )
    if getattr(args, "strict", False):
        _refuse_escaped_names(table)
    if getattr(args, "verbose", False):
        print("\n".join(printable(line) for line in report_lines(table, True)), file=sys.stderr)
    elif not getattr(args, "quiet", False):
        summary = repair_summary(table.report)
        if summary is not None:
            print(summary, file=sys.stderr)
    return table


def _refuse_escaped_names(table: Any) -> None:
    """``--strict``: run names whose control characters were escaped (``logs.table``) are refused."""
    from bayesgrpo.errors import MetadataError
    from bayesgrpo.logs.table import CONTROL_CHARACTERS_KIND

    for issue in table.report.issues:
        if issue.kind == CONTROL_CHARACTERS_KIND:
            raise MetadataError(
                f"--strict: {issue.count} run name(s) hold control characters, for example "
                f"{issue.locations[0]!r} (escaped); rename the runs in their logs or drop --strict"
            )
