"""Run metadata from TRL logs: the start banner, ``trainer_state.json``'s top level, the summary row.

:class:`BannerParser` reads transformers' ``***** Running training *****`` block and Unsloth's
banner (console and notebooks); :func:`state_metadata` reads the top-level keys of a
``trainer_state.json``; :func:`summary_metadata` the end-of-training summary row.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bayesgrpo.logs.readers.trl.columns import STATE_EXTRA, STATE_METADATA, SUMMARY_MARKERS, finite_number
from bayesgrpo.logs.report import ReadIssue

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


def state_metadata(top: Mapping[str, Any], source: str) -> tuple[dict[str, Any], list[ReadIssue]]:
    """Run metadata from the top level of a ``trainer_state.json``, with the values that were odd."""
    metadata: dict[str, Any] = {}
    odd: list[str] = []
    for key, name in STATE_METADATA.items():
        if key in top and top[key] is not None:
            number = finite_number(top[key])
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
        elif finite_number(value) is not None:
            metadata[key] = finite_number(value)
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
        number = finite_number(value)
        if number is None and isinstance(value, str):
            try:
                number = finite_number(float(value))
            except ValueError:
                number = None
        if number is not None:
            out[str(key)] = number
    return out


def banner_metadata(banner: BannerParser) -> dict[str, Any]:
    """The metadata the start banner stated."""
    return dict(banner.fields)
