"""Weights & Biases offline runs: the ``run-<id>.wandb`` file ``WANDB_MODE=offline`` leaves behind.

On a GPU box without network, ``wandb.init(mode="offline")`` writes
``wandb/offline-run-<time>-<id>/run-<id>.wandb``: a leveldb-style log of protobuf ``Record``
messages. It is read here with the wandb package's own reader of that log
(``wandb.sdk.internal.datastore.DataStore``) and its own ``Record`` message, with no network and
no login:

- a ``history`` record (one ``wandb.log`` call) gives one record per logged value: its step (the
  record's step, W&B's ``_step``) and the key (nested keys joined with ``/``); W&B's own
  ``_step``, ``_runtime`` and ``_timestamp`` are not metrics and are left out (counted as read);
- the ``run`` record and ``config`` records give the metadata: the run's display name (the
  run's id), project, W&B run id, and the config: the model name (its family and size where the
  name says them), learning rate, group size (``num_generations``), planned steps (``max_steps``);
- a file cut while being written (the run still going, the box gone) keeps every complete
  record before the cut and reports the rest as ``truncated``, like every other reader's damage.

wandb is an optional dependency (``pip install 'bayesgrpo[wandb]'``), imported when such a file
is read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from bayesgrpo.errors import LogReadError
from bayesgrpo.logs.readers._records import RawRun
from bayesgrpo.logs.readers.base import ReadOptions, Source
from bayesgrpo.logs.readers.model_names import finite_float, tracked_metadata
from bayesgrpo.logs.readers.wandb import INTERNAL_METRICS, REWARD_CANDIDATES, WANDB_ALIASES
from bayesgrpo.logs.report import ReadIssue

#: The first bytes of a ``.wandb`` file (the datastore's header ident).
MAGIC = b":W&B"
#: Config keys that name the model, in order of preference.
MODEL_KEYS: tuple[str, ...] = ("model_name_or_path", "model_name", "model", "base_model", "_name_or_path")
#: Config keys -> metadata names of the schema.
CONFIG_METADATA: dict[str, str] = {
    "learning_rate": "learning_rate",
    "num_generations": "group_size",
    "per_device_train_batch_size": "per_device_batch_size",
    "max_steps": "total_steps",
    "num_train_epochs": "num_epochs",
    "logging_steps": "logging_steps",
}


def is_wandb_offline(path: Path) -> bool:
    """Whether ``path`` is a ``.wandb`` run file (by its name and its first bytes)."""
    if path.suffix != ".wandb":
        return False
    try:
        with open(path, "rb") as handle:
            return handle.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def _decoded(value_json: str) -> Any:
    try:
        return json.loads(value_json)
    except (json.JSONDecodeError, TypeError):
        return value_json  # kept as text: reported where a number belongs


def _item_key(item: Any) -> str:
    return "/".join(item.nested_key) if len(item.nested_key) else item.key


def read_wandb_offline(source: Source, options: ReadOptions) -> list[RawRun]:
    """One offline run file as a raw run (long records: one per logged value)."""
    try:
        from wandb.proto import wandb_internal_pb2
        from wandb.sdk.internal.datastore import DataStore
    except ImportError as exc:
        raise LogReadError(
            "reading W&B offline runs needs wandb < 0.30 (its record reader, "
            "wandb.sdk.internal.datastore): `pip install 'bayesgrpo[wandb]'`",
            source.paths[0],
        ) from exc
    path = source.paths[0]
    store = DataStore()
    try:
        store.open_for_scan(str(path))
    except Exception as exc:  # the datastore raises bare Exception ("Invalid header") and asserts
        raise LogReadError(f"not a readable W&B run file ({type(exc).__name__}: {exc})", path) from exc
    try:
        return [_scan(store, path, source, options, wandb_internal_pb2)]
    finally:
        store.close()  # the datastore opens the file for update ("r+b"): never leave it open


def _scan(store: Any, path: Path, source: Source, options: ReadOptions, protos: Any) -> RawRun:
    """The records of an opened run file, as one raw run."""
    rows: list[tuple[int, int, str, Any]] = []
    config: dict[str, Any] = {}
    run_info: dict[str, Any] = {}
    issues: list[ReadIssue] = []
    n_history = 0
    while True:
        offset = store._index  # noqa: SLF001 - the byte the next record starts at, for the report
        try:
            data = store.scan_data()
        except Exception as exc:  # bare Exception and AssertionError for a bad checksum or length
            issues.append(_truncated(path, offset, f"{type(exc).__name__}: {exc}"))
            break
        if data is None:
            if offset < path.stat().st_size and not issues:
                issues.append(_truncated(path, offset, "the file ends inside a record"))
            break
        record = protos.Record()
        try:
            record.ParseFromString(data)
        except Exception as exc:  # protobuf's DecodeError
            issues.append(_truncated(path, offset, f"a record that does not parse ({exc})"))
            break
        kind = record.WhichOneof("record_type")
        if kind == "history":
            n_history += 1
            step = record.history.step.num
            for item in record.history.item:
                key = _item_key(item)
                value = _decoded(item.value_json)
                logged_step = finite_float(value) if key == "_step" else None
                if logged_step is not None:
                    step = int(logged_step)
                if key not in INTERNAL_METRICS:
                    rows.append((n_history, step, key, value))
        elif kind == "run":
            run = record.run
            run_info = {"wandb_run_id": run.run_id, "name": run.display_name, "project": run.project}
            config.update({_item_key(i): _decoded(i.value_json) for i in run.config.update})
        elif kind == "config":
            config.update({_item_key(i): _decoded(i.value_json) for i in record.config.update})
    # a history record's steps: every value of one wandb.log call has the call's step
    records = pd.DataFrame(rows, columns=["_loc", "step", "metric", "value"])
    name = run_info.get("name") or source.run_id
    candidates = ((options.reward,) if options.reward else ()) + REWARD_CANDIDATES
    return RawRun(
        # the run's W&B name, unless a manifest or the user named the file's run otherwise
        run_id=str(name) if options.run_id in (None, path.stem) else options.run_id,
        source=str(path),
        format=source.format,
        records=records,
        records_read=len(records) + sum(i.count for i in issues),
        issues=issues,
        metadata=config_metadata(config, run_info),
        reward_candidates=candidates,
        aliases=dict(WANDB_ALIASES),
        location_label="history record",
        long=True,
    )


def _truncated(path: Path, offset: int, why: str) -> ReadIssue:
    return ReadIssue(
        str(path),
        "truncated",
        "dropped",
        1,
        (f"byte {offset}",),
        f"the run file is cut or damaged from byte {offset} ({why}): every complete record before it "
        "was kept",
    )


def config_metadata(config: dict[str, Any], run_info: dict[str, Any]) -> dict[str, Any]:
    """A run's metadata from its W&B config and run record."""
    # W&B keeps some config entries as {"value": ...}
    plain = {k: v.get("value") if isinstance(v, dict) else v for k, v in config.items()}
    metadata: dict[str, Any] = {k: v for k, v in run_info.items() if v}
    metadata.update(tracked_metadata(plain, MODEL_KEYS, CONFIG_METADATA))
    return metadata
