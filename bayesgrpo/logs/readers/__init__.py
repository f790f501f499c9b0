"""Readers: logs of real training runs in, one ``RunsTable`` out.

``load_runs`` finds files (folders are read recursively), detects each file's format, reads it
with the matching reader, cleans every run the same way (``_records.tidy_run``), merges the
metadata the user gives with what the logs state, and returns a ``RunsTable`` whose report
accounts for every record read.

Formats
-------
============== =================================================================
``tensorboard``  ``events.out.tfevents.*`` files; one folder = one run
``verl-console`` verl's console output (``step:12 - critic/score/mean:0.41 - ...``)
``verl-jsonl``   verl's file logger (``{"step": 12, "data": {"critic/score/mean": 0.41}}``)
``trl-state``    TRL/transformers ``trainer_state.json`` (``log_history``)
``trl-console``  TRL console output: one Python dict per logging step
``notebook``     ``.ipynb`` holding a transformers progress table
``wandb-csv``    Weights & Biases panel export (``<run> - <metric>`` columns)
``csv``, ``jsonl``, ``parquet``  plain tables, with a column mapping if needed
============== =================================================================
"""

from __future__ import annotations

from bayesgrpo.logs.readers.base import ReadOptions, Source
from bayesgrpo.logs.readers.load import (
    EVERY_RUN,
    READERS,
    default_run_id,
    detect_format,
    discover,
    load_runs,
    merge_metadata,
    metadata_for_every_run,
    read_source,
)

__all__ = [
    "EVERY_RUN",
    "READERS",
    "ReadOptions",
    "Source",
    "default_run_id",
    "detect_format",
    "discover",
    "load_runs",
    "merge_metadata",
    "metadata_for_every_run",
    "read_source",
]
