"""The ``bayesgrpo`` command line.

:func:`main` parses the arguments (:mod:`~bayesgrpo.interfaces.cli.parser`) and runs the verb
(:mod:`~bayesgrpo.interfaces.cli.commands`). Subcommands import what they need when they run, so
``bayesgrpo --help`` starts fast and never imports PyMC.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Sequence

from bayesgrpo._text import printable_lines
from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.interfaces.cli.commands import (
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USER_ERROR,
    cut_table,
)
from bayesgrpo.interfaces.cli.interrupts import check_interrupted, noting_interrupts
from bayesgrpo.interfaces.cli.parser import build_parser

__all__ = [
    "EXIT_INCOMPLETE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USER_ERROR",
    "build_parser",
    "cut_table",
    "main",
]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bayesgrpo`` command.

    Exit status: 0 done; 2 an error of the input or the options (``bayesgrpo: error: ...``);
    3 a fleet verb lost its Ray before every log was answered (the rows finished were written);
    130 Ctrl-C (one line, ``bayesgrpo: interrupted``, for every verb).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_OK
    try:
        with noting_interrupts():
            stated_range(args)
            code = int(args.handler(args))
            check_interrupted()  # Ctrl-C that a library swallowed (PyMC's samplers, watch's loop)
    except KeyboardInterrupt:
        print("bayesgrpo: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    except BayesGRPOError as exc:
        print(f"bayesgrpo: error: {printable_lines(exc)}", file=sys.stderr)
        code = EXIT_USER_ERROR
    _end_now_if_ray_was_lost(code)
    return code


def _end_now_if_ray_was_lost(code: int) -> None:
    """End the process at once with ``code`` when a fleet engine lost its Ray (a killed raylet or
    agent): Ray's core worker would end it with status 1 as the interpreter shuts down
    (``fleet.ray_engine.ray_was_lost``). What was written is flushed first.
    """
    module = sys.modules.get("bayesgrpo.interfaces.fleet.ray_engine")  # imported only if Ray was used
    if module is None or not module.ray_was_lost():
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def stated_range(args: argparse.Namespace) -> None:
    """``--reward-range LOW HIGH``: the range stated for every run, as ``--metadata``'s row
    ``"*"`` (``bayesgrpo.logs.readers.metadata_for_every_run``; a run's own row there wins).
    """
    bounds = getattr(args, "reward_range", None)
    if bounds is None:
        return
    low, high = (float(value) for value in bounds)
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise BayesGRPOError(f"--reward-range needs LOW < HIGH, both finite; got {low:g} {high:g}")
    from bayesgrpo.logs.readers import metadata_for_every_run

    args.metadata = metadata_for_every_run(args.metadata, reward_min=low, reward_max=high)


if __name__ == "__main__":  # pragma: no cover - python -m with the old path bayesgrpo.cli
    sys.exit(main())
