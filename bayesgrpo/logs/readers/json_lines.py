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

from bayesgrpo.errors import EmptyLogError, LogReadError, MalformedRecordError, TruncatedLogError
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
    label : str
        What a record's place is called: ``"line"``, or ``"list entry"`` for the entries of a
        JSON list (:func:`read_json_list`).
    unclosed : bool
        A JSON list that ends after a complete entry without its closing ``]`` (cut between
        entries: nothing lost, noted).
    """

    records: list[dict[str, Any]]
    locs: list[int]
    n_read: int
    bad: list[int]
    cut_line: int | None
    label: str = "line"
    unclosed: bool = False


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


#: What a JSON list's entries are called in reports.
LIST_ENTRY = "list entry"


def is_json_list(path: Path) -> bool:
    """Whether a ``.json`` file holds one JSON list (its first character, blanks aside, ``[``)."""
    if path.suffix.lower() != ".json":
        return False
    with open(path, "rb") as handle:
        head = handle.read(4096).decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    return head.startswith("[")


def read_json_list(path: Path, strict: bool) -> JsonLines:
    """Read a JSON document holding one list of objects, each a record, as JSON Lines are read.

    What a tracker exports (trackio's ``[{"step": 0, "train/reward": ...}, ...]``) or a script
    writes with ``json.dump(records, f)``: entry ``k`` (from 1) is the record of JSON Lines' line
    ``k``. An entry that is not an object is bad (dropped, reported); a list cut while being
    written keeps every complete entry before the cut, the cut one reported as dropped.

    Parameters
    ----------
    path : Path
    strict : bool
        Raise at the first bad entry or at a cut instead of noting it.

    Returns
    -------
    JsonLines
        With ``label`` ``"list entry"``.

    Raises
    ------
    EmptyLogError
        An empty file or an empty list.
    LogReadError
        JSON that is no list, or a list damaged inside (not merely cut at its end).
    TruncatedLogError
        Under ``strict``, a list cut at its end.
    MalformedRecordError
        Under ``strict``, an entry that is not an object.
    RecordTooLargeError
        An object past ``MAX_METRICS_PER_LINE`` keys.
    """
    with open(path, "rb") as handle:
        text = handle.read().decode("utf-8", errors="replace").lstrip("\ufeff")
    if not text.strip():
        raise EmptyLogError("empty file", path)
    decoder = json.JSONDecoder()
    position = len(text) - len(text.lstrip())
    if not text.startswith("[", position):
        raise LogReadError("not a JSON list of records", path)
    position += 1
    records: list[dict[str, Any]] = []
    locs: list[int] = []
    bad: list[int] = []
    cut: int | None = None
    unclosed = False
    number = 0
    while True:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        if position >= len(text):  # no closing bracket: the list was cut between entries
            unclosed = True
            break
        if text[position] == "]":
            break
        number += 1
        try:
            entry, position = decoder.raw_decode(text, position)
        except (ValueError, RecursionError) as exc:
            if _cut_at_end(text, exc):
                cut = number
                break
            raise LogReadError(
                f"not a readable JSON list: {getattr(exc, 'msg', exc)} in list entry {number}",
                path,
                f"{LIST_ENTRY} {number}",
            ) from exc
        if not isinstance(entry, dict):
            if strict:
                raise MalformedRecordError(
                    f"a list entry that is a {type(entry).__name__}, not a JSON object; pass strict=False "
                    "to drop such entries and report",
                    path,
                    f"{LIST_ENTRY} {number}",
                )
            bad.append(number)
            continue
        if len(entry) > MAX_METRICS_PER_LINE:
            raise too_many_metrics(path, number, len(entry), "JSON object")
        records.append(entry)
        locs.append(number)
    if cut is not None:
        if strict:
            raise TruncatedLogError(
                "the JSON list ends early (cut while being written?); pass strict=False to keep its "
                "complete entries and report",
                path,
                f"{LIST_ENTRY} {cut}",
            )
        bad.append(cut)
    if not records and not bad:
        raise EmptyLogError("an empty JSON list", path)
    return JsonLines(records, locs, len(records) + len(bad), bad, cut, LIST_ENTRY, unclosed)


def _cut_at_end(text: str, exc: ValueError | RecursionError) -> bool:
    """Whether an entry fails to parse only because the text ends inside it (a cut, not damage)."""
    if not isinstance(exc, json.JSONDecodeError):
        return False
    return exc.msg.startswith("Unterminated string") or len(text[exc.pos :].strip()) <= 1
