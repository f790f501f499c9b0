"""The verl console reader: columns accumulated block by block from the step lines of a log.

:func:`read_verl_console` scans the file once: step lines go to the column store
(parsed :data:`CHUNK_ROWS` lines at a time with pyarrow), every other line to
the metadata scanner. The result is one :class:`~bayesgrpo.logs.readers._records.RawRun`.
"""

from __future__ import annotations

import logging
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np
import pandas as pd

from bayesgrpo.errors import EmptyLogError, LogReadError, MalformedRecordError, TruncatedLogError
from bayesgrpo.logs.readers._limits import MAX_METRICS_PER_LINE, bounded_lines, too_many_metrics
from bayesgrpo.logs.readers._prefix import is_log_prefix
from bayesgrpo.logs.readers._records import LOC, STEP, RawRun
from bayesgrpo.logs.readers.verl.config import MetadataScanner
from bayesgrpo.logs.readers.verl.lines import (
    ANSI_ESCAPE,
    FORMAT,
    REWARD_CANDIDATES,
    SEPARATOR,
    STEP_LIKE,
    STEP_MARK,
    Tally,
    cut_embedded_prefix,
    metric_aliases,
    parse_value,
    parse_values,
    split_fields,
    step_segment,
)
from bayesgrpo.logs.report import ReadIssue

if TYPE_CHECKING:
    from bayesgrpo.logs.readers.base import ReadOptions, Source

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# accumulation


@dataclass
class _Block:
    """The lines that log the same metric names in the same order.

    Value texts are gathered in ``pending`` and parsed in batches of ``CHUNK_ROWS`` lines
    (``parse_values``) into ``chunks``: little text is held at any time, and parsing runs in C.
    """

    names: tuple[str, ...]
    rows: array = field(default_factory=lambda: array("q"))
    chunks: list[np.ndarray] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    n_pending: int = 0
    duplicated: tuple[str, ...] = ()
    joined: tuple[str, ...] = ()


#: Lines of one block whose values are parsed together.
CHUNK_ROWS = 4096


class _Columns:
    """Step lines accumulated column-wise: locations, steps, and blocks of values."""

    def __init__(self, path: Path, strict: bool):
        self.path = path
        self.strict = strict
        self.chunk_rows = 1 if strict else CHUNK_ROWS  # strict: every problem raised at its own line
        self.n = 0
        self.locs = array("q")
        self.steps = array("q")
        self.step_texts: dict[int, str] = {}
        self.texts: dict[str, list[tuple[int, str]]] = {}
        self.blocks: dict[tuple[str, ...], _Block] = {}
        self._last: _Block | None = None
        self._plain_names: dict[tuple[str, ...], bool] = {}
        self._plain_last: tuple[str, ...] | None = None
        self.malformed = Tally()
        self.duplicated = Tally()
        self.joined = Tally()
        self.cut_value = Tally()
        self.cut_record = Tally()
        self.unread = Tally()

    def add_line(self, line_no: int, body: str, complete: bool) -> None:
        """Add one step line (``body`` is the text after ``step:``)."""
        step_text, separator, rest = body.partition(SEPARATOR)
        if not complete:
            # the file ends mid-line: the last field may be cut mid-value
            kept, _, cut = rest.rpartition(SEPARATOR)
            if self.strict:
                raise TruncatedLogError(
                    "the file ends inside this step line (no newline): its last value may be cut; "
                    "pass strict=False to keep the values before the cut",
                    self.path,
                    f"line {line_no}",
                )
            if not separator or not kept:
                self.cut_record.add(line_no, example=body)
                return
            self.cut_value.add(line_no, example=cut)
            rest = kept
        row = self.n
        self.n += 1
        self.locs.append(line_no)
        try:
            if "_" in step_text:
                raise ValueError(step_text)  # int() reads "1_0"; verl never writes it
            self.steps.append(int(step_text))
        except (ValueError, OverflowError):  # not a whole number, or beyond int64
            self.steps.append(-1)
            self.step_texts[row] = step_text.strip()
        if not rest:
            return
        if rest.count(SEPARATOR) >= MAX_METRICS_PER_LINE:
            raise too_many_metrics(self.path, line_no, rest.count(SEPARATOR) + 1)
        # fast path: verl's own lines split exactly at every ':' and ' - ' into name, value pairs
        tokens = rest.replace(SEPARATOR, ":").split(":")
        names: tuple[str, ...] = tuple(tokens[0::2])
        if len(tokens) == 2 * (rest.count(SEPARATOR) + 1) and self._plain(names, rest):
            texts = tokens[1::2]
        else:
            name_list, texts, malformed = split_fields(rest)
            if malformed:
                if self.strict:
                    raise MalformedRecordError(
                        f"field(s) that are not '<metric>:<value>': {malformed[:3]}",
                        self.path,
                        f"line {line_no}",
                    )
                self.malformed.add(line_no, len(malformed), example=malformed[0])
            names = tuple(name_list)
            if not names:
                return
        self._store(line_no, row, names, texts)

    def _plain(self, names: tuple[str, ...], rest: str) -> bool:
        """Whether lines splitting into these names split the same by the fast way.

        Checked once per distinct tuple of names (on its first line, against ``split_fields``):
        every name non-empty, not a number, and the same as the careful split finds.
        """
        if names == self._plain_last:
            return True
        known = self._plain_names.get(names)
        if known is None:
            careful, _, malformed = split_fields(rest)
            known = (
                not malformed
                and tuple(careful) == names
                and all(name and isinstance(parse_value(name), str) for name in names)
            )
            self._plain_names[names] = known
        if known:
            self._plain_last = names
        return known

    def _store(self, line_no: int, row: int, names: tuple[str, ...], texts: list[str]) -> None:
        block = self._last
        if block is None or block.names != names:
            block = self.blocks.get(names)
            if block is None:
                block = self._new_block(names)
            self._last = block
        block.rows.append(row)
        block.pending.extend(texts)
        block.n_pending += 1
        if block.duplicated:
            if self.strict:
                raise MalformedRecordError(
                    f"metric(s) {list(block.duplicated)[:3]} logged twice on one line",
                    self.path,
                    f"line {line_no}",
                )
            self.duplicated.add(line_no, len(block.duplicated), example=block.duplicated[0])
        if block.joined:
            self.joined.add(line_no, len(block.joined), example=block.joined[0])
        if block.n_pending >= self.chunk_rows:
            self._parse_pending(block)

    def _parse_pending(self, block: _Block) -> None:
        """Parse a block's pending value texts into floats; text values are set aside."""
        if not block.n_pending:
            return
        texts = block.pending
        values = parse_values(texts)
        if values is None:
            values = np.empty(len(texts))
            width = len(block.names)
            first = len(block.rows) - block.n_pending
            for k, text in enumerate(texts):
                value = parse_value(text)
                if not isinstance(value, str):
                    values[k] = value
                    continue
                values[k] = np.nan
                row = block.rows[first + k // width]
                name = block.names[k % width]
                if value.strip():
                    self.texts.setdefault(name, []).append((row, value))
                    continue
                line_no = self.locs[row]
                if self.strict:
                    raise MalformedRecordError(
                        f"metric {name!r} has an empty value", self.path, f"line {line_no}"
                    )
                self.malformed.add(line_no, 1, example=f"{name}:{text}")
        block.chunks.append(values)
        block.pending = []
        block.n_pending = 0

    def _new_block(self, names: tuple[str, ...]) -> _Block:
        seen: set[str] = set()
        duplicated = []
        for name in names:
            if name in seen:
                duplicated.append(name)
            seen.add(name)
        joined = tuple(name for name in names if SEPARATOR in name)
        block = _Block(names=names, duplicated=tuple(duplicated), joined=joined)
        self.blocks[names] = block
        return block

    def frame(self) -> pd.DataFrame:
        """The records as a wide frame: ``_loc``, ``step``, one column per metric (first-seen order)."""
        n = self.n
        locs = np.frombuffer(self.locs, dtype=np.int64).copy() if n else np.zeros(0, np.int64)
        steps_int = np.frombuffer(self.steps, dtype=np.int64).copy() if n else np.zeros(0, np.int64)
        steps: np.ndarray = steps_int
        if self.step_texts:
            steps = steps_int.astype(object)
            for row, text in self.step_texts.items():
                steps[row] = text
        columns: dict[str, np.ndarray] = {}
        for block in self.blocks.values():
            self._parse_pending(block)
            width = len(block.names)
            for name in block.names:
                if name not in columns:
                    columns[name] = np.full(n, np.nan)
            rows = np.frombuffer(block.rows, dtype=np.int64)
            start = 0
            chunks, block.chunks = block.chunks, []
            while chunks:  # scatter chunk by chunk, freeing each: no second copy of the values
                matrix = chunks.pop(0).reshape(-1, width)
                chunk_rows = rows[start : start + len(matrix)]
                start += len(matrix)
                for j, name in enumerate(block.names):
                    columns[name][chunk_rows] = matrix[:, j]
                del matrix
        for name, items in self.texts.items():
            column = columns[name].astype(object)
            for row, text in items:
                column[row] = text
            columns[name] = column
        data: dict[str, np.ndarray] = {LOC: locs, STEP: steps}
        data.update(columns)
        return pd.DataFrame(data, copy=False)

    def issues(self, source: str) -> list[ReadIssue]:
        """The reader-level issues met so far."""
        out: list[ReadIssue] = []
        if self.cut_record.count:
            out.append(
                ReadIssue(
                    source,
                    "truncated",
                    "dropped",
                    self.cut_record.count,
                    self.cut_record.locations(),
                    "the file ends inside a step line with no complete field "
                    f"({self.cut_record.examples[0]!r}): cut while being written? record dropped",
                )
            )
        if self.cut_value.count:
            out.append(
                ReadIssue(
                    source,
                    "truncated",
                    "repaired",
                    self.cut_value.count,
                    self.cut_value.locations(),
                    "the file ends inside a step line (no newline): its last field "
                    f"({self.cut_value.examples[0]!r}) may be cut mid-value and was dropped; "
                    "the fields before it were kept",
                )
            )
        if self.malformed.count:
            out.append(
                ReadIssue(
                    source,
                    "malformed_field",
                    "repaired",
                    self.malformed.count,
                    self.malformed.locations(),
                    "field(s) of step lines that are not '<metric>:<value>' were ignored "
                    f"(e.g. {self.malformed.examples})",
                )
            )
        if self.duplicated.count:
            out.append(
                ReadIssue(
                    source,
                    "duplicate_metric_in_line",
                    "repaired",
                    self.duplicated.count,
                    self.duplicated.locations(),
                    f"metric(s) logged twice on one line (e.g. {self.duplicated.examples}); "
                    "the later value kept",
                )
            )
        if self.unread.count:
            out.append(
                ReadIssue(
                    source,
                    "unread_step_line",
                    "info",
                    self.unread.count,
                    self.unread.locations(),
                    "line(s) that look like step lines after text that is not a logging prefix (a "
                    "timestamp, level, rank tag or Ray prefix) were not read as steps (e.g. "
                    f"{self.unread.examples}); if they are steps, strip that text",
                )
            )
        if self.joined.count:
            out.append(
                ReadIssue(
                    source,
                    "metric_name_with_separator",
                    "info",
                    self.joined.count,
                    self.joined.locations(),
                    f"metric name(s) containing ' - ' (e.g. {self.joined.examples}) were read as one name; "
                    "if that is garbage inside a step line, ignore that column",
                )
            )
        return out


# --------------------------------------------------------------------------------------------
# the reader


def _scan(handle: BinaryIO, path: Path, strict: bool) -> tuple[_Columns, MetadataScanner, int]:
    columns = _Columns(path, strict)
    scanner = MetadataScanner()
    line_no = 0
    last_head = None
    last_head_ok = False
    for raw in bounded_lines(handle, path):
        line_no += 1
        complete = raw.endswith(b"\n")
        text = raw.decode("utf-8", "replace").rstrip()
        if "\r" in text:
            text = step_segment(text)
        at = text.find(STEP_MARK)
        if at < 0:
            scanner.feed(line_no, text)
            continue
        head = text[:at]
        if head != last_head:
            clean = ANSI_ESCAPE.sub("", head) if "\x1b" in head else head
            last_head, last_head_ok = head, is_log_prefix(clean)
        if not last_head_ok:
            if STEP_LIKE.match(text, at + len(STEP_MARK)):
                columns.unread.add(line_no, example=text)
            scanner.feed(line_no, text)
            continue
        body = text[at + len(STEP_MARK) :]
        if "\x1b" in body:
            body = ANSI_ESCAPE.sub("", body)
        if "pid=" in body:
            body = cut_embedded_prefix(body)
        columns.add_line(line_no, body, complete)
    scanner.finish()
    return columns, scanner, line_no


def read_verl_console(source: Source, options: ReadOptions) -> list[RawRun]:
    """Read one verl console log into one raw run.

    Parameters
    ----------
    source : Source
        One file.
    options : ReadOptions
        ``strict`` raises at a malformed field or a cut last line; ``run_id`` names the run.

    Returns
    -------
    list of RawRun
        One run: a record per step line, with the metadata the log states.

    Raises
    ------
    EmptyLogError
        An empty file, or one with no step line.
    LogReadError
        The file cannot be opened or read.
    RecordTooLargeError
        A line past ``MAX_LINE_BYTES`` or a step line past ``MAX_METRICS_PER_LINE`` metrics
        (``bayesgrpo.logs.readers._limits``).
    MalformedRecordError, TruncatedLogError
        With ``strict=True`` only.
    """
    path = Path(source.paths[0])
    try:
        with open(path, "rb") as handle:
            columns, scanner, n_lines = _scan(handle, path, options.strict)
    except OSError as exc:
        raise LogReadError(f"cannot read: {exc.strerror or exc}", path) from exc
    if n_lines == 0:
        raise EmptyLogError("empty file: no verl step line to read", path)
    records_read = columns.n + columns.cut_record.count
    if records_read == 0:
        raise EmptyLogError(
            f"no verl step line among {n_lines} line(s): looked for lines "
            "'step:<N> - <metric>:<value> - ...', "
            "optionally after ANSI colour codes and a logging prefix such as '(TaskRunner pid=123)' or "
            "'2025-01-01 12:00:00 INFO'. Is this the "
            "console output of a verl run with trainer.logger including 'console'?",
            path,
        )
    frame = columns.frame()
    metric_names = [c for c in frame.columns if c not in (LOC, STEP)]
    label = str(path)
    issues = columns.issues(label) + scanner.issues(label)
    metadata = scanner.metadata()
    logger.debug(
        "read %s: %d step lines of %d lines, %d metrics", path, records_read, n_lines, len(metric_names)
    )
    return [
        RawRun(
            run_id=options.run_id or source.run_id,
            source=label,
            format=FORMAT,
            records=frame,
            records_read=records_read,
            issues=issues,
            metadata=metadata,
            reward_candidates=REWARD_CANDIDATES,
            aliases=metric_aliases(metric_names),
            location_label="line",
        )
    ]
