"""Plain tables: CSV, JSON Lines and Parquet, one row per logged step.

Columns are read by name. By default ``step`` (or ``Step``, ``global_step``, ``_step``) is the
step and ``reward`` the reward; ``columns={"step": ..., "reward": ..., "run_id": ...}`` maps
other names. With a ``run_id`` column a file holds several runs.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo.errors import EmptyLogError, LogReadError, MalformedRecordError, TruncatedLogError
from bayesgrpo.readers._records import LOC, STEP, RawRun
from bayesgrpo.report import ReadIssue

if TYPE_CHECKING:
    from bayesgrpo.readers import ReadOptions, Source

STEP_NAMES = ("step", "Step", "global_step", "_step", "train/global_step", "iteration")
RUN_NAMES = ("run_id", "run", "Run", "name")

#: Metric names common in TRL/verl tables, mapped to canonical names.
TABLE_ALIASES: dict[str, str] = {
    "reward_std": "reward_std",
    "completions/mean_length": "completion_length",
    "completion_length": "completion_length",
    "response_length/mean": "completion_length",
    "actor/entropy": "entropy",
    "entropy": "entropy",
    "kl": "kl",
    "actor/kl_loss": "kl",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "Training Loss": "loss",
    "loss": "loss",
}
REWARD_CANDIDATES = ("reward", "train/reward", "critic/score/mean", "critic/rewards/mean", "rewards/mean")


def _read_csv(path: Path, strict: bool) -> tuple[pd.DataFrame, int, list[ReadIssue]]:
    """Read a CSV keeping every well-formed row; malformed lines are reported with numbers."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if not text.strip():
        raise EmptyLogError("empty file", path)
    issues: list[ReadIssue] = []
    bad_lines: list[tuple[int, list[str]]] = []
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except (StopIteration, csv.Error) as exc:
        raise EmptyLogError(f"no header line ({exc})", path) from exc
    rows: list[list[str]] = []
    locs: list[int] = []
    n_read = 0
    truncated_last = not text.endswith("\n")
    try:
        for row in reader:
            line_number = reader.line_num
            if not row or all(cell.strip() == "" for cell in row):
                continue
            n_read += 1
            if len(row) != len(header):
                bad_lines.append((line_number, row))
                continue
            rows.append(row)
            locs.append(line_number)
    except csv.Error as exc:  # an unterminated quote at the end of a cut file
        n_read += 1
        bad_lines.append((reader.line_num, [str(exc)]))
        truncated_last = True
    if bad_lines:
        last_is_cut = truncated_last and bad_lines[-1][0] >= (locs[-1] if locs else 0)
        kind = "truncated" if last_is_cut and len(bad_lines) == 1 else "bad_line"
        if strict:
            error = TruncatedLogError if kind == "truncated" else MalformedRecordError
            raise error(
                f"line has {len(bad_lines[0][1])} fields, the header {len(header)}",
                path,
                f"line {bad_lines[0][0]}",
            )
        issues.append(
            ReadIssue(
                str(path),
                kind,
                "dropped",
                len(bad_lines),
                tuple(f"line {n}" for n, _ in bad_lines[:5]),
                f"line(s) with a number of fields other than the header's {len(header)}"
                + (" (the file ends mid-line: cut while being written?)" if kind == "truncated" else "")
                + "; dropped",
            )
        )
    frame = pd.DataFrame(rows, columns=_unique(header), dtype=object)
    frame[LOC] = locs
    frame.attrs["location_label"] = "line"
    return frame, n_read, issues


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        if name in seen:
            seen[name] += 1
            out.append(f"{name}.{seen[name]}")
        else:
            seen[name] = 0
            out.append(name)
    return out


def _read_jsonl(path: Path, strict: bool) -> tuple[pd.DataFrame, int, list[ReadIssue]]:
    records: list[dict[str, Any]] = []
    locs: list[int] = []
    bad: list[int] = []
    n_read = 0
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            n_read += 1
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = None
            if not isinstance(record, dict):
                if strict:
                    raise MalformedRecordError("not a JSON object", path, f"line {number}")
                bad.append(number)
                continue
            records.append(record)
            locs.append(number)
    if n_read == 0:
        raise EmptyLogError("empty file", path)
    issues = []
    if bad:
        issues.append(
            ReadIssue(str(path), "bad_line", "dropped", len(bad), tuple(f"line {n}" for n in bad[:5]), "line(s) that are not a JSON object (cut mid-write?); dropped")
        )
    frame = pd.DataFrame.from_records(records) if records else pd.DataFrame()
    frame = frame.astype(object) if len(frame) else frame
    frame[LOC] = locs
    return frame, n_read, issues


def _read_parquet(path: Path) -> tuple[pd.DataFrame, int, list[ReadIssue]]:
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise TruncatedLogError(f"not a readable Parquet file ({type(exc).__name__}: {exc})", path) from exc
    if len(frame) == 0:
        raise EmptyLogError("Parquet file has no rows", path)
    frame = frame.reset_index(drop=True)
    frame[LOC] = np.arange(1, len(frame) + 1)
    return frame, len(frame), []


def _pick(frame: pd.DataFrame, mapped: str | None, candidates: tuple[str, ...], what: str, path: Path) -> str | None:
    if mapped is not None:
        if mapped not in frame.columns:
            from bayesgrpo.errors import UnknownMetricError

            raise UnknownMetricError(mapped, [c for c in frame.columns if c != LOC], f"{path} (columns[{what!r}])")
        return mapped
    for name in candidates:
        if name in frame.columns:
            return name
    return None


def read_table(source: Source, options: ReadOptions) -> list[RawRun]:
    """Read a CSV, JSONL or Parquet table into one raw run per run id (one if no run column)."""
    path = source.paths[0]
    try:
        if source.format == "parquet":
            frame, n_read, issues = _read_parquet(path)
            label = "row"
        elif source.format == "jsonl":
            frame, n_read, issues = _read_jsonl(path, options.strict)
            label = "line"
        else:
            frame, n_read, issues = _read_csv(path, options.strict)
            label = "line"
    except (OSError, UnicodeError) as exc:
        raise LogReadError(f"cannot read: {exc}", path) from exc
    if len(frame) == 0:
        raise EmptyLogError(f"no data row among {n_read} line(s)", path)
    columns = dict(options.columns or {})
    step_column = _pick(frame, columns.pop("step", None), STEP_NAMES, "step", path)
    if step_column is None:
        raise LogReadError(
            f"no step column (looked for {list(STEP_NAMES)}); pass columns={{'step': '<name>'}}. "
            f"Columns: {[c for c in frame.columns if c != LOC][:20]}",
            path,
        )
    run_column = _pick(frame, columns.pop("run_id", None), RUN_NAMES if "run_id" in frame.columns else (), "run_id", path)
    reward_column = columns.pop("reward", None)
    if reward_column is not None:
        _pick(frame, reward_column, (), "reward", path)
    aliases = {**TABLE_ALIASES, **{source_name: canonical for canonical, source_name in columns.items()}}
    candidates = ((reward_column,) if reward_column else ()) + REWARD_CANDIDATES
    frame = frame.rename(columns={step_column: STEP})
    groups: list[tuple[str, pd.DataFrame, str]]
    if run_column is not None:
        groups = [(str(name), part.drop(columns=[run_column]), f"{path}#{name}") for name, part in frame.groupby(run_column, sort=False)]
    else:
        groups = [(options.run_id or source.run_id, frame, str(path))]
    runs = []
    for index, (run_id, part, label_source) in enumerate(groups):
        runs.append(
            RawRun(
                run_id=run_id,
                source=label_source,
                format=source.format,
                records=part.reset_index(drop=True),
                records_read=len(part) + (sum(i.count for i in issues if i.action == "dropped") if index == 0 else 0),
                issues=[ReadIssue(label_source, i.kind, i.action, i.count, i.locations, i.detail) for i in issues] if index == 0 else [],
                reward_candidates=candidates,
                aliases=aliases,
                location_label=label,
                text_values=source.format == "csv",
            )
        )
    return runs
