r"""Weights & Biases panel exports: the "Download CSV" of a line-plot panel.

The layout, as W&B writes it (checked against exports committed to public repositories):
every cell is quoted, cells are separated by commas, lines end with ``\\n`` and the last line
has no line end. The first column is the panel's x-axis: ``Step`` by default, or whatever the
panel plots against (``global_step``, ``train/global_step``, ``evaluations``...). Then, for each
run of the panel in the panel's order and for each of its metrics, three columns::

    "<run name> - <metric>", "<run name> - <metric>__MIN", "<run name> - <metric>__MAX"

The first holds the value; when a run has more points than the panel samples, W&B buckets
them and writes the bucket's mean, with the bucket's smallest and largest value under
``__MIN`` and ``__MAX`` (all three are equal when a bucket holds one point). A cell is empty
where a run has no point at that x. Grouped runs are named like ``"algo: PPO"``; exports with a
custom x-axis may hold each run's ``_step`` (W&B's own step) as a metric too.

How the reader maps it
----------------------
- One ``RawRun`` per run name, source ``"<file>#<run name>"``. Two runs that share a display
  name (W&B allows it) are told apart by their order: ``"name"``, ``"name#2"`` (reported).
- Run names may themselves contain ``" - "``. A column is split at the last ``" - "`` that is
  followed by a known metric name (the ``reward=`` asked for, a default reward, a metric of
  ``WANDB_ALIASES`` or W&B's own ``_step``/``_runtime``/``_timestamp``), and otherwise at its
  last ``" - "``. A metric whose own name contains ``" - "`` is therefore read right when it
  is named with ``reward=``.
- Metric ``<m>`` becomes column ``<m>``; ``<m>__MIN`` and ``<m>__MAX`` become ``<m>__min`` and
  ``<m>__max``: kept as metrics, never chosen as the reward.
- The x-axis values are the steps. An x-axis other than ``Step`` is noted (info). A time x-axis
  (``Relative Time (Process)``, ``Wall Time``) gives way to each run's own ``_step`` column where
  the export holds one (noted); otherwise values that are not whole numbers are dropped and
  reported by ``tidy_run``.
- Default reward: ``train/reward`` (TRL), ``reward``, ``critic/score/mean`` (verl), then the
  totals of :data:`REWARD_CANDIDATES` hand-written loops log (``rewards``, ``train/avg_reward``...),
  or, when the file holds exactly one metric (W&B's ``_step``/``_runtime``/``_timestamp`` not
  counted), that metric.

Accounting
----------
A *record* is one (data line, run) pair where the run has at least one non-empty cell in the
line: a run's ``records_read`` counts the lines it has a value on. Empty cells are missing
points, not errors. A line that cannot be split into the header's columns (a ragged line, a
line cut while being written, invalid quoting) cannot be attributed to a run: it counts as one
record of the file's first run and is reported there as dropped, with its line number. Lines
that hold an x value but no run value, columns that are no run's, and runs of the header with
no value at all are reported as ``info``. So for every run
``records_read == records kept + records dropped``.
"""

from __future__ import annotations

import csv
import logging
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
import pandas as pd

from bayesgrpo.errors import EmptyLogError, LogReadError, MalformedRecordError, TruncatedLogError
from bayesgrpo.logs.readers._limits import MAX_METRICS_PER_LINE, bounded_lines, too_many_metrics
from bayesgrpo.logs.readers._records import LOC, STEP, RawRun
from bayesgrpo.logs.report import MAX_LOCATIONS, ReadIssue

if TYPE_CHECKING:
    from pathlib import Path

    from bayesgrpo.logs.readers.base import ReadOptions, Source

logger = logging.getLogger(__name__)

SEPARATOR = " - "
#: W&B's band suffixes -> the suffix of the metric column they become.
BAND_SUFFIXES: dict[str, str] = {"__MIN": "__min", "__MAX": "__max"}
DEFAULT_X_AXIS = "Step"
#: Default reward metrics, in order of preference (``env/all/reward/total``: the Tinker
#: cookbook's training reward), then the names hand-written GRPO loops log their total reward
#: under (seen in public offline runs: ``rewards`` beside its parts ``correctness_reward`` and
#: ``format_reward``; ``train/avg_reward``). Each is a total: a reward function's own part
#: (``*_reward``, ``rewards/<func>/mean``) is never a default; name it with ``reward=``.
REWARD_CANDIDATES: tuple[str, ...] = (
    "train/reward",
    "reward",
    "critic/score/mean",
    "env/all/reward/total",
    "train/rewards",
    "rewards",
    "train/reward_mean",
    "reward_mean",
    "reward/mean",
    "mean_reward",
    "train/avg_reward",
    "avg_reward",
)
#: Keys W&B itself adds to every run's history.
INTERNAL_METRICS: frozenset[str] = frozenset({"_step", "_runtime", "_timestamp"})
#: A panel x-axis that is a time, not a step (W&B's "Relative Time (Process)", "Wall Time").
_TIME_AXIS = re.compile(r"\btime\b", re.IGNORECASE)
#: Metric names as TRL (through transformers' W&B callback, which prefixes ``train/``) and verl
#: log them to W&B, mapped to canonical names.
WANDB_ALIASES: dict[str, str] = {
    "train/reward_std": "reward_std",
    "train/kl": "kl",
    "train/entropy": "entropy",
    "train/completions/mean_length": "completion_length",
    "train/completion_length": "completion_length",
    "train/frac_reward_zero_std": "frac_reward_zero_std",
    "train/loss": "loss",
    "train/learning_rate": "learning_rate",
    "train/epoch": "epoch",
    "actor/entropy": "entropy",
    "actor/kl_loss": "kl",
    "actor/lr": "learning_rate",
    "response_length/mean": "completion_length",
    "training/epoch": "epoch",
}
#: Column names a metric may not take in a RawRun (they would clash with the runs table's own).
_RESERVED = frozenset({LOC, STEP, "run_id"})
_EOF_IN_QUOTES = "unexpected end of data"


@dataclass(frozen=True)
class RunColumn:
    """What one header cell names: a run, a metric, and which of the three columns it is."""

    run: str
    metric: str
    band: str = ""

    @property
    def name(self) -> str:
        """The metric column this cell becomes in the run's records."""
        return self.metric + self.band


def _separator_positions(text: str) -> list[int]:
    positions = []
    start = text.find(SEPARATOR)
    while start != -1:
        positions.append(start)
        start = text.find(SEPARATOR, start + 1)
    return positions


def split_column(name: str, known: frozenset[str] | set[str] = frozenset()) -> RunColumn | None:
    """Split a header cell ``"<run> - <metric>[__MIN|__MAX]"``; ``None`` if it is no run's.

    Parameters
    ----------
    name : str
        The header cell.
    known : set of str
        Metric names to prefer: the cell is split at the last ``" - "`` followed by one of
        them, and at its last ``" - "`` when none follows.

    Returns
    -------
    RunColumn or None
    """
    base, band = name, ""
    for suffix, column_suffix in BAND_SUFFIXES.items():
        if name.endswith(suffix):
            base, band = name[: -len(suffix)], column_suffix
            break
    positions = _separator_positions(base)
    if not positions:
        return None
    cut = next((p for p in reversed(positions) if base[p + len(SEPARATOR) :] in known), positions[-1])
    run, metric = base[:cut], base[cut + len(SEPARATOR) :]
    if not run.strip() or not metric.strip():
        return None
    return RunColumn(run, metric, band)


@dataclass
class _Layout:
    """The header, understood: which columns belong to which run."""

    x_axis: str
    width: int
    runs: dict[str, list[tuple[int, str]]]
    metrics: list[str]
    ignored: list[int]
    notes: list[ReadIssue]


def _layout(header: list[str], known: frozenset[str], path: Path, strict: bool) -> _Layout:
    """Map every header cell to (run, metric column), or to nothing (reported).

    One function on purpose: the header's state machine (x-axis, run columns, band columns,
    repeated names) in one pass.
    """
    x_axis = header[0]
    if split_column(x_axis, known) is not None or x_axis.endswith(tuple(BAND_SUFFIXES)):
        raise LogReadError(
            f"the first column {x_axis!r} is a run's metric, not the panel's x-axis: a W&B panel "
            f"export starts with its x-axis column ({DEFAULT_X_AXIS!r}); add it back, or read the "
            "file as a plain table with format='csv'",
            path,
            "line 1",
        )
    runs: dict[str, list[tuple[int, str]]] = {}
    metrics: list[str] = []
    ignored: list[int] = []
    seen: dict[tuple[str, str], int] = {}
    renamed: dict[str, str] = {}
    clashing: list[str] = []
    notes: list[ReadIssue] = []
    for index, cell in enumerate(header[1:], start=1):
        column = split_column(cell, known)
        if column is None:
            ignored.append(index)
            continue
        occurrence = seen.get((column.run, column.name), 0) + 1
        seen[(column.run, column.name)] = occurrence
        run = column.run if occurrence == 1 else f"{column.run}#{occurrence}"
        if occurrence > 1:
            renamed[run] = column.run
        name = column.name
        if name in _RESERVED:
            name = f"{name}_logged"
            if name not in clashing:
                clashing.append(name)
        runs.setdefault(run, []).append((index, name))
        if column.metric not in metrics:
            metrics.append(column.metric)
    if not runs:
        raise LogReadError(
            f"no '<run> - <metric>' column in the header (it starts {header[:4]}): not a W&B panel "
            "export; read it as a plain table with format='csv'",
            path,
            "line 1",
        )
    if ignored:
        names = [header[i] for i in ignored]
        if strict:
            raise MalformedRecordError(
                f"column(s) {names[:5]} are not of the form '<run> - <metric>' and would not be read "
                "(pass strict=False to read the rest and report them)",
                path,
                "line 1",
            )
        notes.append(
            ReadIssue(
                str(path),
                "unknown_column",
                "info",
                len(ignored),
                tuple(f"column {i + 1}" for i in ignored[:MAX_LOCATIONS]),
                f"column(s) {names[:5]} are not of the form '<run> - <metric>': not read",
            )
        )
    if renamed:
        notes.append(
            ReadIssue(
                str(path),
                "duplicate_run_name",
                "info",
                len(renamed),
                tuple(sorted(renamed)[:MAX_LOCATIONS]),
                "several runs of the panel share a display name; later ones are read as "
                f"{sorted(renamed)[:5]} (in the panel's order)",
            )
        )
    if clashing:
        notes.append(
            ReadIssue(
                str(path),
                "renamed_metric",
                "info",
                len(clashing),
                (),
                f"metric(s) named like a column of the runs table read as {clashing}",
            )
        )
    if x_axis != DEFAULT_X_AXIS:
        notes.append(
            ReadIssue(
                str(path),
                "x_axis",
                "info",
                0,
                ("line 1",),
                f"the panel's x-axis is {x_axis!r}, not {DEFAULT_X_AXIS!r}: its values are read as steps",
            )
        )
    return _Layout(x_axis, len(header), runs, metrics, ignored, notes)


def _cell(text: str) -> float | str:
    """A cell as written: NaN when empty, a float when it reads as a number, else the text."""
    stripped = text.strip()
    if not stripped:
        return math.nan
    if "_" in stripped:  # float() accepts "1_000"; no exporter writes that
        return text
    try:
        return float(stripped)
    except ValueError:
        return text


@dataclass
class _RunRecords:
    """One run's records, accumulated column by column while the file streams."""

    columns: list[tuple[int, str]]
    locs: list[int] = field(default_factory=list)
    steps: list[float | str] = field(default_factory=list)
    values: dict[str, list[float | str]] = field(default_factory=dict)

    def add(self, row: list[str], line: int, step: float | str) -> bool:
        """Append the run's cells of ``row``; False (nothing appended) when all are empty."""
        cells = [row[index] for index, _ in self.columns]
        if all(not cell.strip() for cell in cells):
            return False
        self.locs.append(line)
        self.steps.append(step)
        for (_, name), cell in zip(self.columns, cells, strict=True):
            self.values.setdefault(name, []).append(_cell(cell))
        return True

    def frame(self, own_step: bool = False) -> pd.DataFrame:
        """The run's records; with ``own_step`` its steps are its own ``_step`` column (a time
        x-axis), a record without one getting none (reported by ``tidy_run``).
        """
        steps = self.steps
        if own_step and "_step" in self.values:
            steps = [v if isinstance(v, float) else float("nan") for v in self.values["_step"]]
        data: dict[str, object] = {LOC: np.asarray(self.locs, dtype=np.int64), STEP: _array(steps)}
        for _, name in self.columns:
            data[name] = _array(self.values[name])
        return pd.DataFrame(data)


def _array(values: list[float | str]) -> np.ndarray:
    if all(isinstance(v, float) for v in values):
        return np.asarray(values, dtype=float)
    return np.asarray(values, dtype=object)


@dataclass
class _BadLine:
    line: int
    why: str
    short: bool  # fewer cells than the header, or the file ends inside a quoted cell


def _bad_lines_issue(bad: list[_BadLine], last_record_line: int, width: int, path: Path) -> ReadIssue:
    torn = bad[-1].short and bad[-1].line == last_record_line
    kind = "truncated" if torn and len(bad) == 1 else "bad_line"
    detail = f"line(s) that cannot be split into the header's {width} cells ({bad[0].why})"
    if torn:
        detail += "; the last line is cut (the file was being written, or was truncated)"
    locations = tuple(f"line {b.line}" for b in bad[:MAX_LOCATIONS])
    return ReadIssue(str(path), kind, "dropped", len(bad), locations, detail + "; dropped")


def _strict_error(bad: _BadLine, is_last: bool, width: int, path: Path) -> LogReadError:
    error = TruncatedLogError if (bad.short and is_last) else MalformedRecordError
    return error(
        f"line cannot be split into the header's {width} cells ({bad.why}); pass strict=False to drop "
        "and report it",
        path,
        f"line {bad.line}",
    )


def _known_metrics(options: ReadOptions) -> frozenset[str]:
    known = set(REWARD_CANDIDATES) | set(WANDB_ALIASES) | INTERNAL_METRICS
    if options.reward:
        known.add(options.reward)
    return frozenset(known)


def read_wandb_csv(source: Source, options: ReadOptions) -> list[RawRun]:
    """Read a W&B panel export into one raw run per run of the panel.

    Parameters
    ----------
    source : Source
        One ``.csv`` file.
    options : ReadOptions
        ``reward`` (also used to split run names), ``strict``.

    Returns
    -------
    list of RawRun
        In the panel's order; runs with no value are left out and reported.

    Raises
    ------
    EmptyLogError
        An empty file, a header with no data line, or no run with a value.
    LogReadError
        A header that is not a panel export's (no x-axis column, no run column), or an
        unreadable file.
    MalformedRecordError, TruncatedLogError
        With ``strict=True``, at the first line that would be dropped.
    """
    path = source.paths[0]
    try:
        # utf-8-sig: a spreadsheet that re-saves the export adds a byte-order mark.
        with open(path, encoding="utf-8-sig", errors="replace", newline="") as handle:
            return _read(handle, path, options)
    except OSError as exc:
        raise LogReadError(f"cannot read: {exc.strerror or exc}", path) from exc


def _read(handle: TextIO, path: Path, options: ReadOptions) -> list[RawRun]:
    """Stream the file: header, then one line at a time into per-run columns."""
    reader = csv.reader(bounded_lines(handle, path), strict=True)
    layout = _layout(_header(reader, path), _known_metrics(options), path, options.strict)
    runs = {name: _RunRecords(columns) for name, columns in layout.runs.items()}
    lines = _read_lines(reader, layout, runs, path, options.strict)
    logger.debug(
        "%s: %d data line(s), %d run(s), %d bad line(s)", path, lines.n_lines, len(runs), len(lines.bad)
    )
    issues, dropped = _panel_issues(layout, runs, lines, path)
    empty_runs = [name for name, records in runs.items() if not records.locs]
    if len(empty_runs) == len(runs):
        raise EmptyLogError(
            f"no run of the panel has a value ({len(runs)} run(s) in the header, {lines.n_lines} data "
            f"line(s), {dropped} line(s) that could not be read)",
            path,
        )
    candidates = REWARD_CANDIDATES
    counted = [m for m in layout.metrics if m not in INTERNAL_METRICS]
    if len(counted) == 1 and counted[0] not in candidates:
        candidates = candidates + (counted[0],)
    # a time x-axis ("Relative Time (Process)", "Wall Time") is no step: a run's own _step is
    own_step = bool(_TIME_AXIS.search(layout.x_axis)) and "_step" in layout.metrics
    if own_step:
        issues = [issue for issue in issues if issue.kind != "x_axis"]  # said below instead
        issues.append(
            ReadIssue(
                str(path),
                "x_axis_time",
                "info",
                0,
                (),
                f"the panel's x-axis {layout.x_axis!r} is a time: each run's steps are its own '_step'",
            )
        )
    raws: list[RawRun] = []
    for name, records in runs.items():
        if not records.locs:
            continue
        first = not raws
        raws.append(
            RawRun(
                run_id=name,
                source=f"{path}#{name}",
                format="wandb-csv",
                records=records.frame(own_step),
                records_read=len(records.locs) + (dropped if first else 0),
                issues=issues if first else [],
                reward_candidates=candidates,
                aliases=dict(WANDB_ALIASES),
                location_label="line",
                text_values=True,
            )
        )
    return raws


def _header(reader: Any, path: Path) -> list[str]:
    """The header line, checked to be CSV and not blank."""
    try:
        header: list[str] = next(reader, [])
    except csv.Error as exc:
        raise LogReadError(f"the header is not valid CSV ({exc})", path, "line 1") from exc
    if not any(cell.strip() for cell in header):
        raise EmptyLogError(
            "no header on line 1 (the file is empty or starts with a blank line): a W&B panel "
            "export has a header line, then one line per x value",
            path,
        )
    if len(header) > MAX_METRICS_PER_LINE:
        raise too_many_metrics(path, 1, len(header), "header")
    return header


@dataclass
class _Lines:
    """What the data lines held beside their values: bad lines, lines with no run value."""

    bad: list[_BadLine] = field(default_factory=list)
    no_value_lines: list[int] = field(default_factory=list)
    ignored_values: int = 0
    n_lines: int = 0
    last_record_line: int = 0


def _read_lines(
    reader: Any, layout: _Layout, runs: dict[str, _RunRecords], path: Path, strict: bool
) -> _Lines:
    """Every data line into the runs' columns; a bad line is kept aside (or, strict, an error)."""
    lines = _Lines()
    end = reader.line_num
    while True:
        line = end + 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            end = reader.line_num
            lines.last_record_line = line
            lines.bad.append(_BadLine(line, f"invalid quoting: {exc}", _EOF_IN_QUOTES in str(exc)))
            continue
        end = reader.line_num
        if not row:  # a blank line holds nothing; W&B writes none
            continue
        if strict and lines.bad:
            raise _strict_error(lines.bad[0], False, layout.width, path)
        lines.n_lines += 1
        lines.last_record_line = line
        if len(row) != layout.width:
            lines.bad.append(_BadLine(line, f"found {len(row)}", len(row) < layout.width))
            continue
        step = _cell(row[0])
        added = [records.add(row, line, step) for records in runs.values()]
        lines.ignored_values += sum(1 for index in layout.ignored if row[index].strip())
        if not any(added):
            lines.no_value_lines.append(line)
    if strict and lines.bad:
        raise _strict_error(lines.bad[0], lines.bad[0].line == lines.last_record_line, layout.width, path)
    return lines


def _panel_issues(
    layout: _Layout, runs: dict[str, _RunRecords], lines: _Lines, path: Path
) -> tuple[list[ReadIssue], int]:
    """The read report of the panel, and how many lines were dropped."""
    issues = list(layout.notes)
    if layout.ignored and lines.ignored_values:
        issues.append(
            ReadIssue(
                str(path),
                "unknown_column_values",
                "info",
                lines.ignored_values,
                (),
                "values in columns that are no run's, not read",
            )
        )
    if lines.no_value_lines:
        issues.append(
            ReadIssue(
                str(path),
                "no_run_value",
                "info",
                len(lines.no_value_lines),
                tuple(f"line {n}" for n in lines.no_value_lines[:MAX_LOCATIONS]),
                f"line(s) with a {layout.x_axis!r} value but no run value: no record",
            )
        )
    empty_runs = [name for name, records in runs.items() if not records.locs]
    if empty_runs:
        issues.append(
            ReadIssue(
                str(path),
                "empty_run",
                "info",
                len(empty_runs),
                tuple(empty_runs[:MAX_LOCATIONS]),
                f"run(s) of the panel with no value at all, not read: {empty_runs[:5]}",
            )
        )
    dropped = 0
    if lines.bad:
        issue = _bad_lines_issue(lines.bad, lines.last_record_line, layout.width, path)
        issues.append(issue)
        dropped = issue.count
    return issues, dropped


__all__ = [
    "BAND_SUFFIXES",
    "REWARD_CANDIDATES",
    "WANDB_ALIASES",
    "RunColumn",
    "read_wandb_csv",
    "split_column",
]
