"""Small helpers that several readers share (no format knowledge here)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from bayesgrpo.logs.report import MAX_LOCATIONS


def unique_names(names: Iterable[str]) -> list[str]:
    """Column names made unique: a repeated ``name`` becomes ``name.1``, ``name.2``...

    Parameters
    ----------
    names : iterable of str
        Names in order, possibly repeated (a CSV header, a progress table's header).

    Returns
    -------
    list of str
        The names in the same order; the first of each kept as written.
    """
    seen: dict[str, int] = {}
    out = []
    for name in names:
        if name in seen:
            seen[name] += 1
            out.append(f"{name}.{seen[name]}")
        else:
            seen[name] = 0
            out.append(name)
    return out


def locations(label: str, numbers: Sequence[object]) -> tuple[str, ...]:
    """The first ``MAX_LOCATIONS`` places for a ``ReadIssue``: ``("line 3", "line 9", ...)``.

    Parameters
    ----------
    label : str
        What a place is called (``"line"``, ``"log_history entry"``, ``"table row"``).
    numbers : sequence
        The places' numbers, in order.

    Returns
    -------
    tuple of str
    """
    return tuple(f"{label} {n}" for n in numbers[:MAX_LOCATIONS])


__all__ = ["locations", "unique_names"]
