"""What both TRL readers share: TRL's metric names, plain values, the column store and the run it makes.

:class:`ColumnStore` files the records of a log as columns (one per metric, with the location of
each value); :func:`trl_run` turns it into a :class:`~bayesgrpo.logs.readers._records.RawRun`.
The notebook reader uses both as well.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo.errors import LogReadError
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
#: reward-model score and RLHF reward (``PPOTrainer`` of TRL >= 0.12), then the names hand-written
#: GRPO loops log their mean reward under (seen in public logs: ``reward_mean``, ``mean_reward``).
TRL_REWARD_CANDIDATES: tuple[str, ...] = (
    "reward",
    "objective/scores",
    "objective/rlhf_reward",
    "reward_mean",
    "mean_reward",
)

#: Keys only the end-of-training summary row has (``speed_metrics("train", ...)``).
SUMMARY_MARKERS: frozenset[str] = frozenset(
    {"train_runtime", "train_samples_per_second", "train_steps_per_second"}
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


def finite_number(value: Any) -> float | None:
    """``value`` as a float when it is a finite number (bools excluded), else None."""
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
