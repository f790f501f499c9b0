"""An MLflow file store's metric files, read line by line with every bad line reported.

A local ``mlruns/`` store keeps each metric of a run in a text file,
``<experiment>/<run>/metrics/<key>``, one line per logged value: ``<timestamp> <value> <step>``
(five fields when a dataset is named, two in stores older than steps). MLflow's own reader
fails on any bad line (a raw ``ValueError`` or ``UnicodeDecodeError``: the whole experiment goes
unread), and reads a line cut mid-write, ``<timestamp> <value>``, as step 0. Here a bad line is
dropped and reported with its file and line, the others kept: a last line without line end
(cut while being written), bytes that are not UTF-8, another number of fields, a timestamp,
value or step that is not a number. Two-field lines are read as step 0 only when every line of
the file has two fields (an old store), as MLflow reads them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from bayesgrpo.logs.readers._limits import bounded_lines
from bayesgrpo.logs.report import MAX_LOCATIONS, ReadIssue


@dataclass
class MetricFile:
    """The values read from one metric file and the lines dropped.

    Attributes
    ----------
    rows : list of (int, int, float)
        ``(timestamp, step, value)`` of each kept line, in file order.
    read : int
        Non-blank lines read (kept or dropped).
    bad : list of (int, str)
        Each dropped line's number and what is wrong with it.
    cut : int or None
        The number of the last line when it has no line end (dropped: cut while being written).
    """

    rows: list[tuple[int, int, float]] = field(default_factory=list)
    read: int = 0
    bad: list[tuple[int, str]] = field(default_factory=list)
    cut: int | None = None

    @property
    def dropped(self) -> int:
        """Lines dropped."""
        return len(self.bad) + (self.cut is not None)


def _fields(parts: list[str]) -> tuple[int, float, int] | str:
    """``(timestamp, value, step)`` of a line's fields, or what is wrong with them."""
    if len(parts) not in (2, 3, 5):
        return f"has {len(parts)} field(s), not '<timestamp> <value> <step>'"
    try:
        timestamp = int(parts[0])
        value = float(parts[1])
        step = int(parts[2]) if len(parts) > 2 else 0
    except ValueError:
        return "has a timestamp, value or step that is not a number"
    if math.isinf(value) and parts[1].lower().lstrip("+-") not in ("inf", "infinity"):
        return "has a value too large for a float"
    return timestamp, value, step


def read_metric_file(path: Path) -> MetricFile:
    """Read one metric file of an MLflow file store; bad lines dropped and noted.

    Parameters
    ----------
    path : Path
        ``<run>/metrics/<key>``.

    Returns
    -------
    MetricFile

    Raises
    ------
    OSError
        When the file cannot be read.
    RecordTooLargeError
        A line past ``MAX_LINE_BYTES``.
    """
    out = MetricFile()
    parsed: list[tuple[int, list[str]]] = []
    with open(path, "rb") as handle:
        for number, raw in enumerate(bounded_lines(handle, path), start=1):
            if not raw.strip():
                continue
            out.read += 1
            if not raw.endswith(b"\n"):  # MLflow ends every line it writes: this one was cut
                out.cut = number
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                out.bad.append((number, "is not UTF-8 text"))
                continue
            parsed.append((number, text.split()))
    old_store = all(len(parts) == 2 for _, parts in parsed)
    for number, parts in parsed:
        values = _fields(parts)
        if isinstance(values, str) or (len(parts) == 2 and not old_store):
            out.bad.append((number, values if isinstance(values, str) else "has no step"))
            continue
        timestamp, value, step = values
        out.rows.append((timestamp, step, value))
    return out


def metric_file_issues(source: str, key: str, path: Path, read: MetricFile) -> list[ReadIssue]:
    """The report's issues for one metric file's dropped lines.

    Parameters
    ----------
    source : str
        The run, as the report names it.
    key : str
        The metric.
    path : Path
        Its file.
    read : MetricFile
        What :func:`read_metric_file` found.

    Returns
    -------
    list of ReadIssue
    """
    issues = []
    kept = len(read.rows)
    if read.bad:
        number, problem = read.bad[0]
        issues.append(
            ReadIssue(
                source,
                "bad_line",
                "dropped",
                len(read.bad),
                tuple(f"{key} line {n}" for n, _ in read.bad[:MAX_LOCATIONS]),
                f"line(s) of the metric file {path} that are not '<timestamp> <value> <step>' (line "
                f"{number} {problem}); dropped, the {kept} other value(s) of {key!r} kept",
            )
        )
    if read.cut is not None:
        issues.append(
            ReadIssue(
                source,
                "truncated",
                "dropped",
                1,
                (f"{key} line {read.cut}",),
                f"the metric file {path} ends mid-line (line {read.cut} has no line end: cut while being "
                f"written?); that line dropped, the {kept} value(s) of {key!r} before it kept",
            )
        )
    return issues


__all__ = ["MetricFile", "metric_file_issues", "read_metric_file"]
