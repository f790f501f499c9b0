"""verl logs: the console (``step:12 - critic/score/mean:0.41 - ...``) and the file logger's JSONL.

What verl prints
----------------
verl's console logger (``verl/utils/logger/aggregate_logger.py``: ``LocalLogger.log`` ->
``concat_dict_to_str``, used by ``verl/utils/tracking.py`` when ``trainer.logger`` includes
``'console'``) prints, for each ``Tracking.log(data=metrics, step=global_steps)`` call, the
numbers of the dict joined by ``" - "``::

    step:<step> - <name>:<value> - <name>:<value> - ...

``<value>`` is ``f"{v:.3f}"`` in verl up to mid 2025 and ``pprint.pformat(v)`` after: the full
repr, which for numpy >= 2 scalars reads ``np.float64(0.41)`` or ``np.int64(3)``, and for a
``bool`` ``True``. The trainer runs in a Ray actor, so each line starts with Ray's prefix, often
coloured: ``\\x1b[36m(TaskRunner pid=678203)\\x1b[0m `` (``main_task`` in late-2024 verl; ``\\x1b[2m``
dims some). Validation is logged at step 0 on its own line before training (``val_before_train``)
and merged into the line of every ``test_freq``-th step. Metric names seen in verl's source and
the bundled logs: ``critic/score/mean`` (the train reward), ``critic/rewards/mean`` (reward after
a KL penalty), ``actor/entropy`` (older: ``actor/entropy_loss``, which is the mean entropy too),
``actor/kl_loss`` / ``actor/reward_kl_penalty`` / ``critic/kl``, ``response_length/mean``,
``actor/lr`` (older ``actor/lr(1e-4)``, in units of 1e-4, kept under its own name),
``training/epoch``, and validation: ``test_score/<dataset>`` (late-2024 step 0),
``val/test_score/<dataset>`` (late 2024 - early 2025), ``val-core/<dataset>/<var>/mean@<n>`` and
``val-aux/...`` (2025, ``<var>`` is ``acc`` if the reward function returns one, else ``reward``).

How lines are read
------------------
* A *step line* is a line that, once ANSI codes and an optional Ray prefix ``(... pid=N ...)``
  are set aside (and anything before a carriage return, as a progress bar leaves), starts with
  ``step:``. Every step line is a record (``records_read``); every other line is not (config
  dumps, warnings, model outputs, tracebacks, binary noise: the file is decoded as UTF-8 with
  undecodable bytes replaced). Line numbers count ``\\n`` only, as editors do.
* Fields are split at ``" - "``; each is ``<name>:<value>`` split at its *last* colon (verl's
  values never hold a colon or ``" - "``). A chunk with no colon is the start of a name that
  itself contains ``" - "`` and is joined to the next chunk (reported as ``info``); a trailing
  chunk with no colon, or an empty name or value, is a malformed field: ignored and reported.
* Values: plain numbers (``nan``, ``inf`` included), ``np.float64(x)``-style wrappers and
  ``True``/``False`` become floats; anything else is passed on as the text written, for
  ``tidy_run`` to report. Steps are passed on as written when they are not whole numbers.
* A file that does not end with a newline was cut while being written (``print`` always ends
  the line): if its last line is a step line, its last field may be cut mid-value, so it is
  dropped and reported; a cut line with no complete field is dropped as a record.
* The same step on several lines (validation-only step 0 and train step 0 in late-2024 logs, or a
  resumed run printing steps again) is left to ``tidy_run``: merged, the latest value winning.

Run metadata (only what the log states)
---------------------------------------
From the resolved config verl pretty-prints before training (reassembled from its prefixed
lines and read with ``ast.literal_eval``; the latest dump wins): ``group_size`` =
``actor_rollout_ref.rollout.n``, ``batch_size`` = ``data.train_batch_size``, ``num_epochs`` =
``trainer.total_epochs``, ``learning_rate`` = ``actor_rollout_ref.actor.optim.lr``, ``model`` =
``actor_rollout_ref.model.path`` (a Hugging Face cache path ``models--Org--Name/snapshots/...`` is
written ``Org/Name``), ``algorithm`` = ``algorithm.adv_estimator`` as written (``gae`` for PPO,
``grpo``, ``gpg``...). Where no config dump parses, the same keys are read from a Hydra command
line (a line with at least two ``a.b=c`` overrides; the last value wins). ``total_steps`` from
verl's ``Total training steps: N``, else ``trainer.total_training_steps`` when positive, else the
LR scheduler's ``Total steps: N, num_warmup_steps`` (late-2024 workers); ``steps_per_epoch`` from
``Size of train dataloader: N``.

verl's file logger (``verl-jsonl``)
-----------------------------------
With ``trainer.logger`` including ``'file'``, verl's ``Tracking`` (``verl/utils/tracking.py``,
``FileLogger``) writes one line per ``log(data=metrics, step=global_steps)`` call to
``$VERL_FILE_LOGGER_PATH``, by default ``$VERL_FILE_LOGGER_ROOT/<project>/<experiment>.jsonl``
(root ``.``)::

    {"step": 12, "data": {"critic/score/mean": 0.41, "actor/entropy": 0.35, ...}}

``json.dumps`` in earlier versions (NaN written ``NaN``, buffered writes: a line can be cut
anywhere while the run goes on), ``orjson`` with numpy support in later ones (compact, NaN and
infinities written ``null``, unbuffered). The file is opened with ``"w"``: a run resumed with
the same path starts the file again. The metric names are the console's, so the default reward
and the canonical names are the console's too. Each line is a record: a line that is not a JSON
object is dropped and reported (the last one, without line end, as ``truncated``), as is a
record without a ``data`` object; ``data`` is flattened (``flatten_metrics``); ``null`` values
are missing values (noted); the step, strings and repeated steps go through ``tidy_run`` as for
every format. A ``.jsonl`` file whose first line starts ``{"step": <N>, "data": {`` is detected
as ``verl-jsonl``, and the plain ``jsonl`` reader reads such records the same way (a file that
was empty when its format was detected).

Canonical names
---------------
``entropy``, ``kl``, ``completion_length``, ``loss`` (``actor/pg_loss``), ``learning_rate``
(``actor/lr``) and ``epoch`` alias the first of their verl names present. ``val_reward`` aliases
the main validation score when the log validates on exactly one dataset: the best of
``val-core/<ds>/acc/mean@<n>``, ``val-core/<ds>/reward/mean@<n>`` (largest ``n``), then
``val/test_score/<ds>`` and ``test_score/<ds>`` (one metric under two names in late-2024 logs:
step 0 and later steps), in that order of preference. With several datasets no ``val_reward``
is made: pass the metric's own name as ``reward=``. Every metric stays available under its own
name unless aliased.
"""

from __future__ import annotations

import ast
import logging
import math
import re
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from bayesgrpo.errors import EmptyLogError, LogReadError, MalformedRecordError, TruncatedLogError
from bayesgrpo.readers._records import LOC, STEP, RawRun
from bayesgrpo.report import MAX_LOCATIONS, ReadIssue

if TYPE_CHECKING:
    from bayesgrpo.readers import ReadOptions, Source
    from bayesgrpo.readers.tabular import JsonLines

logger = logging.getLogger(__name__)

FORMAT = "verl-console"
JSONL_FORMAT = "verl-jsonl"
STEP_MARK = "step:"
SEPARATOR = " - "

#: Default reward metrics, in order of preference.
REWARD_CANDIDATES: tuple[str, ...] = ("critic/score/mean", "critic/rewards/mean")

#: Canonical name -> verl's names for it, in order of preference (the first present is aliased).
ALIAS_CANDIDATES: dict[str, tuple[str, ...]] = {
    "entropy": ("actor/entropy", "actor/entropy_loss"),
    "kl": ("actor/kl_loss", "actor/reward_kl_penalty", "critic/kl"),
    "completion_length": ("response_length/mean",),
    "loss": ("actor/pg_loss",),
    "learning_rate": ("actor/lr",),
    "epoch": ("training/epoch",),
}

VALIDATION_ALIAS = "val_reward"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_STEP_HEAD = re.compile(r"\s*(?:\([^()]*\bpid=\d+[^()]*\)\s*)?")
_LINE_PREFIX = re.compile(r"\s*(\([^()]*\bpid=\d+[^()]*\))\s?")
_NP_SCALAR = re.compile(r"np\.(?:float|int|uint)\d*\((.*)\)")
_NP_SCALAR_ARROW = r"^np\.(?:float|int|uint)\d*\((.*)\)$"
_VAL_CORE = re.compile(r"val-core/(?P<ds>.+)/(?P<var>[^/]+)/mean@(?P<n>\d+)")
_VAL_TEST_SCORE = re.compile(r"val/test_score/(?P<ds>.+)")
_TEST_SCORE = re.compile(r"test_score/(?P<ds>.+)")
_TOTAL_TRAINING_STEPS = re.compile(r"Total training steps:\s*(\d+)")
_TRAIN_DATALOADER = re.compile(r"Size of train dataloader:\s*(\d+)")
_SCHEDULER_STEPS = re.compile(r"Total steps:\s*(\d+),\s*num_warmup_steps")
_SUMMARY = re.compile(r"""\(?["']?(Initial|Final) validation metrics""")
_OVERRIDE = re.compile(
    r"(?<![\w.])\+{0,2}((?:[A-Za-z_][\w-]*\.)+[A-Za-z_][\w-]*)"  # a.b.c (Hydra's + / ++ allowed)
    r"=(\"[^\"]*\"|'[^']*'|[^\s'\"]*)"  # =value, quoted or not
)
_MIDLINE_PREFIX = re.compile(r"\([^()]*\bpid=\d+[^()]*\).*$")
_HF_CACHE = re.compile(r"models--(.+?)--([^/]+)/snapshots/")
_BARE_NONFINITE = re.compile(r"(?<=[\s:\[,(])-?(?:inf|nan)(?=\s*[,\]})])")

#: config path -> metadata field
CONFIG_FIELDS: dict[tuple[str, ...], str] = {
    ("actor_rollout_ref", "rollout", "n"): "group_size",
    ("data", "train_batch_size"): "batch_size",
    ("trainer", "total_epochs"): "num_epochs",
    ("trainer", "total_training_steps"): "total_steps",
    ("actor_rollout_ref", "actor", "optim", "lr"): "learning_rate",
    ("actor_rollout_ref", "model", "path"): "model",
    ("algorithm", "adv_estimator"): "algorithm",
}
_CONFIG_KEYS = frozenset(("actor_rollout_ref", "algorithm", "data", "trainer", "critic"))
_MAX_CONFIG_LINES = 20_000
_INTEGER_FIELDS = frozenset(("group_size", "batch_size", "total_steps"))
_NUMBER_FIELDS = frozenset(("group_size", "batch_size", "total_steps", "num_epochs", "learning_rate"))


# --------------------------------------------------------------------------------------------
# pure helpers


def parse_value(text: str) -> float | str:
    """A value as verl wrote it -> float, or the text itself when it is not a number.

    >>> parse_value("0.410"), parse_value("np.float64(0.41)"), parse_value("np.int64(3)")
    (0.41, 0.41, 3.0)
    >>> parse_value("True"), parse_value("abc")
    (1.0, 'abc')
    """
    text = text.strip()
    if "_" not in text:  # Python's float() reads "1_0"; verl never writes it
        try:
            return float(text)
        except ValueError:
            pass
    wrapped = _NP_SCALAR.fullmatch(text)
    if wrapped is not None and "_" not in wrapped.group(1):
        try:
            return float(wrapped.group(1))
        except ValueError:
            return text
    if text == "True":
        return 1.0
    if text == "False":
        return 0.0
    return text


def split_fields(rest: str) -> tuple[list[str], list[str], list[str]]:
    """Split the part of a step line after ``step:<N> - `` into names and value texts.

    Fields are separated by ``" - "`` and split at their last colon. A chunk with no colon is
    the start of a name containing ``" - "`` and is joined to the next chunk.

    Returns
    -------
    names : list of str
    texts : list of str
        The values as written.
    malformed : list of str
        Chunks that are not ``<name>:<value>`` (no colon at the end of the line, empty name or
        value); they are left out of ``names`` and ``texts``.
    """
    names: list[str] = []
    texts: list[str] = []
    malformed: list[str] = []
    pending: str | None = None
    for chunk in rest.split(SEPARATOR):
        if pending is not None:
            chunk = pending + SEPARATOR + chunk
            pending = None
        name, colon, value = chunk.rpartition(":")
        if not colon:
            pending = chunk
            continue
        if not name or not value.strip():
            malformed.append(chunk)
            continue
        names.append(name)
        texts.append(value)
    if pending is not None and pending.strip():
        malformed.append(pending)
    return names, texts, malformed


def parse_fields(rest: str) -> tuple[list[str], list[float | str], list[str]]:
    """Like ``split_fields``, with each value parsed by ``parse_value`` (float, or the text)."""
    names, texts, malformed = split_fields(rest)
    return names, [parse_value(text) for text in texts], malformed


def parse_values(texts: list[str]) -> np.ndarray | None:
    """Many value texts as float64 at once (Arrow's parser), or ``None`` if any is not a number.

    Plain numbers (``nan``, ``inf`` included) and ``np.float64(x)``-style wrappers are read;
    anything else makes the whole batch fall back to ``parse_value`` one by one.
    """
    if not texts:
        return np.zeros(0)
    try:
        array_ = pa.array(texts, type=pa.string())
        # later verl wraps most values: unwrap first rather than fail a whole cast
        unwrapped = texts[0].startswith("np.")
        if unwrapped:
            array_ = pc.replace_substring_regex(array_, pattern=_NP_SCALAR_ARROW, replacement=r"\1")
        while True:
            try:
                return pc.cast(array_, pa.float64()).to_numpy(zero_copy_only=False)
            except pa.ArrowException:
                if unwrapped:
                    return None
                array_ = pc.replace_substring_regex(array_, pattern=_NP_SCALAR_ARROW, replacement=r"\1")
                unwrapped = True
    except pa.ArrowException:
        return None


def is_step_line(text: str) -> bool:
    """Whether a line (ANSI codes and a Ray prefix allowed) is a verl step line."""
    return _step_body(text) is not None


def _step_body(text: str) -> str | None:
    """The text after ``step:`` of a step line, ANSI codes removed; ``None`` for other lines."""
    text = text.rstrip()
    if "\r" in text:
        text = text[text.rfind("\r") + 1 :]
    at = text.find(STEP_MARK)
    if at < 0:
        return None
    head = text[:at]
    if "\x1b" in head:
        head = _ANSI.sub("", head)
    if _STEP_HEAD.fullmatch(head) is None:
        return None
    body = text[at + len(STEP_MARK) :]
    return _ANSI.sub("", body) if "\x1b" in body else body


def looks_like_verl_console(path: str | Path, max_bytes: int = 16 * 2**20) -> bool:
    """Whether a file holds a verl step line within its first ``max_bytes`` (read line by line).

    verl prints model loading, NCCL and vLLM output before its first step line, often more
    than 64 KiB of it (the bundled GPG logs: 95 and 122 KiB), so a fixed-size head is not
    enough to recognise a verl log.

    Raises
    ------
    LogReadError
        When the file cannot be opened.
    """
    seen = 0
    try:
        with open(path, "rb") as handle:
            for raw in handle:
                if is_step_line(raw.decode("utf-8", "replace")):
                    return True
                seen += len(raw)
                if seen >= max_bytes:
                    return False
    except OSError as exc:
        raise LogReadError(f"cannot open: {exc.strerror or exc}", path) from exc
    return False


def validation_aliases(names: list[str]) -> tuple[str, ...]:
    """The metrics to alias ``val_reward``: the main validation score, if on exactly one dataset.

    The best ``val-core/<ds>/<var>/mean@<n>`` (``acc`` before ``reward`` before other variables,
    as verl picks its core variable; the largest ``n``), then ``val/test_score/<ds>``, then
    ``test_score/<ds>``, those present. The last two are one metric: late-2024 verl logged its
    initial validation as ``test_score/<ds>`` at step 0 and added ``val/`` when it merged later
    validations into step lines. Empty when no candidate is logged or several datasets are.
    """
    core: list[tuple[tuple[int, int], str]] = []
    older: list[tuple[int, str]] = []
    datasets: set[str] = set()
    variable_rank = {"acc": 0, "reward": 1}
    for name in names:
        match = _VAL_CORE.fullmatch(name)
        if match is not None:
            datasets.add(match["ds"])
            core.append(((variable_rank.get(match["var"], 2), -int(match["n"])), name))
            continue
        for rank, pattern in ((1, _VAL_TEST_SCORE), (2, _TEST_SCORE)):
            match = pattern.fullmatch(name)
            if match is not None:
                datasets.add(match["ds"])
                older.append((rank, name))
                break
    if len(datasets) != 1:
        return ()
    best_core = [min(core)[1]] if core else []
    return tuple(best_core + [name for _, name in sorted(older)])


def metric_aliases(names: list[str]) -> dict[str, str]:
    """verl name -> canonical name, for the names present, preferred name first.

    One verl name per canonical name, except ``val_reward``: several names of the one main
    validation score (``validation_aliases``) may alias it.
    """
    present = set(names)
    aliases: dict[str, str] = {}
    for canonical, candidates in ALIAS_CANDIDATES.items():
        for candidate in candidates:
            if candidate in present:
                aliases[candidate] = canonical
                break
    for name in validation_aliases(names):
        aliases[name] = VALIDATION_ALIAS
    return aliases


def model_name(path: str) -> str:
    """The model as the config states it; a Hugging Face cache path becomes ``Org/Name``."""
    cached = _HF_CACHE.search(path)
    if cached is not None:
        return f"{cached.group(1)}/{cached.group(2)}"
    return path


def _bracket_depth(text: str) -> int:
    """Net change of bracket depth over one line of a Python literal, strings skipped."""
    depth = 0
    quote = ""
    escaped = False
    for char in text:
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char == "'" or char == '"':
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
    return depth


def parse_config_dump(text: str) -> dict[str, Any] | None:
    """A pretty-printed config dict, or ``None`` if it is not a readable dict literal."""
    for candidate in (text, _BARE_NONFINITE.sub("None", text)):
        try:
            value = ast.literal_eval(candidate)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        return value if isinstance(value, dict) else None
    return None


def _line_keys(line: str) -> list[tuple[int, int, str, str]]:
    """The ``'key': value`` pairs of one line of a pretty-printed dict.

    Returns ``(column, bracket depth within the line, key, value text)`` for each key, the value
    text running to the next key or the end of the line, without trailing commas and brackets.
    """
    found: list[list[Any]] = []
    depth = 0
    i = 0
    n = len(line)
    while i < n:
        char = line[i]
        if char == "'" or char == '"':
            j = i + 1
            while j < n and line[j] != char:
                j += 2 if line[j] == "\\" else 1
            if j + 1 < n and line[j + 1] == ":":
                found.append([i, depth, line[i + 1 : j], j + 2])
            i = j + 1
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        i += 1
    out = []
    for index, (column, key_depth, key, start) in enumerate(found):
        stop = found[index + 1][0] if index + 1 < len(found) else n
        out.append((column, key_depth, key, line[start:stop].strip().rstrip(",}]) ").strip()))
    return out


def config_by_indentation(lines: list[str]) -> dict[str, Any]:
    """The scalar fields of a damaged pretty-printed dict (lines missing or interleaved).

    ``pprint`` aligns the keys of one dict on one column, so the key path of every scalar can be
    followed line by line from the columns and the brackets opened within each line; a missing
    line only loses its own keys. Values that are not Python literals on one line are skipped.
    """
    stack: list[tuple[int, int, str]] = []  # (column, level, key)
    flat: dict[tuple[str, ...], Any] = {}
    for line in lines:
        keys = _line_keys(line)
        if not keys:
            continue
        first_column, first_depth = keys[0][0], keys[0][1]
        while stack and stack[-1][0] >= first_column:
            stack.pop()
        base = stack[-1][1] + 1 if stack else 0
        for column, depth, key, value_text in keys:
            level = base + depth - first_depth
            while stack and stack[-1][1] >= level:
                stack.pop()
            stack.append((column, level, key))
            if not value_text or value_text[0] in "{[(":
                continue
            try:
                value = ast.literal_eval(value_text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            flat[tuple(k for _, _, k in stack)] = value
    nested: dict[str, Any] = {}
    for path, value in flat.items():
        node: Any = nested
        for key in path[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                break
            node = child
        else:
            node[path[-1]] = value
    return nested


def _dig(config: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = config
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _field_value(name: str, value: Any) -> Any:
    """A metadata value in the schema's type, or ``None`` when it states nothing usable."""
    if value is None or isinstance(value, bool):
        return None
    if name in _NUMBER_FIELDS:
        if isinstance(value, str):
            text = value.strip().strip("'\"")
            try:
                value = int(text) if name in _INTEGER_FIELDS else float(text)
            except ValueError:
                return None
        if not isinstance(value, (int, float)):
            return None
        try:
            if not math.isfinite(value):
                return None
        except OverflowError:  # an int too large for a float
            return None
        if name in _INTEGER_FIELDS:
            if value != int(value) or value <= 0:
                return None  # verl writes -1 / None for "not set"
            return int(value)
        if name == "num_epochs" and value <= 0:
            return None
        return float(value)
    text = str(value).strip().strip("'\"")
    if not text or "${" in text:
        return None
    return model_name(text) if name == "model" else text


def metadata_from_config(config: dict[str, Any]) -> dict[str, Any]:
    """The schema's metadata fields a resolved verl config states."""
    out: dict[str, Any] = {}
    for path, name in CONFIG_FIELDS.items():
        value = _field_value(name, _dig(config, path))
        if value is not None:
            out[name] = value
    return out


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


class _Tally:
    """Count and first locations of one kind of reader-level problem."""

    def __init__(self) -> None:
        self.count = 0
        self.lines: list[int] = []
        self.examples: list[str] = []

    def add(self, line: int, count: int = 1, example: str | None = None) -> None:
        self.count += count
        if len(self.lines) < MAX_LOCATIONS:
            self.lines.append(line)
        if example is not None and len(self.examples) < 3:
            self.examples.append(example[:80])

    def locations(self) -> tuple[str, ...]:
        return tuple(f"line {n}" for n in self.lines)


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
        self.malformed = _Tally()
        self.duplicated = _Tally()
        self.joined = _Tally()
        self.cut_value = _Tally()
        self.cut_record = _Tally()

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
# metadata


class _MetadataScanner:
    """Reads run metadata from the lines that are not step lines."""

    def __init__(self) -> None:
        self.config: dict[str, Any] | None = None
        self.command: dict[str, Any] = {}
        self.printed: dict[str, int] = {}
        self.summaries = _Tally()
        self.damaged = _Tally()
        self._lines: list[str] | None = None
        self._prefix = ""
        self._depth = 0
        self._start = 0

    def feed(self, line_no: int, text: str) -> None:
        """Look at one non-step line."""
        if "\r" in text:
            text = text[text.rfind("\r") + 1 :]
        if "\x1b" in text:
            text = _ANSI.sub("", text)
        prefix_match = _LINE_PREFIX.match(text)
        prefix = prefix_match.group(1) if prefix_match else ""
        content = text[prefix_match.end() :] if prefix_match else text
        if self._lines is not None and prefix == self._prefix:
            if content[:1].isspace():
                self._continue_config(line_no, content)
                return
            self._close_config()  # pprint indents every continuation line: the dump ended early
        stripped = content.strip()
        if not stripped:
            return
        if stripped.startswith("{'") and self._lines is None:
            self._lines = []
            self._prefix = prefix
            self._depth = 0
            self._start = line_no
            self._continue_config(line_no, content)
            return
        for name, pattern in (
            ("total_training_steps", _TOTAL_TRAINING_STEPS),
            ("steps_per_epoch", _TRAIN_DATALOADER),
            ("scheduler_steps", _SCHEDULER_STEPS),
        ):
            match = pattern.match(stripped)
            if match is not None:
                self.printed[name] = int(match.group(1))
                return
        if _SUMMARY.match(stripped):
            self.summaries.add(line_no)
            return
        if "=" in stripped and "." in stripped:
            self._command_line(stripped)

    def _continue_config(self, line_no: int, content: str) -> None:
        assert self._lines is not None
        if "pid=" in content:
            content = _MIDLINE_PREFIX.sub("", content)  # another process's output glued to the line
        self._lines.append(content)
        self._depth += _bracket_depth(content)
        if self._depth <= 0 or len(self._lines) > _MAX_CONFIG_LINES:
            self._close_config()

    def _close_config(self) -> None:
        """Parse the dump collected so far: as a literal, else line by line."""
        if self._lines is None:
            return
        lines, self._lines = self._lines, None
        config = parse_config_dump("\n".join(lines))
        if config is None:
            config = config_by_indentation(lines)
            if not _CONFIG_KEYS & set(config):
                return
            self.damaged.add(self._start)
        if _CONFIG_KEYS & set(config):
            self.config = config

    def _command_line(self, text: str) -> None:
        overrides = _OVERRIDE.findall(text)
        if len(overrides) < 2:
            return
        wanted = {".".join(path): name for path, name in CONFIG_FIELDS.items()}
        for key, value in overrides:
            name = wanted.get(key)
            if name is None:
                continue
            converted = _field_value(name, value)
            if converted is not None:
                self.command[name] = converted

    def finish(self) -> None:
        """End of file: parse a config dump still open."""
        self._close_config()

    def metadata(self) -> dict[str, Any]:
        """What the log states, in the schema's names."""
        stated = metadata_from_config(self.config) if self.config is not None else {}
        out = dict(self.command)
        out.update(stated)
        total = (
            self.printed.get("total_training_steps")
            or out.get("total_steps")
            or self.printed.get("scheduler_steps")
        )
        if total:
            out["total_steps"] = int(total)
        if self.printed.get("steps_per_epoch"):
            out["steps_per_epoch"] = self.printed["steps_per_epoch"]
        return out

    def issues(self, source: str) -> list[ReadIssue]:
        out: list[ReadIssue] = []
        if self.summaries.count:
            out.append(
                ReadIssue(
                    source,
                    "validation_summary",
                    "info",
                    self.summaries.count,
                    self.summaries.locations(),
                    "verl printed validation results outside step lines ('Initial/Final validation metrics: "
                    "{...}'); they carry no step and were not read (only step lines are)",
                )
            )
        if self.damaged.count:
            out.append(
                ReadIssue(
                    source,
                    "config_damaged",
                    "info",
                    self.damaged.count,
                    self.damaged.locations(),
                    "the printed config is not a complete Python dict (lines missing, or other output "
                    "interleaved); its fields were read line by line from pprint's indentation",
                )
            )
        return out


# --------------------------------------------------------------------------------------------
# the reader


def _scan(handle: BinaryIO, path: Path, strict: bool) -> tuple[_Columns, _MetadataScanner, int]:
    columns = _Columns(path, strict)
    scanner = _MetadataScanner()
    line_no = 0
    last_head = None
    last_head_ok = False
    for raw in handle:
        line_no += 1
        complete = raw.endswith(b"\n")
        text = raw.decode("utf-8", "replace").rstrip()
        if "\r" in text:
            text = text[text.rfind("\r") + 1 :]
        at = text.find(STEP_MARK)
        if at < 0:
            scanner.feed(line_no, text)
            continue
        head = text[:at]
        if head != last_head:
            clean = _ANSI.sub("", head) if "\x1b" in head else head
            last_head, last_head_ok = head, _STEP_HEAD.fullmatch(clean) is not None
        if not last_head_ok:
            scanner.feed(line_no, text)
            continue
        body = text[at + len(STEP_MARK) :]
        if "\x1b" in body:
            body = _ANSI.sub("", body)
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
            "optionally after ANSI colour codes and a Ray prefix such as '(TaskRunner pid=123)'. Is this the "
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


# --------------------------------------------------------------------------------------------
# verl's file logger (trainer.logger=['file']): one JSON object per step


def is_verl_jsonl(records: Sequence[Any]) -> bool:
    """Whether JSON Lines records are verl file-logger records: the first has a ``step`` and a
    ``data`` object (``{"step": 12, "data": {"critic/score/mean": 0.41, ...}}``)."""
    if not records:
        return False
    first = records[0]
    return isinstance(first, Mapping) and STEP in first and isinstance(first.get("data"), Mapping)


def flatten_metrics(data: Mapping[str, Any]) -> dict[str, Any]:
    """A logged ``data`` object as metric -> value, ready for ``tidy_run``.

    Nested objects are flattened with ``/`` (``{"a": {"b": 1}}`` -> ``a/b``); ``true``/``false``
    become 1.0/0.0 as verl's console prints them; ``null`` (how orjson writes NaN) becomes NaN; a
    metric named ``step`` is kept as ``step_logged``. Other values are passed on as written,
    for ``tidy_run`` to convert or report.
    """
    out: dict[str, Any] = {}
    stack: list[tuple[str, Mapping[str, Any]]] = [("", data)]
    while stack:
        prefix, node = stack.pop()
        for key, value in node.items():
            name = f"{prefix}{key}"
            if isinstance(value, Mapping):
                stack.append((name + "/", value))
                continue
            if name in (STEP, LOC):
                name = f"{name}_logged"
            if value is None:
                value = math.nan
            elif isinstance(value, bool):
                value = float(value)
            out[name] = value
    return out


def verl_jsonl_run(lines: JsonLines, source: Source, options: ReadOptions) -> RawRun:
    """The raw run of a verl file-logger JSONL file already split into lines.

    Parameters
    ----------
    lines : JsonLines
        What ``readers.tabular.read_json_lines`` read.
    source : Source
    options : ReadOptions
        ``strict`` raises at a record with no ``data`` object; ``run_id`` names the run.

    Returns
    -------
    RawRun
        One record per line, ``step`` as written, the ``data`` metrics flattened.

    Raises
    ------
    MalformedRecordError
        With ``strict=True``, at a record whose ``data`` is missing or not an object.
    """
    from bayesgrpo.readers.trl import ColumnStore

    path = Path(source.paths[0])
    label = str(path)
    store = ColumnStore()
    no_data: list[int] = []
    extra: dict[str, list[int]] = {}
    for loc, record in zip(lines.locs, lines.records):
        data = record.get("data")
        if not isinstance(data, Mapping):
            if options.strict:
                found = "missing" if "data" not in record else f"a {type(data).__name__}"
                raise MalformedRecordError(
                    f"the record's 'data' is {found}, not an object of metrics; pass strict=False to drop "
                    "and report such records",
                    path,
                    f"line {loc}",
                )
            no_data.append(loc)
            continue
        for key in record:
            if key not in (STEP, "data"):
                extra.setdefault(str(key), []).append(loc)
        store.add(loc, record.get(STEP), flatten_metrics(data))
    issues: list[ReadIssue] = []
    broken = [n for n in lines.bad if n != lines.cut_line]
    if broken:
        issues.append(
            ReadIssue(
                label,
                "bad_line",
                "dropped",
                len(broken),
                tuple(f"line {n}" for n in broken[:MAX_LOCATIONS]),
                "line(s) that are not a JSON object; dropped",
            )
        )
    if lines.cut_line is not None:
        issues.append(
            ReadIssue(
                label,
                "truncated",
                "dropped",
                1,
                (f"line {lines.cut_line}",),
                "the last line is not a complete JSON object and has no line end: the file ends "
                "mid-record (cut while being written?); dropped",
            )
        )
    if no_data:
        issues.append(
            ReadIssue(
                label,
                "no_data",
                "dropped",
                len(no_data),
                tuple(f"line {n}" for n in no_data[:MAX_LOCATIONS]),
                "record(s) whose 'data' is missing or not an object of metrics; dropped",
            )
        )
    if extra:
        first = min(extra, key=lambda k: extra[k][0])
        issues.append(
            ReadIssue(
                label,
                "extra_keys",
                "info",
                sum(len(v) for v in extra.values()),
                tuple(f"line {n}" for n in extra[first][:MAX_LOCATIONS]),
                f"keys beside 'step' and 'data' ({sorted(extra)[:5]}) are not metrics; not read",
            )
        )
    nan_issue = store.nan_issue(label, "line")
    if nan_issue is not None:
        issues.append(nan_issue)
    logger.debug("read %s: %d records, %d metrics", path, len(store), len(store.values))
    return RawRun(
        run_id=options.run_id or source.run_id,
        source=label,
        format=JSONL_FORMAT,
        records=store.frame(),
        records_read=lines.n_read,
        issues=issues,
        reward_candidates=REWARD_CANDIDATES,
        aliases=metric_aliases(list(store.values)),
        location_label="line",
    )


def read_verl_jsonl(source: Source, options: ReadOptions) -> list[RawRun]:
    """Read one verl file-logger JSONL file (``trainer.logger=['file']``) into one raw run.

    Parameters
    ----------
    source : Source
        One file.
    options : ReadOptions
        ``strict`` raises at a bad line, a cut last line or a record without ``data``;
        ``run_id`` names the run.

    Returns
    -------
    list of RawRun
        One run: a record per line.

    Raises
    ------
    EmptyLogError
        An empty file.
    LogReadError
        The file cannot be opened or read.
    MalformedRecordError, TruncatedLogError
        With ``strict=True`` only.
    """
    from bayesgrpo.readers.tabular import read_json_lines

    path = Path(source.paths[0])
    try:
        lines = read_json_lines(path, options.strict)
    except (OSError, UnicodeError) as exc:
        raise LogReadError(f"cannot read: {exc}", path) from exc
    return [verl_jsonl_run(lines, source, options)]


__all__ = [
    "ALIAS_CANDIDATES",
    "CONFIG_FIELDS",
    "JSONL_FORMAT",
    "REWARD_CANDIDATES",
    "flatten_metrics",
    "is_step_line",
    "is_verl_jsonl",
    "looks_like_verl_console",
    "metadata_from_config",
    "metric_aliases",
    "model_name",
    "parse_config_dump",
    "parse_fields",
    "parse_value",
    "parse_values",
    "read_verl_console",
    "read_verl_jsonl",
    "split_fields",
    "validation_aliases",
    "verl_jsonl_run",
]
