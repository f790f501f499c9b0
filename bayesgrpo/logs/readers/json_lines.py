"""JSON Lines framing: the objects of a file, the lines that are not objects and a torn last line.

:func:`read_json_lines` is shared by the plain-table reader (:mod:`bayesgrpo.logs.readers.tabular`)
and verl's file-logger reader (:mod:`bayesgrpo.logs.readers.verl.jsonl`), which tell their
records apart after framing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bayesgrpo.errors import EmptyLogError, MalformedRecordError, TruncatedLogError
from bayesgrpo.logs.readers._limits import MAX_METRICS_PER_LINE, bounded_lines, too_many_metrics
from bayesgrpo.logs.readers._prefix import split_log_prefix


@dataclass
class JsonLines:
    """The lines of a JSON Lines file, as read: the objects, and where the others are.

    Attributes
    ----------
    records : list of dict
        The lines that are JSON objects, in file order.
    locs : list of int
        Their 1-based line numbers.
    n_read : int
        Non-blank lines read (every one a record, good or bad).
    bad : list of int
        Line numbers of the lines that are not JSON objects (dropped).
    cut_line : int or None
        The number of the last line when it is bad and has no line end: a record cut while
        being written (it is among ``bad`` too).
    """

    records: list[dict[str, Any]]
    locs: list[int]
    n_read: int
    bad: list[int]
    cut_line: int | None


def _json_object(line: str) -> Any:
    """A line's JSON value, read after a logging prefix if it has one; ``None`` when not JSON."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):  # JSONDecodeError, too many digits, too deep
        pass
    prefix, content = split_log_prefix(line)
    if not prefix:
        return None
    try:
        return json.loads(content)
    except (ValueError, RecursionError):
        return None


def read_json_lines(path: Path, strict: bool) -> JsonLines:
    """Read JSON Lines: one JSON object per line; other lines are noted, not read.

    Blank lines are skipped, not counted. A JSON object after a logging prefix (a timestamp, a
    level, a rank tag: ``bayesgrpo.logs.readers._prefix``) is read as the object. A line that is
    not a JSON object (not JSON, an array, a number...) is bad; a bad last line without line end
    is a record cut while being written.

    Parameters
    ----------
    path : Path
    strict : bool
        Raise at the first bad line instead of noting it.

    Returns
    -------
    JsonLines

    Raises
    ------
    EmptyLogError
        No non-blank line.
    TruncatedLogError
        Under ``strict``, a bad last line without line end.
    MalformedRecordError
        Under ``strict``, any other bad line.
    RecordTooLargeError
        A line past ``MAX_LINE_BYTES`` or an object past ``MAX_METRICS_PER_LINE`` keys.
    """
    records: list[dict[str, Any]] = []
    locs: list[int] = []
    bad: list[int] = []
    cut_line: int | None = None
    n_read = 0
    with open(path, encoding="utf-8-sig", errors="replace") as handle:
        for number, line in enumerate(bounded_lines(handle, path), start=1):
            if not line.strip():
                continue
            n_read += 1
            record = _json_object(line)
            if not isinstance(record, dict):
                cut = not line.endswith("\n")  # only the last line can lack one
                if strict:
                    if cut:
                        raise TruncatedLogError(
                            "the last line is not a JSON object and has no line end: the file ends "
                            "mid-record (cut while being written?); pass strict=False to drop it and report",
                            path,
                            f"line {number}",
                        )
                    raise MalformedRecordError(
                        "not a JSON object; pass strict=False to drop such lines and report",
                        path,
                        f"line {number}",
                    )
                bad.append(number)
                if cut:
                    cut_line = number
                continue
            if len(record) > MAX_METRICS_PER_LINE:
                raise too_many_metrics(path, number, len(record), "JSON object")
            records.append(record)
            locs.append(number)
    if n_read == 0:
        raise EmptyLogError("empty file", path)
    return JsonLines(records, locs, n_read, bad, cut_line)
