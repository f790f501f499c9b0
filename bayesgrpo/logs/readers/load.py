"""``load_runs``: find log files, detect their formats, read, tidy and merge them into one table.

``load_runs`` finds files (folders are read recursively), detects each file's format
(:func:`detect_format`), reads it with the matching reader (:data:`READERS`: each format module
is imported only when its format is read), cleans every run the same way
(``_records.tidy_run``), merges the metadata the user gives with what the logs state
(:func:`merge_metadata`), and returns a ``RunsTable`` whose report accounts for every record read.
"""

from __future__ import annotations

import importlib
import json
import re
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

import pandas as pd
import yaml

from bayesgrpo.errors import (
    BayesGRPOError,
    EmptyLogError,
    LogReadError,
    MetadataError,
    ReadWarning,
    UnknownFormatError,
)
from bayesgrpo.logs.readers._records import RawRun, TidyBatch, tidy_run
from bayesgrpo.logs.readers.base import PathLike, ReaderFunction, ReadOptions, Source
from bayesgrpo.logs.readers.manifest import MANIFEST_NAME, is_manifest, read_manifest
from bayesgrpo.logs.readers.verl.lines import looks_like_verl_console
from bayesgrpo.logs.report import ReadIssue, ReadReport, SourceAccount
from bayesgrpo.logs.table import RunsTable, coerce_metadata

# format -> (module, function). Modules are imported only when their format is read.
#: Formats read as tables (``tabular``): a table of several runs is tidied all at once (``_batch``).
TABLE_FORMATS = frozenset({"csv", "jsonl", "parquet"})
READERS: dict[str, tuple[str, str]] = {
    "tensorboard": ("bayesgrpo.logs.readers.tensorboard", "read_tensorboard"),
    "verl-console": ("bayesgrpo.logs.readers.verl", "read_verl_console"),
    "verl-jsonl": ("bayesgrpo.logs.readers.verl", "read_verl_jsonl"),
    "trl-state": ("bayesgrpo.logs.readers.trl", "read_trainer_state"),
    "trl-console": ("bayesgrpo.logs.readers.trl", "read_trl_console"),
    "notebook": ("bayesgrpo.logs.readers.notebook", "read_notebook"),
    "wandb-csv": ("bayesgrpo.logs.readers.wandb", "read_wandb_csv"),
    "csv": ("bayesgrpo.logs.readers.tabular", "read_table"),
    "jsonl": ("bayesgrpo.logs.readers.tabular", "read_table"),
    "parquet": ("bayesgrpo.logs.readers.tabular", "read_table"),
    "mlflow": ("bayesgrpo.logs.readers.mlflow", "read_mlflow"),
    "wandb-offline": ("bayesgrpo.logs.readers.wandb_offline", "read_wandb_offline"),
}

#: Sources named by URI (read by ``readers.mlflow``), not found on disk.
MLFLOW_SCHEME = "mlflow:"
_TFEVENTS = re.compile(r"(^|\.)tfevents\.")
_VERL_JSONL_HEAD = re.compile(r'\s*\{\s*"step"\s*:\s*[^,{}\[\]]*,\s*"data"\s*:\s*\{')
_VERL_LINE = re.compile(r"step:\s*\d+\s+-\s+[\w/@.()\-]+:")
_TRL_DICT_LINE = re.compile(
    r"\{\s*'(?:loss|epoch|learning_rate|grad_norm|reward|train_runtime|eval_[\w/]+)'\s*:"
)
#: A JSON list of log dicts (a log_history saved on its own): ``[{"loss": ..., ... "step": 1}``.
_BARE_HISTORY_HEAD = re.compile(r'\s*\[\s*\{[^\[\]{}]*"(?:loss|reward|reward_mean|step)"\s*:')
#: The first entry of a JSON list of records, up to its first nested value.
_JSON_LIST_HEAD = re.compile(r"\s*\[\s*\{([^\[\]{}]*)")
#: A key of transformers' / TRL's own log dicts (bare names, as ``log_history`` holds them).
_TRAINER_LOG_KEY = re.compile(
    r'"(?:loss|reward|reward_mean|mean_reward|learning_rate|grad_norm|epoch|train_runtime|'
    r'objective\\?/(?:scores|rlhf_reward)|eval_[^"]*)"\s*:'
)
#: A step key of a table (``tabular.STEP_NAMES``), ``/`` possibly written ``\/`` as pandas does.
_TABLE_STEP_KEY = re.compile(r'"(?:step|Step|global_step|_step|train\\?/global_step|iteration)"\s*:')
_CHECKPOINT_DIR = re.compile(r"^checkpoint-(\d+)$")
_HEAD_BYTES = 65536
_CONSOLE_HEAD_BYTES = 4 * 2**20
_CONSOLE_SUFFIXES = ("", ".log", ".txt", ".out", ".err", ".stdout", ".stderr")


def _reader(format_name: str) -> ReaderFunction:
    if format_name not in READERS:
        raise UnknownFormatError(f"unknown format {format_name!r}; formats are {sorted(READERS)}")
    module_name, function_name = READERS[format_name]
    module = importlib.import_module(module_name)
    return cast(ReaderFunction, getattr(module, function_name))


def detect_format(path: PathLike) -> str | None:
    """The format of a file, from its name and first bytes, or ``None`` if none fits.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    str or None
        A key of ``READERS``.
    """
    path = Path(path)
    name = path.name.lower()
    if _TFEVENTS.search(name):
        return "tensorboard"
    suffix = path.suffix.lower()
    if suffix == ".ipynb":
        return "notebook"
    if suffix == ".parquet":
        return "parquet"
    try:
        with open(path, "rb") as handle:
            head_bytes = handle.read(_HEAD_BYTES)
        if suffix == ".wandb":  # W&B's offline run file: a binary log of protobuf records
            return "wandb-offline" if head_bytes.startswith(b":W&B") else None
        head = head_bytes.decode("utf-8", errors="replace").lstrip("\ufeff")
    except OSError as exc:
        raise LogReadError(f"cannot open: {exc.strerror}", path) from exc
    if _VERL_JSONL_HEAD.match(head):  # verl's file logger writes wherever VERL_FILE_LOGGER_PATH says
        return "verl-jsonl"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".json":
        if '"log_history"' in head or name == "trainer_state.json":
            return "trl-state"
        if _is_json_lines(head):  # JSON Lines written under a .json name
            return "jsonl"
        return _json_list_format(head)
    if suffix == ".csv" or suffix == ".tsv":
        first_line = head.splitlines()[0] if head else ""
        if " - " in first_line and (
            "__MIN" in first_line
            or "__MAX" in first_line
            or first_line.startswith('"Step"')
            or first_line.startswith("Step,")
        ):
            return "wandb-csv"
        return "csv"
    if suffix not in _CONSOLE_SUFFIXES and ".log" not in name:
        return None
    clean = re.sub(r"\x1b\[[0-9;]*m", "", head)
    if _VERL_LINE.search(clean):
        return "verl-console"
    if _has_trl_dict_line(clean):
        return "trl-console"
    if len(head_bytes) >= _HEAD_BYTES:  # long start-up output before the first log line
        if looks_like_verl_console(path):
            return "verl-console"
        with open(path, "rb") as handle:
            more = re.sub(
                r"\x1b\[[0-9;]*m", "", handle.read(_CONSOLE_HEAD_BYTES).decode("utf-8", errors="replace")
            )
        if _has_trl_dict_line(more):
            return "trl-console"
    return None


def _is_json_lines(head: str) -> bool:
    """Whether a file's head is JSON Lines: a first line that is a whole JSON object, and a next
    line that opens another (a pretty-printed object's first line, ``{``, is no whole object).
    """
    lines = [line for line in head.splitlines() if line.strip()]
    if len(lines) < 2:
        return False
    try:
        first = json.loads(lines[0])
    except ValueError:
        return False
    return isinstance(first, dict) and lines[1].lstrip().startswith("{")


def _json_list_format(head: str) -> str | None:
    """A JSON list's format: a log_history saved on its own (``trl-state``) when its first entry
    holds the trainer's own keys (``loss``, ``reward``...), a table of step records (``jsonl``:
    a tracker's export such as trackio's, ``train/reward`` and ``step`` keys) when it holds a step
    but none of them; ``None`` otherwise.
    """
    if not _BARE_HISTORY_HEAD.match(head):
        return None
    first = _JSON_LIST_HEAD.match(head)
    entry = first.group(1) if first is not None else ""
    if _TRAINER_LOG_KEY.search(entry):
        return "trl-state"
    return "jsonl" if _TABLE_STEP_KEY.search(entry) else "trl-state"


def _has_trl_dict_line(text: str) -> bool:
    """Whether ``text`` holds a TRL log dict: a dict of trainer keys that is no value inside
    another dict (a pretty-printed config's ``'env': {'eval_dataset': ...}``, as a verl log prints
    before its step lines, is not one).
    """
    for match in _TRL_DICT_LINE.finditer(text):
        before = text[: match.start()].rstrip(" \t")
        if not before.endswith((":", ",", "[", "{")):
            return True
    return False


def default_run_id(path: str | Path) -> str:
    """A run's default name: its folder for event files and trainer states (the training output
    folder above a ``checkpoint-N/``), its file stem otherwise.

    The path is made absolute first, so a ``trainer_state.json`` given from inside its folder is
    named after the folder, not left blank.
    """
    path = Path(path).absolute()
    if _TFEVENTS.search(path.name.lower()) or path.name == "trainer_state.json":
        parent = path.parent
        if _CHECKPOINT_DIR.match(parent.name):
            parent = parent.parent
        return parent.name or path.stem
    return path.stem


def _manifest_sources(folder: Path, format: str | None) -> tuple[list[Source], list[ReadIssue], pd.DataFrame]:
    """Sources listed by ``folder/runs.csv``; files it does not list are noted, not read."""
    manifest = read_manifest(folder / MANIFEST_NAME)
    sources = []
    listed: set[Path] = {folder / MANIFEST_NAME}
    for row in manifest.itertuples(index=False):
        file = Path(row.file)
        detected = format or row.format or detect_format(file)
        if detected is None:
            raise UnknownFormatError("the manifest gives no format and no reader recognises the file", file)
        if detected == "tensorboard":
            files = tuple(sorted(p for p in file.parent.iterdir() if _TFEVENTS.search(p.name.lower())))
        else:
            files = (file,)
        listed.update(files)
        reward = getattr(row, "reward_key", None)
        sources.append(Source(detected, files, str(row.run_id), None if pd.isna(reward) else str(reward)))
    notes = [
        ReadIssue(
            str(p), "not_in_manifest", "info", 0, (), f"not listed in {folder / MANIFEST_NAME}; not read"
        )
        for p in sorted(folder.rglob("*"))
        if p.is_file()
        and p.resolve() not in {q.resolve() for q in listed}
        and detect_format_quietly(p) is not None
    ]
    stated = manifest.drop(columns=["file", "format", "reward_key"], errors="ignore")
    return sources, notes, stated


def detect_format_quietly(path: Path) -> str | None:
    """``detect_format`` that answers ``None`` for files it cannot open."""
    try:
        return detect_format(path)
    except LogReadError:
        return None


def discover(
    paths: PathLike | Iterable[PathLike], format: str | None = None
) -> tuple[list[Source], list[ReadIssue], pd.DataFrame]:
    """Find the sources under ``paths`` and the format of each.

    Folders are walked recursively in sorted order. TensorBoard event files of one folder form
    one run (a resumed run writes several). Of ``checkpoint-N/trainer_state.json`` files of one
    training folder only the latest is read (each holds the whole history so far); the others
    are listed as notes. Files of no known format inside folders are listed as notes; a file
    named explicitly that no reader recognises is an ``UnknownFormatError``.

    A folder holding a manifest (``runs.csv`` with ``run_id`` and ``file`` columns, see
    ``readers.manifest``) is read as the manifest says, with its metadata.

    Returns
    -------
    sources : list of Source
    notes : list of ReadIssue
    manifest_metadata : DataFrame
        Metadata stated by manifests (empty without one).
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    notes: list[ReadIssue] = []
    found: list[tuple[Path, str]] = []
    manifest_sources: list[Source] = []
    manifest_frames: list[pd.DataFrame] = []
    for given in paths:
        if isinstance(given, str) and given.startswith(MLFLOW_SCHEME):  # a tracker, not a file
            manifest_sources.append(Source("mlflow", (), "", uri=str(given)))
            continue
        given = Path(given)
        if not given.exists():
            raise LogReadError("no such file or folder", given)
        if given.is_dir() and is_manifest(given / MANIFEST_NAME):
            listed, unlisted, stated = _manifest_sources(given, format)
            manifest_sources.extend(listed)
            notes.extend(unlisted)
            manifest_frames.append(stated)
        elif given.is_dir():
            for path in sorted(p for p in given.rglob("*") if p.is_file()):
                if any(part.startswith(".") for part in path.relative_to(given).parts):
                    continue
                detected = format or detect_format(path)
                if detected is None:
                    notes.append(
                        ReadIssue(
                            str(path),
                            "unknown_format",
                            "info",
                            0,
                            (),
                            "no reader recognises this file; not read",
                        )
                    )
                    continue
                found.append((path, detected))
        else:
            detected = format or detect_format(given)
            if detected is None:
                raise UnknownFormatError(
                    f"no reader recognises this file (formats: {sorted(READERS)}); "
                    "pass format='...' to choose one",
                    given,
                )
            found.append((given, detected))

    sources: list[Source] = []
    tensorboard_dirs: dict[Path, list[Path]] = {}
    states: dict[Path, list[tuple[int, Path]]] = {}
    for path, detected in found:
        if detected == "tensorboard":
            tensorboard_dirs.setdefault(path.parent, []).append(path)
        elif detected == "trl-state" and _CHECKPOINT_DIR.match(path.parent.name):
            number = int(_CHECKPOINT_DIR.match(path.parent.name).group(1))  # type: ignore[union-attr]  # matched above
            states.setdefault(path.parent.parent, []).append((number, path))
        else:
            sources.append(Source(detected, (path,), default_run_id(path)))
    for folder, files in tensorboard_dirs.items():
        sources.append(Source("tensorboard", tuple(sorted(files)), folder.name or "tensorboard"))
    for folder, checkpoints in states.items():
        checkpoints.sort()
        latest = checkpoints[-1][1]
        for _, older in checkpoints[:-1]:
            notes.append(
                ReadIssue(
                    str(older),
                    "older_checkpoint",
                    "info",
                    0,
                    (),
                    f"older trainer state of the run; read {latest} instead (it holds the whole history)",
                )
            )
        sources.append(Source("trl-state", (latest,), folder.name))
    manifest_metadata = (
        pd.concat(manifest_frames, ignore_index=True)
        if manifest_frames
        else pd.DataFrame({"run_id": pd.Series(dtype=str)})
    )
    return manifest_sources + sources, notes, manifest_metadata


def _metadata_frame(metadata: Any) -> pd.DataFrame:
    """User metadata (dict keyed by run_id, DataFrame, CSV or YAML path) as a frame."""
    if metadata is None:
        return pd.DataFrame({"run_id": pd.Series(dtype="string")})
    if isinstance(metadata, pd.DataFrame):
        frame = metadata.copy()
        if "run_id" not in frame.columns:
            if frame.index.name == "run_id":
                frame = frame.reset_index()
            else:
                raise MetadataError("metadata table needs a 'run_id' column")
        return frame
    if isinstance(metadata, (str, Path)):
        path = Path(metadata)
        if not path.exists():
            raise MetadataError(f"metadata file {path} does not exist")
        if path.suffix.lower() in (".yaml", ".yml"):
            try:
                loaded = yaml.safe_load(path.read_text())
            except yaml.YAMLError as exc:
                raise MetadataError(f"{path}: not valid YAML: {exc}") from exc
            if not isinstance(loaded, Mapping):
                raise MetadataError(f"{path}: YAML metadata must map run_id -> fields")
            return _metadata_frame(loaded)
        try:
            return _metadata_frame(pd.read_csv(path, dtype={"run_id": "string"}))
        except (pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise MetadataError(f"{path}: not a readable CSV: {exc}") from exc
    if isinstance(metadata, Mapping):
        rows = []
        for run_id, fields in metadata.items():
            if not isinstance(fields, Mapping):
                raise MetadataError(
                    f"metadata for run {run_id!r} must be a mapping of fields, got {type(fields).__name__}"
                )
            rows.append({"run_id": str(run_id), **fields})
        return pd.DataFrame(rows)
    raise MetadataError(f"metadata must be a dict, DataFrame or CSV/YAML path, not {type(metadata).__name__}")


def _differs(old: pd.Series, new: pd.Series) -> pd.Series:
    """Whether each stated value differs from the given one: numbers by value (250 is 250.0),
    anything else by its text.
    """
    old_number = pd.to_numeric(old, errors="coerce")
    new_number = pd.to_numeric(new, errors="coerce")
    numbers = old_number.notna() & new_number.notna()
    by_text = old.astype(str) != new.astype(str)
    return by_text.where(~numbers, old_number != new_number).astype(bool)


#: The ``run_id`` of a metadata row that holds values for every run (a run's own row wins over it).
EVERY_RUN = "*"


def metadata_for_every_run(metadata: Any, **fields: Any) -> pd.DataFrame:
    """The user's metadata with ``fields`` set for every run: its :data:`EVERY_RUN` row.

    What ``bayesgrpo stop --reward-range 0 1`` does: one statement for all the runs read,
    whatever their run ids. A run's own row still wins over it; the fields replace those of an
    :data:`EVERY_RUN` row ``metadata`` already has.

    Parameters
    ----------
    metadata : dict, DataFrame, CSV or YAML path, or None
        The user's metadata keyed by ``run_id`` (as :func:`load_runs` takes it).
    **fields
        Values for every run (``reward_min=0.0, reward_max=1.0``).

    Returns
    -------
    DataFrame
        One row per ``run_id``, the :data:`EVERY_RUN` row included.
    """
    frame = _metadata_frame(metadata)
    frame = frame.assign(run_id=frame["run_id"].astype(str))
    if not (frame["run_id"] == EVERY_RUN).any():
        frame = pd.concat([frame, pd.DataFrame({"run_id": [EVERY_RUN]})], ignore_index=True)
    every = frame["run_id"] == EVERY_RUN
    for name, value in fields.items():
        column = frame[name] if name in frame.columns else pd.Series(None, index=frame.index)
        frame[name] = column.astype(object).where(~every, value)
    return frame


def merge_metadata(stated: pd.DataFrame, given: Any) -> tuple[pd.DataFrame, list[ReadIssue]]:
    """Merge user metadata over what the logs state; the user's values win, conflicts noted.

    A row whose ``run_id`` is :data:`EVERY_RUN` (``"*"``) gives values for every run; a run's own
    row wins over it.

    Parameters
    ----------
    stated : DataFrame
        One row per run, from the readers.
    given : dict, DataFrame, str or Path, optional
        The user's metadata keyed by ``run_id``.

    Returns
    -------
    merged : DataFrame
    notes : list of ReadIssue
    """
    user = _metadata_frame(given)
    notes: list[ReadIssue] = []
    if user.empty:
        return stated, notes
    user = user.assign(run_id=user["run_id"].astype(str))
    if user["run_id"].duplicated().any():
        raise MetadataError(
            f"metadata lists run(s) twice: {sorted(set(user.loc[user['run_id'].duplicated(), 'run_id']))}"
        )
    every = user["run_id"] == EVERY_RUN
    if every.any():  # the values for every run, under each run's own
        ids = pd.Index(stated["run_id"].astype(str), name="run_id")
        own = user.loc[~every].set_index("run_id")
        for_all = user.loc[every].drop(columns="run_id").iloc[0]
        defaults = pd.DataFrame([for_all] * len(ids), index=ids)
        filled = own.reindex(ids).combine_first(defaults)
        user = pd.concat([filled, own.loc[~own.index.isin(ids)]]).rename_axis("run_id").reset_index()
    unmatched = sorted(set(user["run_id"]) - set(stated["run_id"].astype(str)))
    if unmatched:
        notes.append(
            ReadIssue(
                "metadata",
                "unmatched_metadata",
                "info",
                len(unmatched),
                tuple(unmatched[:5]),
                "metadata given for runs that were not read",
            )
        )
    merged = stated.copy()
    merged["run_id"] = merged["run_id"].astype(str)
    merged = merged.set_index("run_id")
    user = user.set_index("run_id").loc[lambda f: f.index.isin(merged.index)]
    for column in user.columns:
        values = user[column].dropna()
        if column not in merged.columns:
            merged[column] = pd.Series(dtype=object)
            merged[column] = merged[column].astype(object)
        else:
            merged[column] = merged[column].astype(object)
            old = merged.loc[values.index, column]
            differs = old.notna() & _differs(old, values)
            if differs.any():
                notes.append(
                    ReadIssue(
                        "metadata",
                        "metadata_override",
                        "info",
                        int(differs.sum()),
                        tuple(differs[differs].index[:5]),
                        f"given {column!r} replaced the value the log states",
                    )
                )
        merged.loc[values.index, column] = values
    return merged.reset_index(), notes


def _unique_run_ids(tidied: list[TidyBatch], notes: list[ReadIssue]) -> None:
    seen: dict[str, int] = {}
    for batch in tidied:
        renamed: dict[str, str] = {}
        for metadata, account in zip(batch.metadata, batch.accounts, strict=True):
            run_id = cast(str, metadata["run_id"])
            if run_id in seen:
                seen[run_id] += 1
                new_id = f"{run_id}#{seen[run_id]}"
                notes.append(
                    ReadIssue(
                        account.source,
                        "duplicate_run_id",
                        "info",
                        1,
                        (),
                        f"run id {run_id!r} already used by another source; this one is {new_id!r}",
                    )
                )
                metadata["run_id"] = new_id
                account.run_ids = [new_id]
                renamed[run_id] = new_id
            else:
                seen[run_id] = 1
        if renamed:
            run_ids = batch.points["run_id"]
            batch.points["run_id"] = run_ids.where(~run_ids.isin(list(renamed)), run_ids.map(renamed))


def _tidied(source: Source, options: ReadOptions) -> list[TidyBatch]:
    """One source read and tidied: a table of several runs at once, other sources run by run."""
    if source.format in TABLE_FORMATS:
        # imported when a table is read, as the readers are (``_reader``)
        batch = importlib.import_module("bayesgrpo.logs.readers._batch")
        read = batch.read_table_records(source, options)
        if isinstance(read, RawRun):
            return [TidyBatch.of(tidy_run(read, reward=options.reward, strict=options.strict))]
        if read.run_column is not None:
            return cast(list[TidyBatch], batch.tidy_table(read, reward=options.reward, strict=options.strict))
        raws = read.raw_runs()
    else:
        raws = read_source(source, options)
    return [TidyBatch.of(tidy_run(raw, reward=options.reward, strict=options.strict)) for raw in raws]


def _is_scalar_free_tensorboard(source: Source, exc: BaseException) -> bool:
    """An event folder that holds only non-scalar data (hyperparameters, graphs)."""
    return (
        source.format == "tensorboard" and isinstance(exc, EmptyLogError) and "no scalar summary" in str(exc)
    )


def read_source(source: Source, options: ReadOptions) -> list[RawRun]:
    """Run the reader of ``source.format`` on it."""
    return _reader(source.format)(source, options)


def load_runs(
    paths: PathLike | Iterable[PathLike],
    *,
    format: str | None = None,
    reward: str | None = None,
    metadata: Mapping[str, Mapping[str, Any]] | pd.DataFrame | PathLike | None = None,
    columns: Mapping[str, str] | None = None,
    logging_steps: int | None = None,
    strict: bool = False,
    skip_unreadable: bool = False,
    warn: bool = True,
) -> RunsTable:
    """Read training logs into one runs table.

    Parameters
    ----------
    paths : path or list of paths
        Files or folders (read recursively), or MLflow sources:
        ``"mlflow:<tracking URI>#<experiment>[/<run>]"`` (``bayesgrpo.logs.readers.mlflow``).
    format : str, optional
        Force one format for every file (see ``READERS``); detected per file by default.
    reward : str, optional
        The metric to forecast, by its name in the logs (``"critic/score/mean"``,
        ``"val-core/openai/gsm8k/reward/mean@1"``) or canonical name. Default: each format's
        train reward.
    metadata : dict, DataFrame, or CSV/YAML path, optional
        Run metadata keyed by ``run_id`` (family, size_b, group_size...); wins over what the
        logs state, and each override is noted in the report. A row keyed :data:`EVERY_RUN`
        (``"*"``) gives values for every run read, under each run's own row
        (:func:`metadata_for_every_run`).
    columns : mapping, optional
        For plain tables: ``{"step": ..., "reward": ..., "run_id": ...}`` -> your column names.
    logging_steps : int, optional
        For TRL console logs, which carry no step: the trainer's ``logging_steps``.
    strict : bool
        Raise at the first record that would be dropped or repaired.
    skip_unreadable : bool
        Skip (and report) files that raise a read error instead of raising.
    warn : bool
        Emit one ``ReadWarning`` summarising what was dropped or repaired.

    Returns
    -------
    RunsTable

    Raises
    ------
    LogReadError
        And its subclasses, for a file that cannot be read (unless ``skip_unreadable``).
    UnknownMetricError
        When ``reward`` names no metric of a log.
    MetadataError
        For malformed ``metadata``.
    """
    sources, notes, manifest_metadata = discover(paths, format)
    if not sources:
        raise LogReadError(f"no readable log found under {paths!r}")
    report = ReadReport(notes=list(notes))
    tidied: list[TidyBatch] = []
    for source in sources:
        source_reward = reward or source.reward
        options = ReadOptions(
            reward=source_reward,
            strict=strict,
            columns=columns,
            logging_steps=logging_steps,
            run_id=source.run_id,
        )
        try:
            tidied.extend(_tidied(source, options))
        except (LogReadError, BayesGRPOError) as exc:
            if _is_scalar_free_tensorboard(source, exc) and len(sources) > 1:
                # transformers writes add_hparams into a sub-folder of its own: not a run
                report.notes.append(ReadIssue(source.label, "no_scalars", "info", 0, (), f"not a run: {exc}"))
                continue
            if not skip_unreadable or isinstance(exc, MetadataError):
                raise
            report.sources.append(
                SourceAccount(
                    source.label,
                    source.format,
                    [],
                    0,
                    0,
                    [ReadIssue(source.label, "unreadable", "info", 0, (), f"file skipped: {exc}")],
                )
            )
    if not tidied:
        raise LogReadError(f"no run could be read from {paths!r}")
    _unique_run_ids(tidied, report.notes)
    for batch in tidied:
        report.sources.extend(batch.accounts)
    points = pd.concat([batch.points for batch in tidied], ignore_index=True, sort=False)
    points["run_id"] = points["run_id"].astype("string")
    stated = pd.DataFrame([metadata for batch in tidied for metadata in batch.metadata])
    if len(manifest_metadata.columns) > 1:
        stated, manifest_notes = merge_metadata(stated, manifest_metadata)
        report.notes.extend(manifest_notes)
    merged, merge_notes = merge_metadata(stated, metadata)
    report.notes.extend(merge_notes)
    runs = coerce_metadata(merged)
    table = RunsTable(points=points, runs=runs, report=report)
    if warn and report.has_changes:
        changed = [i for i in report.issues if i.action != "info"]
        warnings.warn(
            ReadWarning(
                f"{len(changed)} repair(s)/drop(s) while reading {len(sources)} source(s) "
                f"({report.records_dropped} of {report.records_read} records dropped); "
                f"see table.report for what and where. First: {changed[0]}"
            ),
            stacklevel=2,
        )
    return table
