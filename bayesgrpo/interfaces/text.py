"""Numbers as interfaces print them: a band whose ends can be told apart.

Pure functions, no I/O; the command line (:mod:`bayesgrpo.interfaces.cli`) and ``bayesgrpo
watch``'s table (:mod:`bayesgrpo.interfaces.watch.terminal`) print bands with them.
"""

from __future__ import annotations

import math


def distinguishing_digits(*values: float, least: int = 3, most: int = 10) -> int:
    """Significant digits that tell ``values`` apart: at least ``least``, more where they share
    their leading digits (a band of 1,098,000 .. 1,108,000 about 1,101,000 needs 5), at most
    ``most``.

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
    finite = [float(v) for v in values if math.isfinite(float(v))]
    gaps = [abs(a - b) for i, a in enumerate(finite) for b in finite[i + 1 :] if a != b]
    if not gaps:
        return least
    largest = max(abs(v) for v in finite)
    need = math.ceil(math.log10(largest / min(gaps))) + 2 if largest > 0 else least
    return int(min(max(least, need), most))


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
        E.g. ``"0.577 [0.137, 0.994]"``, or ``"1.1013e+06 [1.0971e+06, 1.11e+06]"`` where three
        digits would print all three as ``1.1e+06``.
    """
    digits = distinguishing_digits(median, lower, upper)
    return f"{median:{width or ''}.{digits}g} [{lower:.{digits}g}, {upper:.{digits}g}]"
