"""TensorBoard event files (``events.out.tfevents.*``): one folder of event files is one run.

What writes them: verl (``trainer.logger=['tensorboard']``) and the transformers/TRL
``TensorBoardCallback`` both call ``torch.utils.tensorboard.SummaryWriter.add_scalar``, which
writes one ``Event`` per value through tensorboard's ``EventFileWriter``: legacy
``simple_value`` summaries by default, a ``tensor`` with one ``float_val`` with
``new_style=True``. TensorFlow 2's ``tf.summary.scalar`` writes a scalar tensor whose bytes are
in ``tensor_content``. All three are read, in any float (or integer) dtype.

File layout (TFRecord): each record is ``uint64 length``, ``uint32 masked crc32c(length)``,
``length`` bytes of a serialised ``tensorboard.Event``, ``uint32 masked crc32c(data)``.
Records are framed here and each payload is decoded by tensorboard's compiled protos
(``tensorboard.compat.proto.event_pb2.Event.FromString``), because tensorboard's own loader
(``event_file_loader``) stops silently at a torn or corrupted record (``DataLossError`` ->
``break``), and, without TensorFlow, checks checksums in pure Python: measured on a 203 MB
file of 3.7 million events, its ``LegacyEventFileLoader`` parses about 75,000 events per CPU
second, this reader about 330,000 (checksums verified, scalars collected).
Both checksums of every record are verified; a record that fails is reported, never used:

- a torn last record (the file ends mid-record: written while being read, or cut): dropped,
  reported with its byte offset (``TruncatedLogError`` when ``strict``);
- a payload whose checksum does not match: that record dropped, reading goes on with the
  next record (its length was intact);
- a length whose checksum does not match: the bytes from there to the next valid record
  are skipped and reported (reading resynchronises), or, if no valid record follows, the
  rest of the file is reported as skipped;
- a file with no valid record at all (not an event file): ``LogReadError`` if it is the
  run's only file, otherwise reported and dropped;
- an empty file: ``EmptyLogError`` if it is the run's only file, otherwise noted.

Records are the scalar values: one long-form record per (event, tag) value, with
``_loc`` the event's number in the run (the decoded events of the run's files numbered from 1
in reading order, each file's ``file_version`` event included), so ``location_label`` is
``"event"``; records dropped by the reader are located by file and byte offset.
Histograms, images, audio, text, graphs and other non-scalar data are not records; they are
counted and listed in one ``info`` issue. The files of a folder are read in the order of the
timestamp in their names (``events.out.tfevents.<unix time>.<host>...``); steps logged again
by a later file (a resumed run) are left to ``tidy_run`` (latest wins).

Metadata: TRL/transformers write ``TrainingArguments`` (``args/text_summary``) and the model
configuration (``model_config/text_summary``) as text summaries; what they state (learning
rate, ``num_generations``, ``max_steps``, ``logging_steps``, epochs, model name) goes into the
run's metadata. verl writes no configuration to TensorBoard.
"""

from __future__ import annotations

import json
import logging
import os
import re
import struct
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
import pandas as pd
from google.protobuf.message import DecodeError
from tensorboard.compat.proto import event_pb2, types_pb2
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import crc32c as _python_crc32c

from bayesgrpo.errors import EmptyLogError, LogReadError, MalformedRecordError, TruncatedLogError
from bayesgrpo.logs.readers._records import LOC, STEP, RawRun
from bayesgrpo.logs.readers.trl.columns import TRL_ALIASES, TRL_REWARD_CANDIDATES
from bayesgrpo.logs.readers.verl.lines import REWARD_CANDIDATES as VERL_REWARD_CANDIDATES
from bayesgrpo.logs.readers.verl.lines import metric_aliases as verl_metric_aliases
from bayesgrpo.logs.report import MAX_LOCATIONS, ReadIssue

if TYPE_CHECKING:
    from bayesgrpo.logs.readers.base import ReadOptions, Source

logger = logging.getLogger(__name__)

#: Train reward tags, in order of preference: verl's raw score and its reward after a KL
#: penalty (as the verl console reader), then TRL's as the transformers callback names them
#: (each logged key ``k`` becomes ``train/k``), then bare names of hand-made loggers.
REWARD_CANDIDATES: tuple[str, ...] = (
    *VERL_REWARD_CANDIDATES,
    *(f"train/{name}" for name in TRL_REWARD_CANDIDATES),
    "train/rewards/mean",
    "reward",
    "rewards/mean",
)


def tensorboard_aliases(tags: Iterable[str]) -> dict[str, str]:
    """Tag -> canonical name, for the tags present, as the verl and TRL readers map them.

    verl's tags are named as in its console log (``actor/entropy`` -> ``entropy``,
    ``actor/kl_loss`` -> ``kl``, ``response_length/mean`` -> ``completion_length``, the main
    validation score -> ``val_reward``...; see ``readers.verl.metric_aliases``). The
    transformers callback writes each logged key ``k`` as ``train/k`` (``eval_k`` as
    ``eval/k``, kept under its own name): ``train/kl`` -> ``kl`` and so on (``TRL_ALIASES``).
    """
    names = list(tags)
    aliases = verl_metric_aliases(names)
    present = set(names)
    taken = set(aliases.values())
    for name, canonical in TRL_ALIASES.items():
        tag = f"train/{name}"
        if tag in present and canonical not in taken:
            aliases[tag] = canonical
            taken.add(canonical)
    return aliases


_CHUNK_BYTES = 1 << 20  # 1 MiB: as fast as larger windows, and a small peak memory
_HEADER = 12  # uint64 length + uint32 masked crc of the length
_FOOTER = 4  # uint32 masked crc of the data
_MASK_DELTA = 0xA282EAD8
_TFEVENTS_TIME = re.compile(r"tfevents\.(\d+)")
_SCALAR_PLUGINS = ("", "scalars")
_TEXT_TAGS = ("args/text_summary", "model_config/text_summary")

# --------------------------------------------------------------------------------------------
# CRC-32C (Castagnoli), masked as TFRecord does


def _crc32c_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> np.uint32(1)) ^ np.uint32(0x82F63B78), table >> np.uint32(1))
    return table.astype(np.uint32)


_CRC_TABLE = _crc32c_table()
_VECTOR_MIN = 32  # below this many ranges of one length, pure Python beats a numpy column loop

try:  # the C implementation, when installed (it comes with zarr, among others)
    import google_crc32c as _google_crc32c

    _FAST_CRC = _google_crc32c.implementation == "c"
except ImportError:  # pragma: no cover - depends on the environment
    _google_crc32c = None
    _FAST_CRC = False


def _mask(crc: np.ndarray) -> np.ndarray:
    crc = crc.astype(np.uint32)
    return ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(_MASK_DELTA)


def _crc32c_numpy(buffer: bytes, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """CRC-32C of many byte ranges without a C library.

    Ranges of one length, when there are many, are processed together: one vectorised table
    step per byte column (about 1 us per 60-byte record). Lengths shared by few ranges (a long
    text or graph event) go through tensorboard's pure-Python CRC, about 9 MB/s.
    """
    data = np.frombuffer(buffer, dtype=np.uint8)
    out = np.empty(len(starts), dtype=np.uint32)
    for length in np.unique(lengths):
        chosen = np.flatnonzero(lengths == length)
        if len(chosen) < _VECTOR_MIN:
            for index in chosen.tolist():
                start = int(starts[index])
                out[index] = _python_crc32c(buffer[start : start + int(length)])
            continue
        position = starts[chosen].astype(np.int64)
        crc = np.full(len(chosen), 0xFFFFFFFF, dtype=np.uint32)
        for offset in range(int(length)):
            crc = _CRC_TABLE[(crc ^ data[position + offset]) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
        out[chosen] = crc ^ np.uint32(0xFFFFFFFF)
    return out


def masked_crc32c(buffer: bytes, starts: Sequence[int] | np.ndarray, lengths: Sequence[int] | np.ndarray) -> np.ndarray:
    """TFRecord's masked CRC-32C of the byte ranges ``buffer[start:start + length]``.

    Uses ``google_crc32c`` (C) when installed, numpy and tensorboard's pure-Python CRC
    otherwise (see ``_crc32c_numpy``); on a 200 MB file of small events both read as fast.

    Parameters
    ----------
    buffer : bytes
    starts, lengths : sequences of int
        The ranges, one per record.

    Returns
    -------
    numpy.ndarray of uint32
    """
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    if len(starts) == 0:
        return np.empty(0, dtype=np.uint32)
    if _FAST_CRC:
        value = _google_crc32c.value  # type: ignore[union-attr]
        raw = np.fromiter(
            (value(buffer[s : s + n]) for s, n in zip(starts.tolist(), lengths.tolist())),
            dtype=np.uint32,
            count=len(starts),
        )
    else:
        raw = _crc32c_numpy(buffer, starts, lengths)
    return _mask(raw)


def _length_crcs(lengths: np.ndarray) -> np.ndarray:
    """The masked CRC of each record length's 8 bytes (computed once per distinct length)."""
    distinct, inverse = np.unique(lengths, return_inverse=True)
    encoded = distinct.astype("<u8").tobytes()
    crcs = masked_crc32c(encoded, np.arange(len(distinct)) * 8, np.full(len(distinct), 8))
    return crcs[inverse]


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
class _Scan:
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
        if kind not in self.problems:
            self.problems[kind] = _Problem(kind)
        return self.problems[kind]

    def count_non_scalar(self, kind: str, tag: str | None) -> None:
        self.non_scalar[kind] += 1
        if tag is not None:
            shown = self.non_scalar_tags.setdefault(kind, [])
            if len(shown) < 3 and tag not in shown:
                shown.append(tag)

    @property
    def dropped(self) -> int:
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


def _collect(scan: _Scan, events: Iterable[Any]) -> None:
    """Add the scalar values of events to ``scan``, numbering the events; count the rest."""
    locs, steps, codes, values, tags = scan.locs.append, scan.steps.append, scan.codes.append, scan.values.append, scan.tags
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


def _other_event(scan: _Scan, event: Any, number: int) -> None:
    """Note an event that holds no summary: a restart, or a graph (counted as non-scalar)."""
    what = event.WhichOneof("what")
    if what == "session_log" and event.session_log.status == event_pb2.SessionLog.START:
        scan.restarts.append((f"event {number}", int(event.step)))
    elif what in ("graph_def", "meta_graph_def", "tagged_run_metadata"):
        scan.count_non_scalar(what, None)


def _tensor_value(scan: _Scan, value: Any, tag: str) -> float | None:
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
        elif plugin == "text" and tag in _TEXT_TAGS and tag not in scan.texts:
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
class _FileResult:
    """How reading one file went."""

    path: Path
    size: int
    valid: int  # records with valid checksums that decoded
    garbage: bool  # no valid record at all, bad bytes from the start: not an event file


def _scan_file(path: Path, scan: _Scan, strict: bool, chunk: int | None = None) -> _FileResult:
    """Read one event file into ``scan``, reporting torn and corrupted records."""
    try:
        with open(path, "rb") as handle:
            return _scan_open_file(path, handle, scan, strict, chunk or _CHUNK_BYTES)
    except OSError as exc:
        raise LogReadError(f"cannot read: {exc}", path) from exc


def _scan_open_file(path: Path, handle: BinaryIO, scan: _Scan, strict: bool, chunk: int) -> _FileResult:
    """The loop of ``_scan_file``: frame, check and decode window after window."""
    name = path.name
    valid = 0
    window = _Window(handle, chunk)
    window.advance(0)
    position = 0  # file offset of the next record
    corrupt_from: int | None = None  # start of bytes that hold no valid record
    while True:
        data, base = window.data, window.base
        raw = np.frombuffer(data, dtype=np.uint8)
        starts, lengths = _frame(data, position - base)
        # the batch ends before the first record whose length fails its checksum
        bad: int | None = None
        if len(starts):
            header_ok = _length_crcs(lengths) == _u32(raw, starts + 8)
            if not header_ok.all():
                cut = int(np.argmin(header_ok))
                bad = base + int(starts[cut])
                starts, lengths = starts[:cut], lengths[:cut]
        elif len(data) - (position - base) >= _HEADER:  # an incomplete record: is its length sound?
            length = np.frombuffer(data, dtype="<u8", count=1, offset=position - base).astype(np.int64)
            if _length_crcs(length)[0] != _u32(raw, np.array([position - base + 8]))[0]:
                bad = position
        if len(starts):
            if corrupt_from is not None:
                _report_corrupt(scan, name, corrupt_from, base + int(starts[0]))
                corrupt_from = None
            valid += _read_batch(scan, data, base, starts, lengths, path, strict)
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
            what = f"{remaining} of its {need} bytes" if remaining >= _HEADER else f"{remaining} bytes of a 12-byte header"
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
        _report_corrupt(scan, name, corrupt_from, None, size)
    return _FileResult(path, size, valid, garbage)


def _frame(data: bytes, cursor: int) -> tuple[np.ndarray, np.ndarray]:
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


def _read_batch(scan: _Scan, data: bytes, base: int, starts: np.ndarray, lengths: np.ndarray, path: Path, strict: bool) -> int:
    """Check the data checksums of framed records, decode the sound ones; returns how many decoded."""
    name = path.name
    raw = np.frombuffer(data, dtype=np.uint8)
    data_ok = masked_crc32c(data, starts + _HEADER, lengths) == _u32(raw, starts + _HEADER + lengths)
    payloads: list[bytes] = []
    offsets: list[int] = []
    for start, length, ok in zip(starts.tolist(), lengths.tolist(), data_ok.tolist()):
        if ok:
            payloads.append(data[start + _HEADER : start + _HEADER + length])
            offsets.append(base + start)
            continue
        detail = f"the record at byte {base + start} of {name} does not match its data checksum (corrupted)"
        if strict:
            raise MalformedRecordError(detail, path, f"byte {base + start}")
        scan.problem("bad_checksum").add(f"{name} byte {base + start}", detail + "; record dropped")
    before = scan.events
    _collect(scan, _parse_events(scan, payloads, offsets, name, path, strict))
    return scan.events - before


def _report_corrupt(scan: _Scan, name: str, start: int, resumed: int | None, size: int = 0) -> None:
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


def _parse_events(scan: _Scan, payloads: list[bytes], offsets: list[int], name: str, path: Path, strict: bool) -> Iterator[Any]:
    """``Event.FromString`` of each payload; one that does not parse is reported, not yielded."""
    parse = event_pb2.Event.FromString
    for payload, offset in zip(payloads, offsets):
        try:
            yield parse(payload)
        except DecodeError as exc:
            detail = f"the record at byte {offset} of {name} is not a valid Event ({exc})"
            if strict:
                raise MalformedRecordError(detail, path, f"byte {offset}") from exc
            scan.problem("undecodable").add(f"{name} byte {offset}", detail + "; record dropped")


# --------------------------------------------------------------------------------------------
# Metadata stated by TRL / transformers


def _metadata_from_texts(texts: dict[str, str]) -> dict[str, Any]:
    """Run metadata from the ``TrainingArguments`` and model-config JSON that transformers logs."""
    metadata: dict[str, Any] = {}
    args = _json_object(texts.get("args/text_summary"))
    if args:
        if _is_number(args.get("learning_rate")):
            metadata["learning_rate"] = float(args["learning_rate"])
        if _is_number(args.get("num_generations")) and args["num_generations"] >= 1:
            metadata["group_size"] = int(args["num_generations"])
        if _is_number(args.get("logging_steps")) and args["logging_steps"] >= 1:
            metadata["logging_steps"] = int(args["logging_steps"])
        max_steps = args.get("max_steps")
        if _is_number(max_steps) and max_steps > 0:
            metadata["total_steps"] = int(max_steps)
        elif _is_number(args.get("num_train_epochs")):
            metadata["num_epochs"] = float(args["num_train_epochs"])
    config = _json_object(texts.get("model_config/text_summary"))
    if config and isinstance(config.get("_name_or_path"), str) and config["_name_or_path"].strip():
        metadata["model"] = config["_name_or_path"].strip()
    return metadata


def _json_object(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        loaded = json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------------
# The reader


def _take_column(values: array, dtype: type) -> np.ndarray:
    """The array's contents as a numpy array; the array is emptied (its memory freed)."""
    column = np.frombuffer(values, dtype=dtype).copy()
    del values[:]
    return column


def read_event_files(paths: Sequence[Path], strict: bool = False, chunk: int | None = None) -> tuple[_Scan, list[_FileResult]]:
    """Scan a run's event files, in the order given, into one ``_Scan``.

    ``chunk``: bytes read at a time (default ``_CHUNK_BYTES``); a record larger than that is
    read whole all the same.
    """
    scan = _Scan()
    return scan, [_scan_file(path, scan, strict, chunk) for path in paths]


def read_tensorboard(source: Source, options: ReadOptions) -> list[RawRun]:
    """Read the event files of one run (one folder) into one long-form raw run.

    Parameters
    ----------
    source : Source
        ``source.paths``: the folder's ``events.out.tfevents.*`` files (any order; they are
        read in the order of the time in their names).
    options : ReadOptions

    Returns
    -------
    list of RawRun
        One run; records ``_loc, step, metric, value`` (``_loc`` = event number in the run).

    Raises
    ------
    EmptyLogError
        When no file holds a scalar value (empty files, or only histograms, text...).
    LogReadError
        When a file is not an event file and it is the run's only file (or ``strict``).
    TruncatedLogError, MalformedRecordError
        With ``options.strict``, at the first torn or corrupted record.
    """
    paths = event_file_order(source.paths)
    label = source.label
    scan, results = read_event_files(paths, options.strict)
    issues: list[ReadIssue] = []
    skipped_files = 0
    for result in results:
        name = result.path.name
        if result.size == 0:
            if len(paths) == 1:
                raise EmptyLogError("empty event file (0 bytes): the writer never flushed", result.path)
            issues.append(ReadIssue(label, "empty_file", "info", 0, (name,), f"{name} is empty (0 bytes); nothing read from it"))
        elif result.garbage:
            message = (
                f"not a TensorBoard event file: none of its {result.size} bytes starts a record with valid "
                "checksums (a TFRecord starts with an 8-byte length and its masked CRC-32C)"
            )
            if len(paths) == 1 or options.strict:
                raise LogReadError(message, result.path, "byte 0")
            skipped_files += 1
            issues.append(ReadIssue(label, "not_event_file", "dropped", 1, (f"{name} byte 0",), f"{name}: {message}; file skipped"))
    for problem in scan.problems.values():
        issues.append(
            ReadIssue(
                label,
                problem.kind,
                "dropped",
                problem.count,
                tuple(problem.locations),
                problem.details[0] + (f" (and {problem.count - 1} more like it)" if problem.count > 1 else ""),
            )
        )
    if scan.non_scalar:
        parts = [
            f"{kind} {count}" + (f" ({', '.join(repr(t) for t in scan.non_scalar_tags.get(kind, []))})" if scan.non_scalar_tags.get(kind) else "")
            for kind, count in scan.non_scalar.most_common()
        ]
        issues.append(
            ReadIssue(
                label,
                "non_scalar",
                "info",
                sum(scan.non_scalar.values()),
                (),
                "summaries that are not scalars are not read as metrics: " + "; ".join(parts),
            )
        )
    for where, step in scan.restarts:
        issues.append(
            ReadIssue(
                label,
                "restart",
                "info",
                1,
                (where,),
                f"the writer restarted at step {step} (SessionLog START, a resumed run): TensorBoard would hide "
                f"earlier values at steps >= {step}; here steps logged again keep their latest value",
            )
        )
    n_values = len(scan.values)
    if n_values == 0:
        found = ", ".join(f"{kind} {count}" for kind, count in scan.non_scalar.most_common()) or "none"
        dropped = ", ".join(f"{p.kind} {p.count} ({p.locations[0]})" for p in scan.problems.values()) or "none"
        raise EmptyLogError(
            f"no scalar summary in {len(paths)} event file(s): {scan.events} event(s) decoded; "
            f"non-scalar data: {found}; records dropped: {dropped}",
            label,
        )
    tags = list(scan.tags)
    records = pd.DataFrame(
        {
            LOC: _take_column(scan.locs, np.int64),
            STEP: _take_column(scan.steps, np.int64),
            "metric": pd.Categorical.from_codes(_take_column(scan.codes, np.int32), categories=tags),
            "value": _take_column(scan.values, np.float64),
        },
        copy=False,
    )
    records_read = n_values + scan.dropped + skipped_files
    logger.debug("%s: %d events, %d scalar values, %d tags", label, scan.events, n_values, len(tags))
    return [
        RawRun(
            run_id=options.run_id or source.run_id,
            source=label,
            format="tensorboard",
            records=records,
            records_read=records_read,
            issues=issues,
            metadata=_metadata_from_texts(scan.texts),
            reward_candidates=REWARD_CANDIDATES,
            aliases=tensorboard_aliases(tags),
            location_label="event",
            long=True,
        )
    ]


__all__ = [
    "REWARD_CANDIDATES",
    "event_file_order",
    "masked_crc32c",
    "read_tensorboard",
    "tensor_scalar",
    "tensorboard_aliases",
]
