"""Discovery, format detection and metadata merging of load_runs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import bayesgrpo
from bayesgrpo.errors import LogReadError, MetadataError, ReadWarning, UnknownFormatError
from bayesgrpo.logs.readers import EVERY_RUN, detect_format, discover, merge_metadata, metadata_for_every_run


def write_csv(path: Path, steps, rewards) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"step": steps, "reward": rewards}).to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("events.out.tfevents.1.host", b"", "tensorboard"),
        ("run.ipynb", b"{}", "notebook"),
        ("t.parquet", b"", "parquet"),
        ("t.jsonl", b"{}", "jsonl"),
        ("trainer_state.json", b'{"log_history": []}', "trl-state"),
        ("other.json", b'{"a": 1}', None),
        ("t.csv", b"step,reward\n1,0.1\n", "csv"),
        ("w.csv", b'"Step","run-a - train/reward","run-a - train/reward__MIN"\n', "wandb-csv"),
        (
            "train.log",
            b"\x1b[36m(TaskRunner pid=1)\x1b[0m step:1 - critic/score/mean:0.4 - x:1\n",
            "verl-console",
        ),
        ("out.txt", b"{'loss': 0.1, 'reward': 0.2, 'epoch': 0.01}\n", "trl-console"),
        ("notes.md", b"step:12 - critic/score/mean:0.41 - ...", None),
    ],
)
def test_detect_format(tmp_path, name, content, expected):
    path = tmp_path / name
    path.write_bytes(content)
    assert detect_format(path) == expected


def test_folders_are_read_recursively_and_unknown_files_noted(tmp_path):
    write_csv(tmp_path / "a" / "run1.csv", [1, 2], [0.1, 0.2])
    write_csv(tmp_path / "b" / "c" / "run2.csv", [1, 2, 3], [0.1, 0.2, 0.3])
    (tmp_path / "README.md").write_text("hello")
    table = bayesgrpo.load_runs(tmp_path)
    assert sorted(table.run_ids) == ["run1", "run2"]
    assert any(i.kind == "unknown_format" and i.source.endswith("README.md") for i in table.report.notes)


def test_checkpoint_states_read_once(tmp_path):
    for number, _steps in ((10, [1, 2]), (20, [1, 2, 3, 4])):
        folder = tmp_path / "out" / f"checkpoint-{number}"
        folder.mkdir(parents=True)
        (folder / "trainer_state.json").write_text('{"log_history": []}')
    sources, notes, _ = discover(tmp_path)
    assert len(sources) == 1 and sources[0].paths[0].parent.name == "checkpoint-20"
    assert sources[0].run_id == "out"
    assert [n.kind for n in notes] == ["older_checkpoint"]


def test_missing_path_and_unknown_file_are_clear_errors(tmp_path):
    with pytest.raises(LogReadError, match="no such file"):
        bayesgrpo.load_runs(tmp_path / "nope")
    unknown = tmp_path / "x.bin"
    unknown.write_bytes(b"\x00\x01")
    with pytest.raises(UnknownFormatError, match="format="):
        bayesgrpo.load_runs(unknown)


def test_user_metadata_wins_and_overrides_are_noted(tmp_path):
    path = write_csv(tmp_path / "run1.csv", [1, 2], [0.1, 0.2])
    table = bayesgrpo.load_runs(
        path, metadata={"run1": {"family": "qwen2.5", "size_b": 7, "format": "mine"}, "ghost": {"size_b": 1}}
    )
    row = table.runs.iloc[0]
    assert row["family"] == "qwen2.5" and row["size_b"] == 7.0 and row["format"] == "mine"
    kinds = {n.kind for n in table.report.notes}
    assert {"metadata_override", "unmatched_metadata"} <= kinds


def test_metadata_for_every_run_is_under_each_runs_own(tmp_path):
    """A ``"*"`` row gives every run its values; a run's own row wins over it; the values win over
    what the logs state, and say so; a ``"*"`` row is never an unmatched run.
    """
    write_csv(tmp_path / "run1.csv", [1, 2], [0.1, 0.2])
    write_csv(tmp_path / "run2.csv", [1, 2], [0.3, 0.4])
    metadata = {
        "*": {"reward_min": 0.0, "reward_max": 1.0, "family": "qwen2.5"},
        "run2": {"reward_min": -1.0},
    }
    runs = bayesgrpo.load_runs(tmp_path, metadata=metadata).runs.set_index("run_id")
    assert runs.loc["run1", ["reward_min", "reward_max", "family"]].tolist() == [0.0, 1.0, "qwen2.5"]
    assert runs.loc["run2", ["reward_min", "reward_max", "family"]].tolist() == [-1.0, 1.0, "qwen2.5"]
    stated = pd.DataFrame({"run_id": ["run1", "run2"], "family": ["llama3", None]})
    merged, notes = merge_metadata(stated, metadata)
    assert merged.set_index("run_id")["family"].tolist() == ["qwen2.5", "qwen2.5"]
    assert [n.kind for n in notes] == ["metadata_override"] and notes[0].locations == ("run1",)


def test_metadata_for_every_run_joins_the_users_own(tmp_path):
    meta = tmp_path / "meta.csv"
    meta.write_text("run_id,reward_min\nrun2,-1\n*,5\n")
    frame = metadata_for_every_run(meta, reward_min=0.0, reward_max=1.0).set_index("run_id")
    assert frame.loc[EVERY_RUN, ["reward_min", "reward_max"]].tolist() == [0.0, 1.0]  # replaced, one row
    assert frame.loc["run2", "reward_min"] == -1 and len(frame) == 2
    assert metadata_for_every_run(None, reward_max=1.0)["run_id"].tolist() == [EVERY_RUN]


@pytest.mark.parametrize("suffix", [".csv", ".yaml"])
def test_metadata_from_files(tmp_path, suffix):
    path = write_csv(tmp_path / "logs" / "run1.csv", [1, 2], [0.1, 0.2])
    meta = tmp_path / f"meta{suffix}"
    if suffix == ".csv":
        meta.write_text("run_id,family,size_b,group_size\nrun1,llama3,8,16\n")
    else:
        meta.write_text("run1:\n  family: llama3\n  size_b: 8\n  group_size: 16\n")
    row = bayesgrpo.load_runs(path, metadata=meta).runs.iloc[0]
    assert (row["family"], row["size_b"], row["group_size"]) == ("llama3", 8.0, 16)


@pytest.mark.parametrize(
    "metadata",
    [{"run1": {"size_b": "big"}}, {"run1": 3}, pd.DataFrame({"name": ["run1"]}), 42],
)
def test_malformed_metadata_is_a_metadata_error(tmp_path, metadata):
    path = write_csv(tmp_path / "run1.csv", [1, 2], [0.1, 0.2])
    with pytest.raises(MetadataError):
        bayesgrpo.load_runs(path, metadata=metadata)


def test_same_run_id_from_two_files_is_kept_apart(tmp_path):
    write_csv(tmp_path / "a" / "run.csv", [1, 2], [0.1, 0.2])
    write_csv(tmp_path / "b" / "run.csv", [1, 2], [0.3, 0.4])
    table = bayesgrpo.load_runs(tmp_path)
    assert sorted(table.run_ids) == ["run", "run#2"]
    assert any(n.kind == "duplicate_run_id" for n in table.report.notes)


def test_repairs_warn_once_and_strict_raises(tmp_path):
    path = tmp_path / "run.csv"
    path.write_text("step,reward\n1,0.1\n2,0.2\n2,0.25\n3,abc\n")
    with pytest.warns(ReadWarning, match="dropped"):
        table = bayesgrpo.load_runs(path)
    assert table.points["step"].tolist() == [1, 2]  # step 3 held nothing but "abc"
    kinds = {(i.kind, i.action) for i in table.report.issues}
    assert {("duplicate_step", "dropped"), ("non_numeric", "repaired"), ("no_values", "dropped")} <= kinds
    assert table.report.balanced
    with pytest.raises(bayesgrpo.MalformedRecordError):
        bayesgrpo.load_runs(path, strict=True)


def test_skip_unreadable_reports_the_file(tmp_path):
    write_csv(tmp_path / "good.csv", [1, 2], [0.1, 0.2])
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(bayesgrpo.EmptyLogError, match="empty.csv"):
        bayesgrpo.load_runs(tmp_path)
    table = bayesgrpo.load_runs(tmp_path, skip_unreadable=True)
    assert table.run_ids == ["good"]
    assert any(i.kind == "unreadable" and "empty.csv" in i.source for i in table.report.issues)


def test_manifest_folder(tmp_path):
    write_csv(tmp_path / "logs" / "a.csv", [1, 2, 3], [0.1, 0.2, 0.3])
    write_csv(tmp_path / "logs" / "b.csv", [1, 2], [0.5, 0.6])
    (tmp_path / "runs.csv").write_text(
        "run_id,file,format,reward_key,family,size_b,group_size,algo,task,notes\n"
        "alpha,logs/a.csv,csv,reward,Qwen,0.5,5? (inferred),GRPO (verl),openai/gsm8k,bar 3/10; lr=1e-6\n"
    )
    table = bayesgrpo.load_runs(tmp_path)
    assert table.run_ids == ["alpha"]
    row = table.runs.iloc[0]
    assert (row["family"], row["size_b"], row["group_size"], row["algorithm"], row["task"]) == (
        "Qwen",
        0.5,
        5,
        "GRPO",
        "gsm8k",
    )
    assert row["total_steps"] == 10 and row["learning_rate"] == 1e-6 and bool(row["group_size_inferred"])
    assert any(n.kind == "not_in_manifest" and n.source.endswith("b.csv") for n in table.report.notes)


def test_select_and_run_access(tmp_path):
    write_csv(tmp_path / "a.csv", [1, 2], [0.1, 0.2])
    write_csv(tmp_path / "b.csv", [1, 2], [0.3, 0.4])
    table = bayesgrpo.load_runs(tmp_path, metadata={"a": {"family": "x"}, "b": {"family": "y"}})
    assert table.select(family="y").run_ids == ["b"]
    assert table.run("a")["reward"].tolist() == [0.1, 0.2]
    with pytest.raises(bayesgrpo.BayesGRPOError):
        table.run("zzz")
