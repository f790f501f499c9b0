"""TFRecord framing of event files and the scalar values in their events.

Records are found in a sliding window over each file (:data:`CHUNK_BYTES` at a time), checked by
their CRCs, and decoded by tensorboard's compiled protos; :func:`tensor_scalar` reads the scalar of
a ``tensor`` summary in any float or integer dtype. Damaged records are counted and reported, not
dropped silently.
"""

from __future__ import annotations

import os
import re
import struct
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from google.protobuf.message import DecodeError
from tensorboard.compat.proto import event_pb2, types_pb2

from bayesgrpo.errors import LogReadError, MalformedRecordError, TruncatedLogError
from bayesgrpo.logs.readers.tensorboard.crc import length_crcs, masked_crc32c
from bayesgrpo.logs.report import MAX_LOCATIONS

CHUNK_BYTES = 1 << 20  # 1 MiB: as fast as larger windows, and a small peak memory
_HEADER = 12  # uint64 length + uint32 masked crc of the length
_FOOTER = 4  # uint32 masked crc of the data

_TFEVENTS_TIME = re.compile(r"tfevents\.(\d+)")
_SCALAR_PLUGINS = ("", "scalars")
TEXT_TAGS = ("args/text_summary", "model_config/text_summary")

# --------------------------------------------------------------------------------------------
# Scalar values


_NUMERIC_FIELDS: dict[int, tuple[str, str]] = {
    types_pb2.DT_FLOAT: ("float_val", "<f4"),
    types_pb2.DT_DOUBLE: ("double_val", "<f8"),
    types_pb2.DT_HALF: ("half_val", "<f2"),
    types_pb2.DT_BFLOAT16: ("half_val", "bfloat16"),
    types_pb2.DT_INT8: ("int_val", "<i1"),
    types_pb2.DT_UINT8: ("int_val", "<u1"),
    types_pb2.DT_INT16: ("int_val", "<i2"),
    types_pb2.DT_UINT16: ("int_val", "<u2"),
    types_pb2.DT_INT32: ("int_val", "<i4"),
    types_pb2.DT_INT64: ("int64_val", "<i8"),
    types_pb2.DT_UINT32: ("uint32_val", "<u4"),
    types_pb2.DT_UINT64: ("uint64_val", "<u8"),
    types_pb2.DT_BOOL: ("bool_val", "?"),
}


def _bits_to_float(bits: int, dtype: str) -> float:
    """A 16-bit pattern (TensorProto ``half_val``) as the float it encodes."""
    if dtype == "bfloat16":
        return float(np.array([bits << 16], dtype=np.uint32).view(np.float32)[0])
    return float(np.array([bits], dtype=np.uint16).view(np.float16)[0])


def tensor_scalar(tensor: Any) -> float | None:
    """The value of a one-element numeric ``TensorProto``, or ``None`` for anything else.

    Handles the ``*_val`` fields and packed ``tensor_content`` (TensorFlow 2), float16 and
    bfloat16 bit patterns included.
    """
    spec = _NUMERIC_FIELDS.get(tensor.dtype)
    if spec is None:
        return None
    for dim in tensor.tensor_shape.dim:
        if dim.size != 1:
            return None
    name, dtype = spec
    content = tensor.tensor_content
    if content:
        if dtype == "bfloat16":
            return _bits_to_float(int.from_bytes(content, "little"), dtype) if len(content) == 2 else None
        if len(content) != np.dtype(dtype).itemsize:
            return None
        return float(np.frombuffer(content, dtype=dtype)[0])
    values = getattr(tensor, name)
    if len(values) != 1:
        return None
    if name == "half_val":
        bits = int(values[0])
        return _bits_to_float(bits, dtype) if 0 <= bits <= 0xFFFF else None
    return float(values[0])


# --------------------------------------------------------------------------------------------
# The scan of one run


@dataclass
class _Problem:
    """Records the reader dropped itself, of one kind, in one file."""

    kind: str
    count: int = 0
    locations: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)

    def add(self, location: str, detail: str) -> None:
        self.count += 1
        if len(self.locations) < MAX_LOCATIONS:
            self.locations.append(location)
            self.details.append(detail)


@dataclass
class EventScan:
    """What reading a run's files found: scalar values in compact arrays, and everything else."""

    locs: array = field(default_factory=lambda: array("q"))
    steps: array = field(default_factory=lambda: array("q"))
    codes: array = field(default_factory=lambda: array("i"))
    values: array = field(default_factory=lambda: array("d"))
    tags: dict[str, int] = field(default_factory=dict)
    plugins: dict[str, str] = field(default_factory=dict)
    events: int = 0
    non_scalar: Counter[str] = field(default_factory=Counter)
    non_scalar_tags: dict[str, list[str]] = field(default_factory=dict)
    restarts: list[tuple[str, int]] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    problems: dict[str, _Problem] = field(default_factory=dict)

    def problem(self, kind: str) -> _Problem:
        """The tally of one kind of problem, made on first use."""
        if kind not in self.problems:
            self.problems[kind] = _Problem(kind)
        return self.problems[kind]

    def count_non_scalar(self, kind: str, tag: str | None) -> None:
        """Count an event whose value is not a scalar (histograms, images, text), by kind and tag."""
        self.non_scalar[kind] += 1
        if tag is not None:
            shown = self.non_scalar_tags.setdefault(kind, [])
            if len(shown) < 3 and tag not in shown:
                shown.append(tag)

    @property
    def dropped(self) -> int:
        """Records dropped over the whole scan."""
        return sum(p.count for p in self.problems.values())


def event_file_order(paths: Iterable[Path]) -> list[Path]:
    """Event files in the order they were started: by the Unix time in their names, then name.

    Names are ``events.out.tfevents.<10-digit unix time>.<host>.<pid>.<n>[suffix]``; a file
    whose name has no time comes first, by name.
    """

    def key(path: Path) -> tuple[int, str]:
        match = _TFEVENTS_TIME.search(path.name)
        return (int(match.group(1)) if match else -1, path.name)

    return sorted(paths, key=key)


def _collect(scan: EventScan, events: Iterable[Any]) -> None:
    """Add the scalar values of events to ``scan``, numbering the events; count the rest."""
    locs, steps, codes, values, tags = (
        scan.locs.append,
        scan.steps.append,
        scan.codes.append,
        scan.values.append,
        scan.tags,
    )
    number = scan.events
    for event in events:
        number += 1
        if event.WhichOneof("what") != "summary":
            _other_event(scan, event, number)
            continue
        step = event.step
        for value in event.summary.value:
            tag = value.tag
            if value.WhichOneof("value") == "simple_value":
                number_value: float | None = value.simple_value
            else:
                number_value = _tensor_value(scan, value, tag)
                if number_value is None:
                    continue
            code = tags.get(tag)
            if code is None:
                code = tags[tag] = len(tags)
            locs(number)
            steps(step)
            codes(code)
            values(number_value)
    scan.events = number


def _other_event(scan: EventScan, event: Any, number: int) -> None:
    """Note an event that holds no summary: a restart, or a graph (counted as non-scalar)."""
    what = event.WhichOneof("what")
    if what == "session_log" and event.session_log.status == event_pb2.SessionLog.START:
        scan.restarts.append((f"event {number}", int(event.step)))
    elif what in ("graph_def", "meta_graph_def", "tagged_run_metadata"):
        scan.count_non_scalar(what, None)


def _tensor_value(scan: EventScan, value: Any, tag: str) -> float | None:
    """The number of a scalar tensor summary; ``None`` (and counted) for any other summary.

    A tag's plugin is taken from its first value that carries metadata: TensorFlow 1's
    writer attaches metadata to the first value of each tag only.
    """
    kind = value.WhichOneof("value")
    if value.HasField("metadata") and tag not in scan.plugins:
        scan.plugins[tag] = value.metadata.plugin_data.plugin_name
    plugin = scan.plugins.get(tag, "")
    if kind == "tensor":
        if plugin in _SCALAR_PLUGINS:
            number = tensor_scalar(value.tensor)
            if number is not None:
                return number
        elif plugin == "text" and tag in TEXT_TAGS and tag not in scan.texts:
            strings = value.tensor.string_val
            if len(strings) == 1:
                scan.texts[tag] = strings[0].decode("utf-8", errors="replace")
    scan.count_non_scalar(plugin or kind or "empty", tag)
    return None


class _Window:
    """The unread part of a file: ``data`` holds its bytes ``[base, base + len(data))``."""

    def __init__(self, handle: BinaryIO, chunk: int):
        self.handle = handle
        self.chunk = chunk
        self.data = b""
        self.base = 0
        self.eof = False

    def advance(self, keep_from: int, need: int = 0) -> bool:
        """Drop the bytes before ``keep_from``; read one more chunk, or up to ``need`` bytes kept.

        Never asks for more than the file holds (a corrupted length may claim exabytes).
        Returns False when nothing more could be read (end of file).
        """
        if self.eof:
            return False
        cut = keep_from - self.base
        left_in_file = os.fstat(self.handle.fileno()).st_size - self.handle.tell()
        wanted = min(max(self.chunk, need - (len(self.data) - cut)), max(left_in_file, 0) + 1)
        more = self.handle.read(wanted)
        if len(more) < wanted:
            self.eof = True
        self.data = self.data[cut:] + more
        self.base = keep_from
        return bool(more)


def _u32(raw: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The little-endian uint32 at each offset of a byte array."""
    out = raw[offsets].astype(np.uint32)
    for byte in (1, 2, 3):
        out |= raw[offsets + byte].astype(np.uint32) << np.uint32(8 * byte)
    return out


def _find_record(window: _Window, start: int) -> int | None:
    """The first offset at or after ``start`` where a record with valid checksums begins.

    Searches the bytes in the window. A record whose length checksum holds but whose data
    runs past the window is taken (its data checksum is checked once it is read), except at
    the end of the file. ``None`` when no record starts in the window.
    """
    data = window.data
    raw = np.frombuffer(data, dtype=np.uint8)
    last = len(data) - _HEADER  # the last offset where a whole header fits
    position = start - window.base
    while position <= last:
        stop = min(position + (1 << 16), last + 1)
        candidates = np.arange(position, stop, dtype=np.int64)
        header_crc = masked_crc32c(data, candidates, np.full(len(candidates), 8))
        for hit in np.flatnonzero(header_crc == _u32(raw, candidates + 8)):
            offset = int(candidates[hit])
            (length,) = struct.unpack_from("<Q", data, offset)
            end = offset + _HEADER + length + _FOOTER
            if end > len(data):
                if window.eof:
                    continue
                return window.base + offset
            (data_crc,) = struct.unpack_from("<I", data, offset + _HEADER + length)
            if int(masked_crc32c(data, [offset + _HEADER], [length])[0]) == data_crc:
                return window.base + offset
        position = stop
    return None


@dataclass
class FileResult:
    """How reading one file went."""

    path: Path
    size: int
    valid: int  # records with valid checksums that decoded
    garbage: bool  # no valid record at all, bad bytes from the start: not an event file


def scan_file(path: Path, scan: EventScan, strict: bool, chunk: int | None = None) -> FileResult:
    """Read one event file into ``scan``, reporting torn and corrupted records."""
    try:
        with open(path, "rb") as handle:
            return _scan_open_file(path, handle, scan, strict, chunk or CHUNK_BYTES)
    except OSError as exc:
        raise LogReadError(f"cannot read: {exc}", path) from exc


def _scan_open_file(path: Path, handle: BinaryIO, scan: EventScan, strict: bool, chunk: int) -> FileResult:
    """The loop of ``scan_file``: frame, check and decode window after window."""
    name = path.name
    valid = 0
    window = _Window(handle, chunk)
    window.advance(0)
    position = 0  # file offset of the next record
    corrupt_from: int | None = None  # start of bytes that hold no valid record
    while True:
        data, base = window.data, window.base
        raw = np.frombuffer(data, dtype=np.uint8)
        starts, lengths = events_frame(data, position - base)
        # the batch ends before the first record whose length fails its checksum
        bad: int | None = None
        if len(starts):
            header_ok = length_crcs(lengths) == _u32(raw, starts + 8)
            if not header_ok.all():
                cut = int(np.argmin(header_ok))
                bad = base + int(starts[cut])
                starts, lengths = starts[:cut], lengths[:cut]
        elif len(data) - (position - base) >= _HEADER:  # an incomplete record: is its length sound?
            length = np.frombuffer(data, dtype="<u8", count=1, offset=position - base).astype(np.int64)
            if length_crcs(length)[0] != _u32(raw, np.array([position - base + 8]))[0]:
                bad = position
        if len(starts):
            if corrupt_from is not None:
                report_corrupt(scan, name, corrupt_from, base + int(starts[0]))
                corrupt_from = None
            valid += read_batch(scan, data, base, starts, lengths, path, strict)
            position = base + int(starts[-1] + _HEADER + lengths[-1] + _FOOTER)
        if bad is not None:  # skip to the next valid record
            if strict:
                raise MalformedRecordError(
                    f"the length of the record at byte {bad} of {name} does not match its checksum "
                    "(a corrupted file, or not an event file)",
                    path,
                    f"byte {bad}",
                )
            if corrupt_from is None:
                corrupt_from = bad
            found = _find_record(window, bad + 1)
            if found is not None:
                position = found
                continue
            position = max(bad + 1, base + len(data) - _HEADER + 1)  # keep a header that may start there
            if window.advance(position):
                continue
            break
        if len(starts):
            continue
        # no whole record left in the window: read on, or meet the end of the file
        remaining = len(data) - (position - base)
        need = _HEADER
        if remaining >= _HEADER:
            need += struct.unpack_from("<Q", data, position - base)[0] + _FOOTER
        if window.advance(position, need):
            continue
        if remaining > 0 and corrupt_from is None:
            what = (
                f"{remaining} of its {need} bytes"
                if remaining >= _HEADER
                else f"{remaining} bytes of a 12-byte header"
            )
            detail = (
                f"{name} ends inside the record at byte {position} ({what}): the file was cut, or is "
                "still being written; the partial record is dropped"
            )
            if strict:
                raise TruncatedLogError(detail, path, f"byte {position}")
            scan.problem("truncated").add(f"{name} byte {position}", detail)
        break
    size = window.base + len(window.data)
    garbage = corrupt_from == 0 and valid == 0
    if corrupt_from is not None and not garbage:
        report_corrupt(scan, name, corrupt_from, None, size)
    return FileResult(path, size, valid, garbage)


def events_frame(data: bytes, cursor: int) -> tuple[np.ndarray, np.ndarray]:
    """Starts and payload lengths of the records lying whole in ``data`` from ``cursor`` on.

    The lengths are taken as written; their checksums are checked by the caller.
    """
    starts: list[int] = []
    lengths: list[int] = []
    end = len(data)
    unpack = struct.unpack_from
    while cursor + _HEADER <= end:
        (length,) = unpack("<Q", data, cursor)
        if cursor + _HEADER + length + _FOOTER > end:
            break
        starts.append(cursor)
        lengths.append(length)
        cursor += _HEADER + length + _FOOTER
    return np.asarray(starts, dtype=np.int64), np.asarray(lengths, dtype=np.int64)


def read_batch(
    scan: EventScan, data: bytes, base: int, starts: np.ndarray, lengths: np.ndarray, path: Path, strict: bool
) -> int:
    """Check the data checksums of framed records, decode the sound ones; returns how many decoded."""
    name = path.name
    raw = np.frombuffer(data, dtype=np.uint8)
    data_ok = masked_crc32c(data, starts + _HEADER, lengths) == _u32(raw, starts + _HEADER + lengths)
    payloads: list[bytes] = []
    offsets: list[int] = []
    for start, length, ok in zip(starts.tolist(), lengths.tolist(), data_ok.tolist(), strict=True):
        if ok:
            payloads.append(data[start + _HEADER : start + _HEADER + length])
            offsets.append(base + start)
            continue
        detail = f"the record at byte {base + start} of {name} does not match its data checksum (corrupted)"
        if strict:
            raise MalformedRecordError(detail, path, f"byte {base + start}")
        scan.problem("bad_checksum").add(f"{name} byte {base + start}", detail + "; record dropped")
    before = scan.events
    _collect(scan, parse_events(scan, payloads, offsets, name, path, strict))
    return scan.events - before


def report_corrupt(scan: EventScan, name: str, start: int, resumed: int | None, size: int = 0) -> None:
    """Report the bytes skipped after a corrupt record, and where reading resumed."""
    if resumed is not None:
        detail = (
            f"bytes {start} to {resumed} of {name} ({resumed - start} bytes) hold no valid record "
            f"(corrupted): the record(s) there are lost; reading resumed at byte {resumed}"
        )
    else:
        detail = (
            f"bytes {start} to the end of {name} ({size - start} bytes) hold no valid record "
            "(corrupted): the record(s) there are lost"
        )
    scan.problem("corrupt").add(f"{name} byte {start}", detail)


def parse_events(
    scan: EventScan, payloads: list[bytes], offsets: list[int], name: str, path: Path, strict: bool
) -> Iterator[Any]:
    """``Event.FromString`` of each payload; one that does not parse is reported, not yielded."""
    parse = event_pb2.Event.FromString
    for payload, offset in zip(payloads, offsets, strict=True):
        try:
            yield parse(payload)
        except DecodeError as exc:
            detail = f"the record at byte {offset} of {name} is not a valid Event ({exc})"
            if strict:
                raise MalformedRecordError(detail, path, f"byte {offset}") from exc
            scan.problem("undecodable").add(f"{name} byte {offset}", detail + "; record dropped")
