"""What the verbs of the ``bayesgrpo`` command share: their exit statuses, printing names and
numbers safely, reading every log that can be read, and the fleet's table for a verb.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from bayesgrpo._text import printable
from bayesgrpo.interfaces.logs_input import read_logs

EXIT_OK = 0
EXIT_USER_ERROR = 2
#: The fleet lost its engine (a Ray node, its raylet or agent) before every log was answered: the
#: rows finished were written, the others say why they were not.
EXIT_INCOMPLETE = 3
#: Ctrl-C (SIGINT): the shell's 128 + 2.
EXIT_INTERRUPTED = 130


def parse_columns(text: str | None) -> dict[str, str] | None:
    """``--columns name=column,...`` as a mapping (``load_runs``'s ``columns``).

    Parameters
    ----------
    text : str or None
        The option's value: ``name=column`` pairs separated by commas.

    Returns
    -------
    dict of str to str or None
        Each name to its column; None where the option was not given (or empty).

    Raises
    ------
    argparse.ArgumentTypeError
        When a pair has no ``=``.
    """
    if not text:
        return None
    mapping = {}
    for part in text.split(","):
        if "=" not in part:
            raise argparse.ArgumentTypeError(f"--columns wants name=column pairs, got {part!r}")
        key, value = part.split("=", 1)
        mapping[key.strip()] = value.strip()
    return mapping


def say(line: str) -> None:
    """Print one line with the control characters of any name in it escapes (``bayesgrpo._text``):
    run names and messages from logs never act on the terminal.
    """
    print(printable(line))


def short_name(run_id: Any, width: int) -> str:
    """A run name escaped (``printable``), cut to ``width`` characters with ``...``."""
    name = printable(run_id)
    return name if len(name) <= width else name[: width - 3] + "..."


def format_number(value: Any, digits: int = 3) -> str:
    """A number as the verbs print it: ``digits`` significant digits, ``-`` for None or NaN.

    Parameters
    ----------
    value : object
        A number, None, or anything else (printed as ``str`` gives it).
    digits : int
        Significant digits.

    Returns
    -------
    str
    """
    if value is None:
        return "-"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(number):
        return "-"
    return f"{number:.{digits}g}"


def read_every_log(args: argparse.Namespace) -> tuple[Any, list[tuple[str, str]]]:
    """The runs of every log ``stop`` or ``forecast`` can read, and ``(path, error)`` of each it cannot.

    A path that does not exist or that no reader recognises, a file a reader fails on and a log
    under a folder that no reader recognises (``fleet.work.unread_logs``) is an error row, not the
    end of the command, as on the fleet's engines. With ``--strict`` the first of them is an error.
    """
    from bayesgrpo.errors import BayesGRPOError
    from bayesgrpo.interfaces.fleet.work import unread_logs
    from bayesgrpo.logs.readers import discover

    if getattr(args, "strict", False):
        return read_logs(args), []
    paths, unread = [], []
    for path in args.paths:
        try:
            discover(path)
        except (BayesGRPOError, OSError) as exc:
            unread.append((str(path), f"{type(exc).__name__}: {exc}"))
            continue
        paths.append(path)
    if not paths:
        raise BayesGRPOError("no log could be read: " + "; ".join(f"{p}: {e}" for p, e in unread))
    table = read_logs(args, paths, skip_unreadable=True)
    return table, unread + unread_logs(table.report.issues)


def fleet_paths(args: argparse.Namespace) -> list[Any]:
    """The logs a fleet verb reads: the paths given, or the bundled runs' folder."""
    if args.bundled or not args.paths:
        from bayesgrpo.model.datasets import data_dir

        return [data_dir()]
    return list(args.paths)


def fleet_frame(args: argparse.Namespace, paths: Any, settings: Any) -> Any:
    """The fleet's table of ``paths`` for a CLI verb, and a line on stderr of how it went."""
    from bayesgrpo.interfaces.fleet import assess

    frame = assess(
        paths,
        getattr(args, "population", None),
        settings=settings,
        workers=args.workers,
        address=args.address,
        progress=not args.json and not getattr(args, "quiet", False),
    )
    say_fleet(frame, frame.attrs.get("retried_tasks", 0), frame.attrs.get("engine"))
    return frame


def fleet_exit(frame: Any) -> int:
    """A fleet verb's exit status once its rows are written: :data:`EXIT_INCOMPLETE`, with the
    reason on stderr, when the engine was lost before every log was answered
    (``frame.attrs["incomplete"]``, :func:`bayesgrpo.interfaces.fleet.assess`).
    """
    incomplete = frame.attrs.get("incomplete")
    if not incomplete:
        return EXIT_OK
    print(f"bayesgrpo: error: {printable(incomplete)}", file=sys.stderr)
    return EXIT_INCOMPLETE


def say_fleet(frame: Any, retried: int, engine: Any) -> None:
    """One stderr line: how many runs the fleet assessed, with errors, retried, on which engine."""
    errors = int((frame["status"] != "ok").sum())
    print(f"{len(frame)} runs, {errors} with errors, {retried} tasks retried ({engine})", file=sys.stderr)
