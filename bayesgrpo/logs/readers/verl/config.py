"""Run metadata from verl's logs: the config dump, Hydra overrides and the trainer's own lines.

:func:`parse_config_dump` and :func:`config_by_indentation` read the printed config,
:func:`metadata_from_config` maps it to run metadata (:data:`CONFIG_FIELDS`), and
:class:`MetadataScanner` collects metadata from the non-step lines of a console log as they are
read.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

from bayesgrpo.logs.readers.verl.lines import (
    ANSI_ESCAPE,
    LINE_PREFIX,
    Tally,
)
from bayesgrpo.logs.report import ReadIssue

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
# metadata


class MetadataScanner:
    """Reads run metadata from the lines that are not step lines."""

    def __init__(self) -> None:
        self.config: dict[str, Any] | None = None
        self.command: dict[str, Any] = {}
        self.printed: dict[str, int] = {}
        self.summaries = Tally()
        self.damaged = Tally()
        self._lines: list[str] | None = None
        self._prefix = ""
        self._depth = 0
        self._start = 0

    def feed(self, line_no: int, text: str) -> None:
        """Look at one non-step line."""
        if "\r" in text:
            text = text[text.rfind("\r") + 1 :]
        if "\x1b" in text:
            text = ANSI_ESCAPE.sub("", text)
        prefix_match = LINE_PREFIX.match(text)
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
        """The reader-level problems the scanner met, as report entries."""
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
