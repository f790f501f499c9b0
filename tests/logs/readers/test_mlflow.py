"""Runs read from MLflow: a local store (fast) and a real ``mlflow server`` on 127.0.0.1 (slow lane).

Real bundled runs are logged with the MLflow client, as TRL's ``report_to="mlflow"`` logs them
(metric ``reward`` by step, the training arguments as params), and read back with ``load_runs``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest
from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

from bayesgrpo.errors import LogReadError
from bayesgrpo.interfaces.cli import main
from bayesgrpo.interfaces.watch import Watcher
from bayesgrpo.logs.readers import load_runs
from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.questions.stopping import PlateauRule

RUNS = {  # run_id -> (model, group size): a verl run and two notebook runs
    "verl_asyncRA_q3b_fsdp_base": ("Qwen/Qwen2.5-3B-Instruct", 5),
    "nb_unslothai_notebooks_Kaggle_Llama3_1_8B_GRPO_add7e30_n250": ("unsloth/Llama-3.1-8B-Instruct", 6),
    "nb_unslothai_notebooks_Gemma3_1B_GRPO_d2ee017_n50": ("unsloth/gemma-3-1b-it", 4),
}


@pytest.fixture(scope="module")
def bundled():
    table = load_bundled(warn=False)
    return {run_id: table.run(run_id) for run_id in RUNS if run_id in set(table.run_ids)}


def log_runs(tracking_uri: str, bundled, experiment: str = "grpo-sweep") -> MlflowClient:
    """Log the bundled runs into an MLflow store, one MLflow run each, as a trainer would."""
    client = MlflowClient(tracking_uri=tracking_uri)
    experiment_id = client.create_experiment(experiment)
    for run_id, points in bundled.items():
        model, group = RUNS[run_id]
        run = client.create_run(experiment_id, run_name=run_id)
        params = {"model_name_or_path": model, "learning_rate": "5e-06", "num_generations": str(group),
                  "max_steps": str(int(points["step"].max())), "logging_steps": "1"}  # fmt: skip
        metrics = [
            Metric("reward", float(r), 1_700_000_000_000 + int(s), int(s))
            for s, r in zip(points["step"], points["reward"], strict=True)
            if np.isfinite(r)
        ]
        metrics += [Metric("loss", 0.1, 1_700_000_000_000 + int(s), int(s)) for s in points["step"]]
        client.log_batch(run.info.run_id, params=[Param(k, v) for k, v in params.items()])
        for start in range(0, len(metrics), 900):
            client.log_batch(run.info.run_id, metrics=metrics[start : start + 900])
        client.set_terminated(run.info.run_id)
    return client


def check_read_back(table, bundled, experiment: str = "grpo-sweep") -> None:
    assert sorted(table.run_ids) == sorted(bundled)
    runs = table.runs.set_index("run_id")
    for run_id, points in bundled.items():
        read = table.run(run_id)
        read = read[np.isfinite(read["reward"].to_numpy(dtype=float))]
        kept = points[np.isfinite(points["reward"].to_numpy(dtype=float))]
        assert read["step"].tolist() == kept["step"].tolist()
        assert np.allclose(read["reward"].to_numpy(dtype=float), kept["reward"].to_numpy(dtype=float))
        assert runs.loc[run_id, "experiment"] == experiment
        assert runs.loc[run_id, "group_size"] == RUNS[run_id][1]
        assert runs.loc[run_id, "total_steps"] == points["step"].max()
    assert runs.loc["verl_asyncRA_q3b_fsdp_base", "family"] == "Qwen"
    assert runs.loc["verl_asyncRA_q3b_fsdp_base", "size_b"] == 3.0
    assert table.report.records_read == table.report.records_kept + table.report.records_dropped


def test_a_local_store_reads_back_what_was_logged(bundled, tmp_path):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    log_runs(store, bundled)
    table = load_runs([f"mlflow:{store}#grpo-sweep"])
    check_read_back(table, bundled)
    one = load_runs([f"mlflow:{store}#grpo-sweep/verl_asyncRA_q3b_fsdp_base"])
    assert one.run_ids == ["verl_asyncRA_q3b_fsdp_base"]


def test_a_file_store_reads_back_though_mlflow_3_refuses_one_by_default(bundled, tmp_path, monkeypatch):
    """A ``mlruns/`` folder, as TRL and verl leave one without a server, is read as it was written:
    MLflow 3 opens a file store only with ``MLFLOW_ALLOW_FILE_STORE``, which the reader sets.
    """
    store = str(tmp_path / "mlruns")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # to write it, as MLflow 2 wrote them
    log_runs(store, bundled)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")
    table = load_runs([f"mlflow:{store}#grpo-sweep"])
    check_read_back(table, bundled)
    assert "MLFLOW_ALLOW_FILE_STORE" not in os.environ  # set while reading only


def test_a_resumed_run_and_a_nan_are_reported_not_lost(tmp_path):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=store)
    run = client.create_run(client.create_experiment("resumed"), run_name="r")
    values = [(1, 0.1), (2, 0.2), (3, 0.3), (2, 0.25), (3, float("nan")), (4, 0.4)]  # resumed at 2
    client.log_batch(
        run.info.run_id, metrics=[Metric("reward", v, 1000 + i, s) for i, (s, v) in enumerate(values)]
    )
    with pytest.warns(UserWarning):
        table = load_runs([f"mlflow:{store}#resumed"])
    assert table.run("r")["step"].tolist() == [1, 2, 3, 4]
    assert table.report.records_read == len(values)
    kinds = {issue.kind for issue in table.report.issues}
    assert {"duplicate_step", "out_of_order"} <= kinds and kinds & {"non_finite", "no_values"}
    assert table.run("r")["reward"].tolist()[:2] == [0.1, 0.25]  # the resumed run's value wins


def test_a_missing_experiment_names_the_uri_and_what_is_there(bundled, tmp_path):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    log_runs(store, bundled)
    with pytest.raises(
        LogReadError, match=r"no experiment 'nope'.*experiments there: \['Default', 'grpo-sweep'\]"
    ):
        load_runs([f"mlflow:{store}#nope"])
    with pytest.raises(LogReadError, match="no run 'missing'"):
        load_runs([f"mlflow:{store}#grpo-sweep/missing"])
    with pytest.raises(LogReadError, match="mlflow:<tracking URI>#<experiment>"):
        load_runs([f"mlflow:{store}"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real ``mlflow server`` with a SQLite backend on 127.0.0.1, stopped at teardown."""
    folder = tmp_path_factory.mktemp("mlflow_server")
    port = _free_port()
    command = [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
        "--default-artifact-root", (folder / "artifacts").as_uri(),
        "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
    ]  # fmt: skip
    log = (folder / "server.log").open("w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"mlflow server did not start: {(folder / 'server.log').read_text()[-2000:]}"
                )
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
        log.close()


@pytest.mark.slow
def test_a_tracking_server_serves_the_runs_to_load_runs_and_the_cli(server, bundled, capsys):
    log_runs(server, bundled)
    check_read_back(load_runs([f"mlflow:{server}#grpo-sweep"]), bundled)
    assert main(["runs", f"mlflow:{server}#grpo-sweep"]) == 0
    out = capsys.readouterr().out
    assert all(run_id[:30] in out for run_id in bundled)
    assert main(["stop", f"mlflow:{server}#grpo-sweep/verl_asyncRA_q3b_fsdp_base", "--json"]) == 0
    assert '"decision"' in capsys.readouterr().out


@pytest.mark.slow
def test_a_server_that_is_down_is_a_clear_error_in_seconds():
    uri = f"mlflow:http://127.0.0.1:{_free_port()}#grpo-sweep"
    start = time.monotonic()
    with pytest.raises(LogReadError, match=r"is the server running\?") as error:
        load_runs([uri])
    assert uri in str(error.value)
    assert time.monotonic() - start < 60


@pytest.mark.slow
def test_watch_follows_a_run_still_being_logged(server, bundled):
    points = bundled["verl_asyncRA_q3b_fsdp_base"].dropna(subset=["reward"])
    client = MlflowClient(tracking_uri=server)
    run = client.create_run(client.create_experiment("live"), run_name="still-training")
    client.log_batch(run.info.run_id, params=[Param("max_steps", str(int(points["step"].max())))])

    def log(rows):
        metrics = [Metric("reward", float(r), 1000 + int(s), int(s)) for s, r in rows]
        client.log_batch(run.info.run_id, metrics=metrics)

    rows = list(zip(points["step"], points["reward"], strict=True))
    log(rows[:30])
    watcher = Watcher([f"mlflow:{server}#live"], rule=PlateauRule(eps=0.01, relative=True))
    (first,) = watcher.poll()
    assert first.run_id == "still-training" and first.step == rows[29][0] and first.state == "ok"
    assert first.horizon_step == points["step"].max()
    log(rows[30:60])
    (later,) = watcher.poll()
    assert later.step == rows[59][0] and later.final_median is not None and later.updated
