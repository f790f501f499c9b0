"""TRL / transformers logs: ``trainer_state.json`` and the console's dict lines.

``trainer_state.json``
    Written by ``transformers.TrainerState.save_to_json`` (``json.dumps(state, indent=2,
    sort_keys=True)``) in the output folder and in every ``checkpoint-N/``. Its ``log_history``
    is a list of dicts, one per ``Trainer.log`` call, each with the ``step``
    (``state.global_step``) added: training rows (``loss``, ``grad_norm``, ``learning_rate``,
    TRL's ``reward``, ``reward_std``, ``rewards/<func>/mean``, ``kl``, ``entropy``,
    ``completions/mean_length``... and ``epoch``), evaluation rows (``eval_*`` keys), and once
    training ends a summary row (``train_runtime``, ``train_loss``, ``total_flos``...). The file
    is rewritten whole at every save: a reader can catch it cut mid-way. Complete entries are
    then salvaged one by one and the cut is reported.

TRL console
    ``transformers.ProgressCallback.on_log`` writes ``str(logs)`` for every log call:
    ``{'loss': 0.0012, 'grad_norm': 0.5, 'learning_rate': 4e-06, 'reward': 0.25, ...,
    'epoch': 0.02}`` (recent versions write every float as text with 4 significant digits:
    ``{'loss': '0.0012', ...}``), between tqdm progress bars (``\\r`` redraws). The lines carry no
    step: the k-th training line is step ``k * logging_steps``. Evaluation dicts (``eval_*``
    keys) belong to the step of the training line before them; the final summary dict
    (``train_runtime``...) goes to the run's metadata. Lines are parsed as Python literals,
    never evaluated.

Both formats may show the trainer's start banner (transformers' ``***** Running training
*****`` block, or Unsloth's ``Num examples = 7,473 | Num Epochs = 1 ...``): what it states
becomes metadata (``BannerParser``, shared with the notebook reader).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo.errors import EmptyLogError, LogReadError, MalformedRecordError, TruncatedLogError
from bayesgrpo.logs.readers._common import locations
from bayesgrpo.logs.readers._records import LOC, STEP, RawRun
from bayesgrpo.logs.report import MAX_LOCATIONS, ReadIssue

if TYPE_CHECKING:
    from bayesgrpo.logs.readers.base import ReadOptions, Source

#: TRL / transformers metric names mapped to canonical ones.
TRL_ALIASES: dict[str, str] = {
    "reward_std": "reward_std",
    "kl": "kl",
    "objective/kl": "kl",
    "entropy": "entropy",
    "objective/entropy": "entropy",
    "completions/mean_length": "completion_length",
    "completion_length": "completion_length",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "loss": "loss",
    "Training Loss": "loss",
    "learning_rate": "learning_rate",
    "epoch": "epoch",
}

#: Default reward metrics, in order of preference: GRPO/RLOO-style ``reward``, then PPO's
#: reward-model score and RLHF reward (``PPOTrainer`` of TRL >= 0.12).
TRL_REWARD_CANDIDATES: tuple[str, ...] = ("reward", "objective/scores", "objective/rlhf_reward")

#: Keys only the end-of-training summary row has (``speed_metrics("train", ...)``).
SUMMARY_MARKERS: frozenset[str] = frozenset(
    {"train_runtime", "train_samples_per_second", "train_steps_per_second"}
)

#: Keys that make a printed dict a ``Trainer.log`` record rather than some other print.
_TRAINER_KEYS: frozenset[str] = frozenset(
    {"epoch", "loss", "learning_rate", "grad_norm", "reward", "train_runtime", "train_loss"}
)

#: trainer_state.json top-level keys -> metadata names of the schema.
STATE_METADATA: dict[str, str] = {
    "max_steps": "total_steps",
    "num_train_epochs": "num_epochs",
    "logging_steps": "logging_steps",
    "train_batch_size": "per_device_batch_size",
}
#: trainer_state.json top-level keys kept as extra metadata under their own names.
STATE_EXTRA: tuple[str, ...] = (
    "global_step",
    "eval_steps",
    "save_steps",
    "best_metric",
    "best_global_step",
    "best_model_checkpoint",
    "num_input_tokens_seen",
)

_STATE_LABEL = "log_history entry"
_HISTORY_KEY = re.compile(r'"log_history"\s*:\s*\[')
_TOP_LEVEL_LINE = re.compile(r'^  "(\w+)": (.*?),?$', re.MULTILINE)
_NEXT_ENTRY = re.compile(r"\n    \{")
_HISTORY_END = re.compile(r"\n  \]")
_DICT_START = re.compile(r"\{\s*'[^'\n]{1,300}'\s*:")
_TRAINER_KEY_TEXT = re.compile(
    r"'(?:loss|epoch|learning_rate|grad_norm|reward|train_runtime|eval_[^'\n]*)'\s*:"
)


# --------------------------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------------------------


def plain_value(value: Any) -> Any:
    """A logged value as ``tidy_run`` expects it: float for numbers, the text otherwise.

    ``None`` stays missing; ``bool`` and nested values become text (reported by ``tidy_run``
    as values that are not numbers); integers too large for a float stay text.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            return str(value)
    try:
        return json.dumps(value, allow_nan=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


def is_number(value: Any) -> bool:
    """True for ints and floats, not bools."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite_number(value: Any) -> float | None:
    if not is_number(value):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


class ColumnStore:
    """Records gathered column by column (one list per metric, padded with ``None``).

    Keeps memory proportional to the output: no dict per record is held.
    """

    def __init__(self) -> None:
        self.locs: list[int] = []
        self.steps: list[Any] = []
        self.values: dict[str, list[Any]] = {}
        self.nan_count = 0
        self.nan_locs: list[int] = []
        self.nan_metrics: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.locs)

    def add(self, loc: int, step: Any, record: Mapping[str, Any]) -> None:
        """Append one record (metric -> value as written)."""
        n = len(self.locs)
        had_nan = False
        for key, raw in record.items():
            if key in (LOC, STEP):
                continue
            value = plain_value(raw)
            if isinstance(value, float) and math.isnan(value):
                had_nan = True
                self.nan_count += 1
                self.nan_metrics[key] = self.nan_metrics.get(key, 0) + 1
            column = self.values.get(key)
            if column is None:
                column = self.values[key] = [None] * n
            column.append(value)
        if had_nan and len(self.nan_locs) < MAX_LOCATIONS:
            self.nan_locs.append(loc)
        self.locs.append(loc)
        self.steps.append(step)
        for column in self.values.values():
            if len(column) == n:
                column.append(None)

    def frame(self) -> pd.DataFrame:
        """The records as a wide frame: ``_loc``, ``step`` (as written), one column per metric."""
        data: dict[str, Any] = {
            LOC: np.asarray(self.locs, dtype=np.int64),
            STEP: pd.Series(self.steps, dtype=object),
        }
        for name, column in self.values.items():
            data[name] = _column_array(column)
        return pd.DataFrame(data)

    def nan_issue(self, source: str, label: str) -> ReadIssue | None:
        """An info issue listing values written as NaN (kept as missing), if any."""
        if not self.nan_count:
            return None
        metrics = sorted(self.nan_metrics, key=lambda k: -self.nan_metrics[k])
        return ReadIssue(
            source,
            "nan_value",
            "info",
            self.nan_count,
            tuple(f"{label} {loc}" for loc in self.nan_locs),
            f"value(s) written as NaN treated as missing (metrics {metrics[:5]}); a NaN loss or "
            "reward usually means the run diverged",
        )


def _column_array(column: list[Any]) -> np.ndarray | pd.Series:
    """Floats as a float array; a column holding text stays object, values as written."""
    if all(v is None or isinstance(v, float) for v in column):
        return np.array([np.nan if v is None else v for v in column], dtype=float)
    return pd.Series(column, dtype=object)


def _line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def byte_offset(text: str, position: int) -> int:
    """The UTF-8 byte offset of a character position (what a hex viewer or ``dd`` shows)."""
    return len(text[:position].encode("utf-8", errors="replace"))


def json_error_place(text: str, exc: json.JSONDecodeError) -> str:
    """Where a JSON error is, for messages: ``byte 1234 (line 56, column 7)``."""
    return f"byte {byte_offset(text, exc.pos)} (line {exc.lineno}, column {exc.colno})"


def read_text_file(path: Path) -> str:
    """A whole file as text; bytes that are not UTF-8 (a cut multi-byte character) replaced."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise LogReadError(f"cannot read: {exc.strerror or exc}", path) from exc
    return data.decode("utf-8", errors="replace")


def trl_run(
    source: Source,
    options: ReadOptions,
    store: ColumnStore,
    dropped: int,
    issues: list[ReadIssue],
    metadata: dict[str, Any],
    *,
    location_label: str,
    aliases: Mapping[str, str] = TRL_ALIASES,
    text_values: bool = False,
) -> RawRun:
    """The raw run of a TRL-family log (trainer state, console, notebook table).

    Parameters
    ----------
    source : Source
        The log read (its first path names the run's source).
    options : ReadOptions
        The user's ``run_id`` and ``reward`` (tried before TRL's default reward metrics).
    store : ColumnStore
        The records kept.
    dropped : int
        Records the reader itself dropped (``records_read`` is kept + dropped).
    issues : list of ReadIssue
        The reader's issues.
    metadata : dict
        What the log states about the run.
    location_label : str
        What a record's location is called (``"line"``, ``"log_history entry"``...).
    aliases : mapping, optional
        Metric names -> canonical names (default: ``TRL_ALIASES``; copied).
    text_values : bool, optional
        Whether the log writes numbers as text (not reported as a repair).

    Returns
    -------
    RawRun
    """
    return RawRun(
        run_id=options.run_id or source.run_id,
        source=str(source.paths[0]),
        format=source.format,
        records=store.frame(),
        records_read=len(store) + dropped,
        issues=issues,
        metadata=metadata,
        reward_candidates=((options.reward,) if options.reward else ()) + TRL_REWARD_CANDIDATES,
        aliases=dict(aliases),
        location_label=location_label,
        text_values=text_values,
    )


# --------------------------------------------------------------------------------------------
# the trainer's start banner (console and notebooks)
# --------------------------------------------------------------------------------------------

_BANNER_START = re.compile(r"\*{5} Running training|Unsloth - 2x faster free finetuning")
_OTHER_BANNER = re.compile(r"\*{5} Running (?:Evaluation|Prediction)")
_BANNER_FIELDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("num_examples", re.compile(r"Num examples = ([\d,]+)")),
    ("num_epochs", re.compile(r"Num Epochs = ([\d,.]+)")),
    ("steps_per_epoch", re.compile(r"Num update steps per epoch = ([\d,]+)")),
    ("total_steps", re.compile(r"(?:Total steps|Total optimization steps) = ([\d,]+)")),
    ("samples_per_step", re.compile(r"Total (?:train )?batch size(?: \([^)]*\))? = ([\d,]+)")),
    (
        "per_device_batch_size",
        re.compile(r"(?:Instantaneous batch size per device|Batch size per device) = ([\d,]+)"),
    ),
    ("gradient_accumulation_steps", re.compile(r"Gradient [Aa]ccumulation steps = ([\d,]+)")),
    ("num_gpus", re.compile(r"Num GPUs(?: used)? = ([\d,]+)")),
    (
        "trainable_parameters",
        re.compile(r"(?:Number of trainable parameters|Trainable parameters) = ([\d,]+)"),
    ),
    ("total_parameters", re.compile(r"Trainable parameters = [\d,]+(?:/| of )([\d,]+)")),
)


@dataclass
class BannerParser:
    """Reads the trainer's start banner, line by line, into metadata.

    transformers logs ``***** Running training *****`` then ``Num examples = 7,473``,
    ``Num Epochs = 1``, ``Total train batch size (w. parallel, distributed & accumulation) =
    8``, ``Total optimization steps = 250``...; Unsloth prints its own block (``Num examples =
    7,473 | Num Epochs = 1 | Total steps = 250``, ``Total batch size (6 x 1 x 1) = 6``,
    ``Trainable parameters = 83,886,080/4,712,566,784 (1.78% trained)``). A new banner (a second
    training run) replaces the fields of the previous one.

    Attributes
    ----------
    fields : dict
        Metadata name -> number: ``num_examples``, ``num_epochs``, ``steps_per_epoch``,
        ``total_steps``, ``samples_per_step`` (the total batch per optimizer step: completions, for
        GRPO), and the extras
        ``per_device_batch_size``, ``gradient_accumulation_steps``, ``num_gpus``,
        ``trainable_parameters``, ``total_parameters``.
    lines : list of int
        Where the fields were found (line numbers given to ``feed``).
    """

    fields: dict[str, float] = field(default_factory=dict)
    lines: list[int] = field(default_factory=list)
    active: bool = True

    def feed(self, line: str, number: int = 0) -> None:
        """Read one line of output."""
        if "= " not in line and "*****" not in line and "Unsloth" not in line:
            return
        if _BANNER_START.search(line):
            self.fields = {}
            self.lines = []
            self.active = True
        elif _OTHER_BANNER.search(line):
            self.active = False  # an evaluation's "Num examples" is not the training set's
        if not self.active:
            return
        found = False
        for name, pattern in _BANNER_FIELDS:
            match = pattern.search(line)
            if match:
                text = match.group(1).replace(",", "")
                try:
                    self.fields[name] = float(text)
                except ValueError:
                    continue
                found = True
        if found:
            self.lines.append(number)

    def feed_text(self, text: str, first_line: int = 1) -> None:
        """Read a block of output (several lines)."""
        for offset, line in enumerate(text.splitlines()):
            self.feed(line, first_line + offset)


# --------------------------------------------------------------------------------------------
# trainer_state.json
# --------------------------------------------------------------------------------------------


@dataclass
class _Salvage:
    """What could be read from a trainer_state.json that is not valid JSON."""

    top: dict[str, Any]
    entries: list[Any]
    bad_entries: list[tuple[int, int]]  # (entry number, char position)
    cut_entry: tuple[int, int] | None  # (entry number, char position) of a partial last entry
    history_closed: bool


def json_is_cut(text: str, exc: json.JSONDecodeError) -> bool:
    """Whether a JSON error comes from the text ending early rather than from damage inside it.

    The indented JSON of trainer states and notebooks puts a cut's error on the last line (or
    reports a string left open); damage inside the file shows on an earlier line.
    """
    if not text.lstrip().startswith("{"):
        return False
    return exc.msg.startswith("Unterminated string") or "\n" not in text[exc.pos :].rstrip()


def _top_level_values(text: str, start: int, end: int) -> dict[str, Any]:
    """Top-level ``"key": value`` lines (two-space indent, as ``indent=2`` writes them)."""
    values: dict[str, Any] = {}
    for match in _TOP_LEVEL_LINE.finditer(text, start, end):
        try:
            values[match.group(1)] = json.loads(match.group(2))
        except (json.JSONDecodeError, RecursionError):
            continue
    return values


def _salvage_state(text: str) -> _Salvage | None:
    """Read the complete ``log_history`` entries of a damaged or cut trainer_state.json."""
    match = _HISTORY_KEY.search(text)
    if match is None:
        return None
    top = _top_level_values(text, 0, match.start())
    decoder = json.JSONDecoder()
    entries: list[Any] = []
    bad: list[tuple[int, int]] = []
    cut: tuple[int, int] | None = None
    closed = False
    position = match.end()
    length = len(text)
    while True:
        while position < length and text[position] in " \t\r\n,":
            position += 1
        if position >= length:
            break
        if text[position] == "]":
            closed = True
            position += 1
            break
        number = len(entries) + len(bad) + 1
        try:
            entry, position = decoder.raw_decode(text, position)
        except (json.JSONDecodeError, RecursionError):
            following = _NEXT_ENTRY.search(text, position + 1)
            if following is not None:
                bad.append((number, position))
                position = following.start() + 1
                continue
            closing = _HISTORY_END.search(text, position + 1)
            if closing is None:
                cut = (number, position)
                break
            bad.append((number, position))
            position = closing.start() + 1
            continue
        entries.append(entry)
    if closed:
        top.update(_top_level_values(text, position, length))
    return _Salvage(top, entries, bad, cut, closed)


def _load_state(path: Path, strict: bool) -> tuple[dict[str, Any], list[Any], list[ReadIssue], int]:
    """Parse trainer_state.json; salvage complete entries of a cut file.

    Returns the top-level values (without ``log_history``), the entries, the reader's issues,
    and the number of entries dropped by the reader.
    """
    text = read_text_file(path)
    if not text.strip():
        raise EmptyLogError(
            "empty trainer_state.json (the trainer may be writing it right now; read again in a moment)", path
        )
    try:
        state = json.loads(text)
    except RecursionError as exc:
        raise LogReadError("JSON nested too deeply to be a trainer state", path) from exc
    except json.JSONDecodeError as exc:
        cut = json_is_cut(text, exc)
        salvage = _salvage_state(text)
        where = json_error_place(text, exc)
        if salvage is None:
            if cut:
                raise TruncatedLogError(
                    f"the file ends at {where} before its log_history: cut while the trainer was "
                    "writing it? Read again after the next save",
                    path,
                    where,
                ) from exc
            raise LogReadError(
                f"not valid JSON ({exc.msg}) at {where} and no log_history found", path, where
            ) from exc
        return _salvaged(path, text, exc, cut, salvage, strict)
    if not isinstance(state, dict):
        raise LogReadError(
            f"not a trainer state: the JSON is a {type(state).__name__}, not an object with a "
            "log_history list",
            path,
        )
    if "log_history" not in state:
        raise LogReadError(
            f"not a trainer state: no 'log_history' key (top-level keys: {sorted(state)[:12]})", path
        )
    history = state.pop("log_history")
    if not isinstance(history, list):
        raise LogReadError(
            f"not a trainer state: log_history is a {type(history).__name__}, not a list", path
        )
    return state, history, [], 0


def _salvaged(
    path: Path, text: str, exc: json.JSONDecodeError, cut: bool, salvage: _Salvage, strict: bool
) -> tuple[dict[str, Any], list[Any], list[ReadIssue], int]:
    source = str(path)
    issues: list[ReadIssue] = []
    dropped = 0
    if salvage.bad_entries:
        number, position = salvage.bad_entries[0]
        where = f"{_STATE_LABEL} {number}"
        if strict:
            raise MalformedRecordError(
                f"log_history entry {number} (line {_line_of(text, position)}) is not valid JSON", path, where
            )
        dropped += len(salvage.bad_entries)
        issues.append(
            ReadIssue(
                source,
                "bad_entry",
                "dropped",
                len(salvage.bad_entries),
                tuple(
                    f"{_STATE_LABEL} {n} (line {_line_of(text, p)})"
                    for n, p in salvage.bad_entries[:MAX_LOCATIONS]
                ),
                "log_history entries that are not valid JSON (the file was edited or damaged); dropped",
            )
        )
    if salvage.cut_entry is not None:
        number, position = salvage.cut_entry
        where = f"byte {byte_offset(text, position)} (line {_line_of(text, position)})"
        detail = (
            f"the file ends inside log_history entry {number}, which starts at {where}: it was cut "
            "while the trainer was rewriting it; the partial entry was dropped and the "
            f"{len(salvage.entries)} complete entries before it kept (top-level keys after "
            "log_history, such as max_steps and logging_steps, are lost). Read again after the next save"
        )
        if strict:
            raise TruncatedLogError(detail, path, where)
        dropped += 1
        issues.append(
            ReadIssue(source, "truncated", "dropped", 1, (f"{_STATE_LABEL} {number}", where), detail)
        )
    elif not salvage.history_closed:
        where = f"byte {byte_offset(text, len(text))} (line {_line_of(text, len(text))})"
        detail = (
            f"the file ends at {where} after {len(salvage.entries)} complete log_history entries "
            "(cut while being rewritten); all of them kept, top-level keys after log_history lost"
        )
        if strict:
            raise TruncatedLogError(detail, path, where)
        issues.append(ReadIssue(source, "truncated", "info", 0, (where,), detail))
    else:
        where = json_error_place(text, exc)
        reason = "the file ends early" if cut else f"{exc.msg}"
        detail = (
            f"JSON damaged after log_history ({reason} at {where}); every log_history entry read, "
            "some top-level keys may be missing"
        )
        if strict:
            error = TruncatedLogError if cut else MalformedRecordError
            raise error(detail, path, where)
        issues.append(ReadIssue(source, "truncated" if cut else "damaged_json", "info", 0, (where,), detail))
    return salvage.top, salvage.entries, issues, dropped


def _state_metadata(top: Mapping[str, Any], source: str) -> tuple[dict[str, Any], list[ReadIssue]]:
    metadata: dict[str, Any] = {}
    odd: list[str] = []
    for key, name in STATE_METADATA.items():
        if key in top and top[key] is not None:
            number = _finite_number(top[key])
            if number is None:
                odd.append(f"{key}={top[key]!r}")
            else:
                metadata[name] = number
    for key in STATE_EXTRA:
        value = top.get(key)
        if value is None:
            continue
        if key == "best_model_checkpoint":
            metadata[key] = str(value)
        elif _finite_number(value) is not None:
            metadata[key] = _finite_number(value)
        else:
            odd.append(f"{key}={value!r}")
    issues = []
    if odd:
        issues.append(
            ReadIssue(
                source,
                "odd_state_value",
                "info",
                len(odd),
                (),
                f"top-level values that are not numbers, not used as metadata: {odd[:5]}",
            )
        )
    return metadata, issues


def is_summary(record: Mapping[str, Any]) -> bool:
    """Whether a log record is the end-of-training summary (``train_runtime``...)."""
    return any(key in record for key in SUMMARY_MARKERS)


def is_eval(record: Mapping[str, Any]) -> bool:
    """Whether a log record comes from an evaluation: every metric key starts with ``eval_``."""
    keys = [k for k in record if k not in ("epoch", "step")]
    return bool(keys) and all(str(k).startswith("eval_") for k in keys)


def summary_metadata(record: Mapping[str, Any]) -> dict[str, Any]:
    """The summary row's values (train_runtime, train_loss...) as extra metadata."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        if key in ("epoch", "step"):
            continue
        number = _finite_number(value)
        if number is None and isinstance(value, str):
            try:
                number = _finite_number(float(value))
            except ValueError:
                number = None
        if number is not None:
            out[str(key)] = number
    return out


@dataclass
class FiledHistory:
    """``log_history`` entries filed as the trainer-state reader files them.

    Attributes
    ----------
    store : ColumnStore
        Training and evaluation records at their ``step`` (location: the entry's 1-based number).
    summary : dict
        Values of the end-of-training summary row (``train_runtime``, ``train_loss``...).
    summary_entries : list of int
        Numbers of the summary entries.
    not_objects : list of int
        Numbers of the entries that are not objects (dropped).
    """

    store: ColumnStore
    summary: dict[str, Any]
    summary_entries: list[int]
    not_objects: list[int]


def history_store(
    log_history: Sequence[Any],
    keep: Collection[str] | None = None,
    *,
    exclude_prefix: str | None = None,
    strict: bool = False,
    path: str | Path | None = None,
) -> FiledHistory:
    """File ``log_history`` entries: step records, the summary row, entries that are not objects.

    Training and evaluation rows become records at their ``step`` with their metrics under their
    own names; an evaluation row's ``epoch`` that repeats the training row it follows is kept
    once. The end-of-training summary row (``train_runtime``...) goes to ``summary``. Used by
    ``read_trainer_state`` on a file and by the TRL callback on a trainer's in-memory history.

    Parameters
    ----------
    log_history : sequence
        ``TrainerState.log_history``: dicts, as written.
    keep : collection of str, optional
        Metrics to read (default all).
    exclude_prefix : str, optional
        Leave out metrics whose name starts with it (the callback's own ``bayesgrpo/`` output).
    strict : bool
        Raise at an entry that is not an object instead of noting it.
    path : str or Path, optional
        The file, for the error's message.

    Returns
    -------
    FiledHistory
        With ``keep`` or ``exclude_prefix``, an entry left with no metric is skipped (a live
        update wants what it reads only); without them every non-summary entry is a record, as
        in the file (one with no metric is then reported by ``tidy_run``).

    Raises
    ------
    MalformedRecordError
        With ``strict``, at the first entry that is not an object.
    """
    store = ColumnStore()
    summary: dict[str, Any] = {}
    summary_entries: list[int] = []
    not_objects: list[int] = []
    filtered = keep is not None or exclude_prefix is not None

    def excluded(key: Any) -> bool:
        return exclude_prefix is not None and str(key).startswith(exclude_prefix)

    last_train: tuple[Any, Any] = (None, None)  # (step, epoch) of the latest training row
    for number, entry in enumerate(log_history, start=1):
        if not isinstance(entry, Mapping):
            if strict:
                raise MalformedRecordError(
                    f"log_history entry is a {type(entry).__name__}, not an object",
                    path,
                    f"{_STATE_LABEL} {number}",
                )
            not_objects.append(number)
            continue
        if is_summary(entry):
            summary_entries.append(number)
            summary.update(summary_metadata({k: v for k, v in entry.items() if not excluded(k)}))
            continue
        step = entry.get("step")
        if keep is None:
            record = {k: v for k, v in entry.items() if k != "step" and not excluded(k)}
        else:
            record = {k: v for k, v in entry.items() if k in keep and k != "step" and not excluded(k)}
        if is_eval(entry):
            # the eval row repeats the epoch of the training row it follows; keep one copy
            if "epoch" in record and last_train[0] == step and record["epoch"] == last_train[1]:
                del record["epoch"]
        else:
            last_train = (step, entry.get("epoch"))
        if record or not filtered:
            store.add(number, step, record)
    return FiledHistory(store, summary, summary_entries, not_objects)


def read_trainer_state(source: Source, options: ReadOptions) -> list[RawRun]:
    """Read a transformers/TRL ``trainer_state.json`` into one raw run.

    Training and evaluation rows of ``log_history`` become records at their ``step`` (their
    metrics under their own names: ``eval_reward`` stays ``eval_reward``; ``tidy_run`` merges
    the rows of one step). The final summary row goes to the metadata (``train_runtime``,
    ``train_loss``...), as do ``max_steps`` (``total_steps``), ``num_train_epochs``
    (``num_epochs``), ``logging_steps`` and ``train_batch_size`` (``per_device_batch_size``: the batch per
    device, as the trainer records it).

    Parameters
    ----------
    source : Source
    options : ReadOptions

    Returns
    -------
    list of RawRun
        One run.

    Raises
    ------
    EmptyLogError
        Empty file, or a log_history with no entry.
    TruncatedLogError
        The file is cut mid-way and ``options.strict`` (otherwise complete entries are kept and
        the cut reported), or cut before its log_history.
    LogReadError
        Not JSON, or JSON that is not a trainer state.
    """
    path = source.paths[0]
    label = str(path)
    top, history, issues, dropped = _load_state(path, options.strict)
    if not history and not dropped:
        step = top.get("global_step")
        raise EmptyLogError(
            f"log_history is empty (global_step={step!r}): the trainer has not logged yet; "
            "logging happens every logging_steps steps",
            path,
        )
    metadata, meta_issues = _state_metadata(top, label)
    issues.extend(meta_issues)

    filed = history_store(history, strict=options.strict, path=path)
    store, not_dicts, summaries = filed.store, filed.not_objects, filed.summary_entries
    metadata.update(filed.summary)

    if not_dicts:
        dropped += len(not_dicts)
        issues.append(
            ReadIssue(
                label,
                "bad_entry",
                "dropped",
                len(not_dicts),
                locations(_STATE_LABEL, not_dicts),
                "log_history entries that are not JSON objects; dropped",
            )
        )
    if summaries:
        issues.append(
            ReadIssue(
                label,
                "summary_row",
                "info",
                len(summaries),
                locations(_STATE_LABEL, summaries),
                "end-of-training summary row (train_runtime, train_loss...) read into the run's "
                "metadata, not as a step's values",
            )
        )
    nan_issue = store.nan_issue(label, _STATE_LABEL)
    if nan_issue is not None:
        issues.append(nan_issue)
    if len(store) == 0:
        cut = next((i for i in issues if i.kind == "truncated" and i.action == "dropped"), None)
        if cut is not None:
            raise TruncatedLogError(f"no complete log_history entry: {cut.detail}", path, cut.locations[-1])
        raise EmptyLogError(
            f"log_history holds no step record ({len(history)} entries: {len(summaries)} summary, "
            f"{len(not_dicts)} not objects; {dropped} dropped)",
            path,
        )
    return [trl_run(source, options, store, dropped, issues, metadata, location_label=_STATE_LABEL)]


# --------------------------------------------------------------------------------------------
# console dict lines
# --------------------------------------------------------------------------------------------

_NAN_NAMES = {"nan": math.nan, "inf": math.inf, "infinity": math.inf}
_NUMERIC_CALLS = {"float64", "float32", "float16", "bfloat16", "int64", "int32", "tensor", "float"}


class _NotLiteral(ValueError):
    pass


def _node_value(node: ast.AST) -> Any:
    """The value of a literal node, with what ``str(dict)`` prints for odd floats.

    Accepts what ``ast.literal_eval`` accepts for a flat dict's values plus ``nan``/``inf``
    (``str(float('nan'))``), and numeric wrappers such as ``np.float64(0.41)`` or
    ``tensor(0.5, device='cuda:0')`` (numpy/torch scalars left in the logs). Evaluates nothing.
    """
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (int, float, str, bool)) or node.value is None:
            return node.value
        raise _NotLiteral("unsupported constant")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _node_value(node.operand)
        if not is_number(value):
            raise _NotLiteral("sign of a non-number")
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Name) and node.id.lower() in _NAN_NAMES:
        return _NAN_NAMES[node.id.lower()]
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in _NUMERIC_CALLS:
            value = _node_value(node.args[0])
            if is_number(value) or isinstance(value, str):
                return value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_node_value(item) for item in node.elts]
    raise _NotLiteral(f"unsupported expression {type(node).__name__}")


_FLAT_VALUE = (
    r"""'[^'\\\n]*'|[-+]?(?:\d++(?:\.\d*+)?+|\.\d++)(?:[eE][-+]?\d++)?+|[-+]?(?:nan|inf)|None|True|False"""
)
_FLAT_PAIR = rf"'([^'\\\n]*+)':\s*+({_FLAT_VALUE})"
# atomic groups and possessive quantifiers: no backtracking, linear time on any line
_FLAT_DICT = re.compile(rf"\{{\s*+(?:(?>{_FLAT_PAIR})(?>,\s*+{_FLAT_PAIR})*+)?+\s*+\}}")
_FLAT_PAIRS = re.compile(_FLAT_PAIR)
_FLAT_CONSTANTS: dict[str, Any] = {"None": None, "True": True, "False": False}


def _flat_value(text: str) -> Any:
    if text.startswith("'"):
        return text[1:-1]
    if text in _FLAT_CONSTANTS:
        return _FLAT_CONSTANTS[text]
    if text.lstrip("+-").isdigit():
        return int(text)
    return float(text)


def _parse_flat_dict(text: str) -> dict[str, Any] | None:
    """The common case of a printed log dict, read with a regular expression (fast path).

    Only a flat dict of plain strings (no quote or backslash inside), numbers, ``nan``/``inf``,
    ``None``, ``True``/``False`` matches; anything else goes to the literal parser.
    """
    if _FLAT_DICT.fullmatch(text) is None:
        return None
    return {key: _flat_value(value) for key, value in _FLAT_PAIRS.findall(text)}


def parse_dict_line(text: str) -> dict[str, Any] | None:
    """Parse one printed dict (``str(logs)``) without evaluating anything.

    Plain dicts are read by a regular expression; others by ``ast.literal_eval``, then by a
    walk of the parsed syntax tree that also accepts ``nan``/``inf`` and numeric wrappers
    (``np.float64(0.4)``). Returns ``None`` when the text is not a complete dict literal with
    string keys.
    """
    flat = _parse_flat_dict(text)
    if flat is not None:
        return flat
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = None
        try:
            tree = ast.parse(text, mode="eval")
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return None
        if not isinstance(tree.body, ast.Dict):
            return None
        try:
            value = {
                _node_value(k) if k is not None else None: _node_value(v)
                for k, v in zip(tree.body.keys, tree.body.values, strict=True)
            }
        except (_NotLiteral, RecursionError):
            return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return None
    return value


def find_dict(segment: str) -> str | None:
    """The printed dict in one output segment (text between ``\\r``/``\\n``), if any.

    The dict may follow other text on the segment (a timestamp, a progress bar that was not
    cleared); it runs to the last ``}``, or to the end of the segment if it was cut.
    """
    match = _DICT_START.search(segment)
    if match is None:
        return None
    candidate = segment[match.start() :].rstrip()
    end = candidate.rfind("}")
    if end >= 0 and not candidate.endswith("}"):
        candidate = candidate[: end + 1]
    return candidate


def _is_trainer_dict(record: Mapping[str, Any]) -> bool:
    return any(
        key in _TRAINER_KEYS or key.startswith("eval_") or key.startswith("rewards/") for key in record
    )


def _iter_lines(path: Path) -> Iterable[tuple[int, str, bool]]:
    """(line number, text, ends with newline) of a file, read as bytes and split on ``\\n`` only."""
    try:
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                ended = raw.endswith(b"\n")
                yield number, raw.decode("utf-8", errors="replace").rstrip("\n"), ended
    except OSError as exc:
        raise LogReadError(f"cannot read: {exc.strerror or exc}", path) from exc


@dataclass
class _ConsoleState:
    """What the console reader has gathered so far."""

    store: ColumnStore = field(default_factory=ColumnStore)
    train_lines: int = 0
    last_step: Any = None
    last_epoch: Any = None
    bad: list[int] = field(default_factory=list)
    truncated: list[int] = field(default_factory=list)
    other_dicts: list[int] = field(default_factory=list)
    summaries: list[int] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    quoted_numbers: int = 0
    plain_floats: int = 0
    explicit_steps: int = 0
    eval_lines: int = 0
    banner: BannerParser = field(default_factory=BannerParser)


def _count_styles(state: _ConsoleState, record: Mapping[str, Any]) -> None:
    for value in record.values():
        if isinstance(value, float):
            state.plain_floats += 1
        elif isinstance(value, str):
            try:
                float(value)
            except ValueError:
                continue
            state.quoted_numbers += 1


def _take_dict(state: _ConsoleState, record: dict[str, Any], number: int, logging_steps: int) -> None:
    """File one parsed dict as a training, evaluation or summary record."""
    if is_summary(record):
        state.summaries.append(number)
        state.summary.update(summary_metadata(record))
        return
    _count_styles(state, record)
    explicit = record.pop("step", None)
    if is_eval(record):
        if explicit is not None:
            step = explicit
        else:
            step = state.last_step if state.last_step is not None else 0
        if "epoch" in record and record["epoch"] == state.last_epoch and step == state.last_step:
            del record["epoch"]
        state.eval_lines += 1
        state.store.add(number, step, record)
        return
    state.train_lines += 1
    if explicit is not None:
        state.explicit_steps += 1
        step = explicit
    else:
        step = state.train_lines * logging_steps
    state.last_step = step
    state.last_epoch = record.get("epoch")
    state.store.add(number, step, record)


def read_trl_console(source: Source, options: ReadOptions) -> list[RawRun]:
    """Read TRL/transformers console output (one printed dict per log call) into one raw run.

    The k-th training dict is step ``k * logging_steps`` (``options.logging_steps``, default 1;
    the report says which value was used), unless the dict has a ``step`` key. Evaluation
    dicts (every key ``eval_*``) join the step of the training dict before them (step 0 before
    any); the summary dict (``train_runtime``...) and the trainer's start banner go to the
    metadata. Progress bars and other output are skipped; dict-looking lines that do not parse
    (cut, or garbled) are reported and dropped.

    Parameters
    ----------
    source : Source
    options : ReadOptions

    Returns
    -------
    list of RawRun
        One run.

    Raises
    ------
    EmptyLogError
        No trainer dict line in the file.
    TruncatedLogError
        With ``options.strict``, when the last line is a dict cut mid-way.
    MalformedRecordError
        With ``options.strict``, at the first dict-looking line that does not parse.
    """
    path = source.paths[0]
    label = str(path)
    logging_steps = options.logging_steps if options.logging_steps is not None else 1
    if isinstance(logging_steps, bool) or not isinstance(logging_steps, int) or logging_steps < 1:
        raise LogReadError(f"logging_steps must be a whole number >= 1, got {logging_steps!r}", path)
    state = _ConsoleState()
    lines_seen = 0
    for number, line, ended in _iter_lines(path):
        lines_seen += 1
        for segment in line.split("\r"):
            state.banner.feed(segment, number)
            candidate = find_dict(segment)
            if candidate is None:
                continue
            record = parse_dict_line(candidate)
            if record is None:
                if not _TRAINER_KEY_TEXT.search(candidate):
                    state.other_dicts.append(number)
                    continue
                if options.strict:
                    error = MalformedRecordError if ended else TruncatedLogError
                    raise error(
                        f"dict line does not parse as a Python literal: {candidate[:80]!r}"
                        + ("" if ended else " (the file ends mid-line)"),
                        path,
                        f"line {number}",
                    )
                (state.bad if ended else state.truncated).append(number)
                continue
            if not _is_trainer_dict(record):
                state.other_dicts.append(number)
                continue
            _take_dict(state, record, number, logging_steps)
    if lines_seen == 0:
        raise EmptyLogError("empty file", path)
    if len(state.store) == 0 and not state.bad and not state.truncated:
        raise EmptyLogError(
            f"no trainer log dict ({{'loss': ..., 'epoch': ...}}) in {lines_seen} line(s)"
            + (f"; {len(state.summaries)} summary dict(s) only" if state.summaries else ""),
            path,
        )
    issues = _console_issues(state, label, logging_steps, options.logging_steps is None)
    metadata = _banner_metadata(state.banner)
    metadata.update(state.summary)
    if options.logging_steps is not None:
        metadata["logging_steps"] = float(logging_steps)
    issues.extend(_steps_consistency(state, metadata, label, logging_steps))
    dropped = len(state.bad) + len(state.truncated)
    if len(state.store) == 0:
        raise EmptyLogError(
            f"no trainer log dict could be parsed ({dropped} dict line(s) garbled or cut, first at line "
            f"{(state.bad + state.truncated)[0]})",
            path,
        )
    text_values = state.quoted_numbers > 0 and state.quoted_numbers >= state.plain_floats
    return [
        trl_run(
            source,
            options,
            state.store,
            dropped,
            issues,
            metadata,
            location_label="line",
            text_values=text_values,
        )
    ]


def _console_issues(state: _ConsoleState, label: str, logging_steps: int, assumed: bool) -> list[ReadIssue]:
    issues: list[ReadIssue] = []
    if state.bad:
        issues.append(
            ReadIssue(
                label,
                "bad_line",
                "dropped",
                len(state.bad),
                locations("line", state.bad),
                "trainer dict line(s) that do not parse as a Python literal (garbled or cut); dropped",
            )
        )
    if state.truncated:
        issues.append(
            ReadIssue(
                label,
                "truncated",
                "dropped",
                len(state.truncated),
                locations("line", state.truncated),
                "the file ends in the middle of a dict line (still being written?); the partial "
                "line was dropped",
            )
        )
    computed = state.train_lines - state.explicit_steps
    if computed:
        how = "assumed (the default)" if assumed else "as given"
        issues.append(
            ReadIssue(
                label,
                "logging_steps",
                "info",
                computed,
                (),
                f"console dicts carry no step: step = k x logging_steps for the k-th training dict, "
                f"with logging_steps={logging_steps} {how}; pass logging_steps=<the trainer's value> "
                "if it differs",
            )
        )
    if state.eval_lines:
        issues.append(
            ReadIssue(
                label,
                "eval_lines",
                "info",
                state.eval_lines,
                (),
                "evaluation dict(s) (eval_* keys) placed at the step of the training dict before them",
            )
        )
    if state.summaries:
        issues.append(
            ReadIssue(
                label,
                "summary_row",
                "info",
                len(state.summaries),
                locations("line", state.summaries),
                "end-of-training summary dict (train_runtime, train_loss...) read into the run's metadata",
            )
        )
    if state.other_dicts:
        issues.append(
            ReadIssue(
                label,
                "other_dict",
                "info",
                len(state.other_dicts),
                locations("line", state.other_dicts),
                "printed dicts that are not trainer logs (no loss/epoch/eval_ keys); not read",
            )
        )
    if state.quoted_numbers and state.plain_floats and state.quoted_numbers >= state.plain_floats:
        issues.append(
            ReadIssue(
                label,
                "mixed_styles",
                "info",
                state.plain_floats,
                (),
                "some values printed as numbers, most as text: logs of two transformers versions "
                "in one file?",
            )
        )
    if state.quoted_numbers and state.quoted_numbers >= state.plain_floats:
        issues.append(
            ReadIssue(
                label,
                "rounded_values",
                "info",
                state.quoted_numbers,
                (),
                "values printed as text with 4 significant digits (transformers' newer console "
                "format); trainer_state.json has them in full",
            )
        )
    nan_issue = state.store.nan_issue(label, "line")
    if nan_issue is not None:
        issues.append(nan_issue)
    return issues


def _banner_metadata(banner: BannerParser) -> dict[str, Any]:
    return dict(banner.fields)


def _steps_consistency(
    state: _ConsoleState, metadata: Mapping[str, Any], label: str, logging_steps: int
) -> list[ReadIssue]:
    """A hint when a finished run's line count disagrees with its stated total steps."""
    total = metadata.get("total_steps")
    computed = state.train_lines - state.explicit_steps
    if not state.summaries or total is None or computed == 0 or state.explicit_steps:
        return []
    if computed * logging_steps <= total < (computed + 1) * logging_steps:
        return []
    detail = (
        f"the banner states {int(total)} total steps but the finished run has {computed} training "
        f"dict(s) with logging_steps={logging_steps} (last step {computed * logging_steps}); "
        f"logging_steps={max(1, round(total / computed))} would fit"
    )
    return [ReadIssue(label, "logging_steps_mismatch", "info", 1, (), detail)]


__all__ = [
    "BannerParser",
    "ColumnStore",
    "FiledHistory",
    "TRL_ALIASES",
    "TRL_REWARD_CANDIDATES",
    "find_dict",
    "history_store",
    "parse_dict_line",
    "read_trainer_state",
    "read_trl_console",
]
