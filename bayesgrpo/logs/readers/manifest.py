"""Folders of logs described by a manifest: a ``runs.csv`` with one row per run.

The manifest names each run's file, format and reward key, and states its metadata (model,
family, size, algorithm, task, group size) with provenance and licence. ``load_runs`` on a
folder holding such a ``runs.csv`` reads exactly the files it lists, with its reward keys, and
takes its metadata; files in the folder that it does not list are noted, not read (the bundled
notebooks, for example, are second copies of runs the manifest reads from CSV).

Required columns: ``run_id``, ``file``. Optional: ``format``, ``reward_key`` and any metadata.
Free-text manifest values are parsed without guessing: ``"5? (inferred)"`` as group size 5
with ``group_size_inferred=True``; ``"?"`` and blanks as missing; ``"bar 200/250"`` in the notes
as ``total_steps=250``; ``"lr=5e-6"`` as the learning rate.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayesgrpo.errors import MetadataError

MANIFEST_NAME = "runs.csv"
REQUIRED = ("run_id", "file")

_FORMATS = {
    "csv": "csv",
    "tensorboard": "tensorboard",
    "verl-console": "verl-console",
    "verl console": "verl-console",
    "trainer_state": "trl-state",
    "trl-state": "trl-state",
    "trl-console": "trl-console",
    "notebook": "notebook",
    "ipynb": "notebook",
    "wandb-csv": "wandb-csv",
    "jsonl": "jsonl",
    "parquet": "parquet",
}
_TASKS = {"openai/gsm8k": "gsm8k", "gsm8k": "gsm8k", "gsm8k+math": "gsm8k+math"}
_MISSING = {"", "?", "nan", "none", "unknown", "n/a"}


def is_manifest(path: Path) -> bool:
    """Whether ``path`` is a run manifest (a ``runs.csv`` with ``run_id`` and ``file`` columns)."""
    if path.name != MANIFEST_NAME or not path.is_file():
        return False
    try:
        header = path.open(encoding="utf-8", errors="replace").readline()
    except OSError:
        return False
    names = [name.strip().strip('"') for name in header.strip().split(",")]
    return all(required in names for required in REQUIRED)


def _missing(value: Any) -> bool:
    return (
        value is None
        or (isinstance(value, float) and np.isnan(value))
        or str(value).strip().lower() in _MISSING
    )


def parse_format(text: Any) -> str | None:
    """The reader format named by a manifest's free-text ``format`` cell."""
    if _missing(text):
        return None
    key = str(text).strip().lower()
    for prefix, name in _FORMATS.items():
        if key == prefix or key.startswith(prefix + " "):
            return name
    raise MetadataError(f"manifest format {text!r} is not one of {sorted(set(_FORMATS.values()))}")


def parse_count(text: Any) -> tuple[float, bool]:
    """A count written as free text: ``"6"`` -> (6, False); ``"5? (inferred)"`` -> (5, True)."""
    if _missing(text):
        return np.nan, False
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*(\?)?", str(text))
    if match is None:
        raise MetadataError(f"cannot read a number from {text!r}")
    inferred = match.group(2) is not None or "inferred" in str(text).lower()
    return float(match.group(1)), inferred


def parse_notes(text: Any) -> dict[str, float]:
    """Facts stated in a manifest's notes: learning rate and planned/completed steps of a progress bar."""
    facts: dict[str, float] = {}
    if _missing(text):
        return facts
    text = str(text)
    lr = re.search(r"\blr=([0-9.eE+-]+)", text)
    if lr:
        facts["learning_rate"] = float(lr.group(1))
    bar = re.search(r"\bbar (\d+)/(\d+)", text)
    if bar:
        facts["steps_completed"] = float(bar.group(1))
        facts["total_steps"] = float(bar.group(2))
    return facts


def read_manifest(path: Path) -> pd.DataFrame:
    """Read and normalise a manifest into metadata rows (``file`` resolved against its folder).

    Returns
    -------
    DataFrame
        One row per run: ``run_id``, ``file`` (absolute path), ``format``, ``reward_key`` and the
        schema's metadata columns (``family``, ``size_b``, ``algorithm``, ``group_size``, ``task``...)
        plus the manifest's other columns (provenance, licence) under their own names.

    Raises
    ------
    MetadataError
        When a required column is missing, a run id repeats, or a listed file does not exist.
    """
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise MetadataError(f"{path}: manifest lacks column(s) {missing}")
    if frame["run_id"].duplicated().any():
        raise MetadataError(
            f"{path}: run id(s) listed twice: "
            f"{sorted(set(frame.loc[frame['run_id'].duplicated(), 'run_id']))}"
        )
    rows = []
    for record in frame.to_dict("records"):
        file = (path.parent / record["file"]).resolve()
        if not file.exists():
            raise MetadataError(
                f"{path}: run {record['run_id']!r} lists {record['file']!r}, which does not exist"
            )
        row: dict[str, Any] = {k: (None if _missing(v) else v) for k, v in record.items()}
        row["file"] = str(file)
        row["format"] = parse_format(record.get("format"))
        if "reward_key" in record:
            row["reward_key"] = None if _missing(record["reward_key"]) else record["reward_key"]
        if "size_b" in record:
            row["size_b"] = parse_count(record["size_b"])[0]
        if "group_size" in record:
            size, inferred = parse_count(record["group_size"])
            row["group_size"] = size
            row["group_size_inferred"] = inferred
            row["group_size_as_written"] = record["group_size"] or None
        if "algo" in record and "algorithm" not in record:
            algo = row.pop("algo")
            row["algorithm"] = None if algo is None else str(algo).split()[0]
            row["algorithm_detail"] = algo
        if "task" in record and row.get("task") is not None:
            row["task_as_written"] = row["task"]
            row["task"] = _TASKS.get(str(row["task"]).strip().lower(), row["task"])
        for key in ("n_points", "first_step", "last_step"):
            if key in record and not _missing(record[key]):
                row[f"manifest_{key}"] = float(record[key])
                row.pop(key, None)
        if "license" in row:
            row["licence"] = row.pop("license")
        for outside, inside in (("path", "source_path"), ("commit", "source_commit")):
            if outside in row:
                row[inside] = row.pop(outside)
        row.update(
            {k: v for k, v in parse_notes(record.get("notes")).items() if k not in row or row[k] is None}
        )
        rows.append(row)
    return pd.DataFrame(rows)
