"""Numbers as interfaces print them: a band whose ends can be told apart.

Pure functions, no I/O; the command line (:mod:`bayesgrpo.interfaces.cli`), ``bayesgrpo
watch``'s table (:mod:`bayesgrpo.interfaces.watch.terminal`) and the HTML pages
(:mod:`bayesgrpo.interfaces.html_report.markup`) print bands with them.
"""

from __future__ import annotations

import math

#: Why a run with no horizon (none given, no ``total_steps`` in its logs) gets no answer about its
#: end: ``stop``, ``forecast``, ``report`` and ``watch`` say it of such a run and answer the others.
NO_HORIZON = "no --horizon given and its logs state no total_steps: give --horizon"


def distinguishing_digits(*values: float, least: int = 3, most: int = 10) -> int:
    """The fewest significant digits, at least ``least``, that print different ``values``
    differently (a band of 1,097,100 .. 1,110,000 about 1,101,300 needs 4: with 3 the median and
    the lower end both read ``1.1e+06``); at most ``most``.

    Parameters
    ----------
    *values : float
        The numbers to print together (non-finite ones are left out).
    least, most : int
        Bounds on the digits.

    Returns
    -------
    int
    """
    distinct = sorted({float(v) for v in values if math.isfinite(float(v))})
    for digits in range(least, most):
        if len({f"{v:.{digits}g}" for v in distinct}) == len(distinct):
            return digits
    return most


def format_interval(median: float, lower: float, upper: float, width: int = 0) -> str:
    """``median [lower, upper]``, each with :func:`distinguishing_digits` significant digits.

    Parameters
    ----------
    median, lower, upper : float
        A band's median and ends.
    width : int
        The median right-aligned in this many characters (0: as long as it is).

    Returns
    -------
    str
        E.g. ``"0.577 [0.137, 0.994]"``, or ``"1.101e+06 [1.097e+06, 1.11e+06]"`` where three
        digits would print the median and the lower end alike (``1.1e+06``).
    """
    digits = distinguishing_digits(median, lower, upper)
    return f"{median:{width or ''}.{digits}g} [{lower:.{digits}g}, {upper:.{digits}g}]"
