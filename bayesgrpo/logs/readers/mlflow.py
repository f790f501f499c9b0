"""Runs from an MLflow tracking server or a local ``mlruns/`` store, read with MLflow's own client.

A source is named by a URI: ``mlflow:<tracking URI>#<experiment>[/<run>]``, e.g.
``mlflow:http://127.0.0.1:5000#grpo-sweep``, ``mlflow:./mlruns#grpo-sweep/lr-1e-6`` or
``mlflow:sqlite:///mlflow.db#0``. The experiment is named by its name or id, a run by its name or
id; without a run, every run of the experiment is read. Each run's metric histories become its
points (one record per logged value, with its step), its params its metadata: the model name
(its family and size where the name says them), learning rate, group size
(``num_generations``), batch size and planned steps (``max_steps``), plus the experiment's and
the run's names and the run's status. TRL with ``report_to="mlflow"`` logs exactly these.

mlflow is an optional dependency (``pip install 'bayesgrpo[mlflow]'``): it is imported when an
``mlflow:`` source is read.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bayesgrpo.errors import LogReadError
from bayesgrpo.logs.readers._records import RawRun
from bayesgrpo.logs.readers.base import ReadOptions, Source
from bayesgrpo.logs.readers.mlflow_files import metric_file_issues, read_metric_file
from bayesgrpo.logs.readers.model_names import tracked_metadata
from bayesgrpo.logs.readers.trl.columns import TRL_ALIASES, TRL_REWARD_CANDIDATES
from bayesgrpo.logs.report import ReadIssue

SCHEME = "mlflow:"
#: Rewards tried in order when the user names none: TRL's (what ``report_to="mlflow"`` logs,
#: with or without the ``train/`` prefix), then verl's.
REWARD_CANDIDATES: tuple[str, ...] = (
    *TRL_REWARD_CANDIDATES,
    *(f"train/{name}" for name in TRL_REWARD_CANDIDATES),
    "critic/score/mean",
    "critic/rewards/mean",
)
#: Params that name the model, in order of preference.
MODEL_PARAMS: tuple[str, ...] = (
    "model_name_or_path",
    "model_name",
    "model",
    "base_model",
    "_name_or_path",
    "actor_rollout_ref.model.path",
)
#: Params -> metadata names of the schema.
PARAM_METADATA: dict[str, str] = {
    "learning_rate": "learning_rate",
    "num_generations": "group_size",
    "actor_rollout_ref.rollout.n": "group_size",
    "per_device_train_batch_size": "per_device_batch_size",
    "data.train_batch_size": "batch_size",
    "max_steps": "total_steps",
    "trainer.total_training_steps": "total_steps",
    "num_train_epochs": "num_epochs",
    "logging_steps": "logging_steps",
}
#: How long one request to a tracking server may take, and how often it is retried, unless the
#: user's environment says otherwise (MLflow's defaults retry for minutes when a server is down).
REQUEST_TIMEOUT_S = "10"
REQUEST_RETRIES = "1"
#: What the reader sets, unless the user's environment says otherwise: requests that give up in
#: seconds, and a local ``mlruns/`` file store read as it was written (MLflow 3 refuses to open one
#: unless ``MLFLOW_ALLOW_FILE_STORE`` is set, to push writers to a database; this reader only reads).
READER_ENVIRONMENT: dict[str, str] = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": REQUEST_TIMEOUT_S,
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": REQUEST_RETRIES,
    "MLFLOW_ALLOW_FILE_STORE": "true",
}


@dataclass(frozen=True)
class MlflowURI:
    """A parsed ``mlflow:`` source."""

    text: str
    tracking_uri: str
    experiment: str
    run: str | None

    @classmethod
    def parse(cls, text: str) -> MlflowURI:
        """Split ``mlflow:<tracking>#<experiment>[/<run>]``; a clear error when it is not one."""
        if not text.startswith(SCHEME):
            raise LogReadError(f"not an MLflow source (they start with {SCHEME!r}): {text!r}")
        body = text[len(SCHEME) :]
        tracking, hash_mark, selection = body.partition("#")
        if not tracking or not hash_mark or not selection.strip("/"):
            raise LogReadError(
                f"an MLflow source reads mlflow:<tracking URI>#<experiment>[/<run>] (e.g. "
                f"mlflow:http://127.0.0.1:5000#grpo-sweep); got {text!r}"
            )
        experiment, _, run = selection.partition("/")
        return cls(text, tracking, experiment, run or None)


@contextlib.contextmanager
def _reader_environment() -> Iterator[None]:
    """:data:`READER_ENVIRONMENT` while a source is read, where the user set none of it."""
    saved = {k: os.environ.get(k) for k in READER_ENVIRONMENT}
    for key, default in READER_ENVIRONMENT.items():
        os.environ.setdefault(key, default)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _client(uri: MlflowURI) -> Any:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as exc:
        raise LogReadError(
            f"reading {uri.text} needs mlflow: install the extra with `pip install 'bayesgrpo[mlflow]'`"
        ) from exc
    return MlflowClient(tracking_uri=uri.tracking_uri)


def _experiment(client: Any, uri: MlflowURI) -> Any:
    try:
        found = client.get_experiment_by_name(uri.experiment)
        if found is None and uri.experiment.isdigit():
            found = client.get_experiment(uri.experiment)
    except Exception as exc:  # the client raises MlflowException, requests' and sqlalchemy's errors
        if "does not exist" in str(exc) or "RESOURCE_DOES_NOT_EXIST" in str(exc):
            found = None
        else:
            raise LogReadError(
                f"cannot read the MLflow tracking store {uri.tracking_uri!r} ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:300]}); is the server running?",
                uri.text,
            ) from exc
    if found is None:
        names = sorted(e.name for e in client.search_experiments())
        raise LogReadError(
            f"no experiment {uri.experiment!r} in the MLflow tracking store {uri.tracking_uri!r}; "
            f"experiments there: {names}",
            uri.text,
        )
    return found


def _runs(client: Any, experiment: Any, uri: MlflowURI) -> list[Any]:
    runs: list[Any] = []
    token = None
    while True:
        page = client.search_runs([experiment.experiment_id], max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            break
    if uri.run is not None:
        runs = [r for r in runs if uri.run in (r.info.run_name, r.info.run_id)]
        if not runs:
            raise LogReadError(
                f"no run {uri.run!r} in experiment {experiment.name!r} of {uri.tracking_uri!r}", uri.text
            )
    return sorted(runs, key=lambda r: (r.info.start_time or 0, r.info.run_name or ""))


def run_metadata(params: Mapping[str, str], experiment: str, run_name: str, info: Any) -> dict[str, Any]:
    """A run's metadata from its MLflow params (strings) and info."""
    metadata: dict[str, Any] = {
        "experiment": experiment,
        "mlflow_run_id": info.run_id,
        "mlflow_run_name": run_name,
        "status": info.status,
    }
    metadata.update(tracked_metadata(params, MODEL_PARAMS, PARAM_METADATA))
    return metadata


def _file_store(client: Any) -> Any | None:
    """The client's store when it is a local file store (``mlruns/``), else ``None``."""
    try:
        from mlflow.store.tracking.file_store import FileStore
    except ImportError:  # pragma: no cover - every mlflow with a client has it
        return None
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    return store if isinstance(store, FileStore) else None


@dataclass
class _Run:
    """One MLflow run as read: its info, params and long records (``step, metric, value``)."""

    info: Any
    name: str
    params: Mapping[str, str]
    rows: list[tuple[int, str, float]]
    issues: list[ReadIssue]
    dropped: int


def _served_runs(client: Any, experiment: Any, uri: MlflowURI) -> list[_Run]:
    """The runs, read through MLflow's client (a server or a database)."""
    out = []
    for run in _runs(client, experiment, uri):
        rows: list[tuple[int, str, float]] = []
        for key in sorted(run.data.metrics):
            logged = client.get_metric_history(run.info.run_id, key)
            history = sorted(logged, key=lambda m: (m.timestamp, m.step))  # as logged, in time
            rows.extend((m.step, key, m.value) for m in history)
        out.append(_Run(run.info, run.info.run_name or run.info.run_id, run.data.params, rows, [], 0))
    return out


def _stored_runs(store: Any, experiment: Any, uri: MlflowURI) -> list[_Run]:
    """The runs of a local file store, their metric files read here (``mlflow_files``).

    MLflow's client fails on the first bad line of any metric file and reads a line cut
    mid-write as step 0; here bad lines are dropped and reported, the rest of the run kept.
    """
    from mlflow.entities import ViewType

    infos = store._list_run_infos(experiment.experiment_id, ViewType.ACTIVE_ONLY)
    out = []
    for info in infos:
        tags = {tag.key: tag.value for tag in store._get_all_tags(info)}
        name = info.run_name or tags.get("mlflow.runName") or info.run_id
        if uri.run is not None and uri.run not in (name, info.run_id):
            continue
        params = {param.key: param.value for param in store._get_all_params(info)}
        folder = Path(store._get_run_dir(info.experiment_id, info.run_id)) / "metrics"
        label = f"{uri.text.split('#')[0]}#{experiment.name}/{name}"
        rows: list[tuple[int, str, float]] = []
        issues: list[ReadIssue] = []
        dropped = 0
        files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
        for path in files:
            key = path.relative_to(folder).as_posix()
            try:
                read = read_metric_file(path)
            except OSError as exc:
                raise LogReadError(f"cannot read the metric file: {exc.strerror or exc}", path) from exc
            history = sorted(read.rows)  # as logged, in time: (timestamp, step, value)
            rows.extend((step, key, value) for _, step, value in history)
            issues.extend(metric_file_issues(label, key, path, read))
            dropped += read.dropped
        out.append(_Run(info, name, params, rows, issues, dropped))
    if uri.run is not None and not out:
        raise LogReadError(
            f"no run {uri.run!r} in experiment {experiment.name!r} of {uri.tracking_uri!r}", uri.text
        )
    return sorted(out, key=lambda r: (r.info.start_time or 0, r.name))


def read_mlflow(source: Source, options: ReadOptions) -> list[RawRun]:
    """Every run an ``mlflow:`` source names, as raw runs (long records: one per logged value).

    A local file store's metric files are read line by line (``mlflow_files``): a line cut
    mid-write or garbage is dropped and reported, naming its file and line; other stores are
    read through MLflow's client.
    """
    uri = MlflowURI.parse(source.uri or "")
    with _reader_environment():
        client = _client(uri)
        experiment = _experiment(client, uri)
        store = _file_store(client)
        runs = (
            _stored_runs(store, experiment, uri)
            if store is not None
            else _served_runs(client, experiment, uri)
        )
    raws = []
    for run in runs:
        records = pd.DataFrame(run.rows, columns=["step", "metric", "value"])
        records.insert(0, "_loc", range(1, len(records) + 1))
        candidates = ((options.reward,) if options.reward else ()) + REWARD_CANDIDATES
        raws.append(
            RawRun(
                run_id=run.name,
                source=f"{uri.text.split('#')[0]}#{experiment.name}/{run.name}",
                format="mlflow",
                records=records,
                records_read=len(records) + run.dropped,
                issues=run.issues,
                metadata=run_metadata(run.params, experiment.name, run.name, run.info),
                reward_candidates=candidates,
                aliases={**TRL_ALIASES, **{f"train/{k}": v for k, v in TRL_ALIASES.items()}},
                location_label="metric record",
                long=True,
            )
        )
    return raws
