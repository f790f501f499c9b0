"""A local MLflow file store with torn or garbage metric lines: dropped and reported, the rest read.

MLflow's own reader turned a metric line cut mid-write into step 0 and raised a raw
``ValueError`` / ``UnicodeDecodeError`` on a garbage line, leaving the whole experiment unread
(issue 79).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from bayesgrpo.logs.readers import load_runs
from bayesgrpo.logs.readers.mlflow_files import read_metric_file


def logged_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: int = 60) -> tuple[str, Path]:
    """A file store with one run ``r`` logging ``reward`` at steps 1..``steps``; its reward file."""
    store = tmp_path / "mlruns"
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=str(store))
    run = client.create_run(client.create_experiment("exp"), run_name="r")
    metrics = [Metric("reward", 0.01 * s, 1_700_000_000_000 + s, s) for s in range(1, steps + 1)]
    client.log_batch(run.info.run_id, metrics=metrics)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")
    (reward_file,) = store.rglob("metrics/reward")
    return f"mlflow:{store}#exp", reward_file


def test_a_metric_line_cut_mid_write_is_dropped_and_reported_not_read_as_step_0(tmp_path, monkeypatch):
    uri, reward_file = logged_store(tmp_path, monkeypatch)
    text = reward_file.read_text()
    assert text.endswith(" 60\n")
    reward_file.write_text(text[: -len(" 60\n")])  # '<timestamp> 0.6': cut before its step
    with pytest.warns(UserWarning):
        table = load_runs([uri])
    assert table.run("r")["step"].tolist() == list(range(1, 60))  # no step 0
    (issue,) = [i for i in table.report.issues if i.kind == "truncated"]
    assert issue.action == "dropped" and issue.locations == ("reward line 60",)
    assert str(reward_file) in issue.detail and "59 value(s)" in issue.detail
    assert table.report.balanced and table.report.records_read == 60


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"garbage\n", "field"),
        (b"1700000000099 abc 30\n", "not a number"),
        (b"1700000000099 0.5 \xff\xfe\n", "UTF-8"),
        (b"1700000000099 0.5\n", "no step"),
    ],
)
def test_a_garbage_metric_line_is_a_reported_repair_not_a_raw_exception(tmp_path, monkeypatch, line, problem):
    uri, reward_file = logged_store(tmp_path, monkeypatch)
    lines = reward_file.read_bytes().splitlines(keepends=True)
    reward_file.write_bytes(b"".join(lines[:30] + [line] + lines[30:]))
    with pytest.warns(UserWarning):
        table = load_runs([uri])
    assert table.run("r")["step"].tolist() == list(range(1, 61))
    (issue,) = [i for i in table.report.issues if i.kind == "bad_line"]
    assert issue.action == "dropped" and issue.locations == ("reward line 31",)
    assert problem in issue.detail and str(reward_file) in issue.detail
    assert table.report.balanced and table.report.records_read == 61


def test_an_old_store_without_steps_is_read_as_mlflow_reads_it(tmp_path):
    path = tmp_path / "reward"
    path.write_text("1700000000001 0.1\n1700000000002 0.2\n")
    read = read_metric_file(path)
    assert read.rows == [(1700000000001, 0, 0.1), (1700000000002, 0, 0.2)] and read.dropped == 0
