"""verl's console lines: the step-line framing, the values in it and the metric names verl uses.

Pure functions of text (no file access): :func:`is_step_line`, :func:`split_fields`,
:func:`parse_value`, :func:`parse_values`, and the aliases of verl's metric names
(:func:`metric_aliases`, :func:`validation_aliases`). What verl prints is described in
:mod:`bayesgrpo.logs.readers.verl`.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bayesgrpo.errors import LogReadError
from bayesgrpo.logs.readers._prefix import is_log_prefix
from bayesgrpo.logs.report import MAX_LOCATIONS

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

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
#: What follows ``step:`` on a step line: a number, `` - `` and a metric name with its colon.
STEP_LIKE = re.compile(r"\s*-?\d+\s+-\s+[^\s:][^:]*:")
LINE_PREFIX = re.compile(r"\s*(\([^()]*\bpid=\d+[^()]*\))\s?")
#: A Ray prefix inside a line: another process's output written onto the end of a step line.
_EMBEDDED_PREFIX = re.compile(r"\((?:[^()]*\s)?pid=\d+[^()]*\)")
_NP_SCALAR = re.compile(r"np\.(?:float|int|uint)\d*\((.*)\)")
_NP_SCALAR_ARROW = r"^np\.(?:float|int|uint)\d*\((.*)\)$"
_VAL_CORE = re.compile(r"val-core/(?P<ds>.+)/(?P<var>[^/]+)/mean@(?P<n>\d+)")
_VAL_TEST_SCORE = re.compile(r"val/test_score/(?P<ds>.+)")
_TEST_SCORE = re.compile(r"test_score/(?P<ds>.+)")


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
    """Whether a line (ANSI codes and a logging prefix allowed) is a verl step line.

    The text before ``step:`` may be any logging prefix (``bayesgrpo.logs.readers._prefix``):
    a Ray prefix, a timestamp, a level, a rank tag.
    """
    return _step_body(text) is not None


def step_segment(text: str) -> str:
    """The part of a line with carriage returns that is read: the last part with a step mark.

    A terminal shows what follows a line's last carriage return. verl's step line is often
    followed on the same line, after a carriage return, by a progress bar (``step:7 - ... -
    perf/throughput:486.8`` then ``Training Progress: 4%|...| 7/200``): the step line is the
    record, the bar is not. A line with no step mark gives its last part, as a terminal shows it.
    """
    segments = text.split("\r")
    for segment in reversed(segments):
        if STEP_MARK in segment:
            return segment
    return segments[-1]


def cut_embedded_prefix(body: str) -> str:
    """A step line's body up to another process's Ray prefix written onto its end, if any.

    >>> cut_embedded_prefix("critic/score/mean:0.4 - perf/throughput:486.8(TaskRunner pid=7) ")
    'critic/score/mean:0.4 - perf/throughput:486.8'
    """
    match = _EMBEDDED_PREFIX.search(body)
    return body if match is None else body[: match.start()].rstrip()


def _step_body(text: str) -> str | None:
    """The text after ``step:`` of a step line, ANSI codes removed; ``None`` for other lines."""
    text = text.rstrip()
    if "\r" in text:
        text = step_segment(text)
    at = text.find(STEP_MARK)
    if at < 0:
        return None
    head = text[:at]
    if "\x1b" in head:
        head = ANSI_ESCAPE.sub("", head)
    if not is_log_prefix(head):
        return None
    body = text[at + len(STEP_MARK) :]
    return cut_embedded_prefix(ANSI_ESCAPE.sub("", body) if "\x1b" in body else body)


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
    """Verl name -> canonical name, for the names present, preferred name first.

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


class Tally:
    """Count and first locations of one kind of reader-level problem."""

    def __init__(self) -> None:
        self.count = 0
        self.lines: list[int] = []
        self.examples: list[str] = []

    def add(self, line: int, count: int = 1, example: str | None = None) -> None:
        """Count ``count`` problems at ``line``, keeping the first locations and examples."""
        self.count += count
        if len(self.lines) < MAX_LOCATIONS:
            self.lines.append(line)
        if example is not None and len(self.examples) < 3:
            self.examples.append(example[:80])

    def locations(self) -> tuple[str, ...]:
        """The first locations, as the read report words them."""
        return tuple(f"line {n}" for n in self.lines)
