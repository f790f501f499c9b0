"""W&B offline runs written by a real ``wandb.init(mode="offline")``, read back (no network, no login)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wandb.proto import wandb_internal_pb2
from wandb.sdk.internal.datastore import DataStore

from bayesgrpo.errors import LogReadError
from bayesgrpo.logs.readers import detect_format, load_runs
from bayesgrpo.logs.readers.wandb import REWARD_CANDIDATES
from bayesgrpo.model.datasets import load_bundled

RUN = "verl_asyncRA_q3b_fsdp_base"


@pytest.fixture(scope="module")
def bundled_points():
    points = load_bundled(warn=False).run(RUN)
    return points[np.isfinite(points["reward"].to_numpy(dtype=float))].reset_index(drop=True)


@pytest.fixture(scope="module")
def offline_folder(tmp_path_factory, bundled_points) -> Path:
    """``wandb/`` as a GPU box without network leaves it: one offline run of a real bundled run,
    logged as TRL's ``report_to="wandb"`` logs (``train/reward``, ``train/loss`` each step).
    """
    folder = tmp_path_factory.mktemp("wandb_box")
    np.save(folder / "points.npy", bundled_points[["step", "reward"]].to_numpy(dtype=float))
    code = textwrap.dedent(
        """
        import numpy as np, wandb
        points = np.load("points.npy")
        run = wandb.init(mode="offline", project="grpo-sweep", name="qwen3b-lr1e-6",
                         config={"model_name_or_path": "Qwen/Qwen2.5-3B-Instruct", "learning_rate": 1e-6,
                                 "num_generations": 5, "max_steps": 105})
        for step, reward in points:
            wandb.log({"train/reward": float(reward), "train/loss": 0.01}, step=int(step))
        run.finish()
        """
    )
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DIR": str(folder)}
    subprocess.run([sys.executable, "-c", code], cwd=folder, env=env, check=True, timeout=300)
    return folder / "wandb"


def run_file(folder: Path) -> Path:
    (path,) = folder.glob("offline-run-*/run-*.wandb")
    return path


def record_spans(path: Path) -> list[tuple[int, int]]:
    """The byte span of every record of an intact run file, read with wandb's own reader."""
    store = DataStore()
    store.open_for_scan(str(path))
    spans = []
    try:
        while True:
            start = store._index
            if store.scan_data() is None:
                return spans
            spans.append((start, store._index))
    finally:
        store.close()


def test_a_cut_between_records_reads_as_a_shorter_whole_run(offline_folder, tmp_path):
    data = run_file(offline_folder).read_bytes()
    spans = record_spans(run_file(offline_folder))
    _, boundary = next(span for span in spans if span[1] > 0.6 * len(data))
    cut = tmp_path / "run-cut.wandb"
    cut.write_bytes(data[:boundary])
    table = load_runs([cut], warn=False)
    assert not [i for i in table.report.issues if i.kind == "truncated"]
    assert table.report.records_read == table.report.records_kept > 0


def test_an_offline_run_reads_back_as_it_was_logged(offline_folder, bundled_points):
    path = run_file(offline_folder)
    assert detect_format(path) == "wandb-offline"
    table = load_runs([offline_folder])  # the whole wandb/ folder, as it is left on the box
    assert table.run_ids == ["qwen3b-lr1e-6"]
    read = table.run("qwen3b-lr1e-6")
    assert read["step"].tolist() == bundled_points["step"].tolist()
    assert np.allclose(read["reward"], bundled_points["reward"])
    row = table.runs.iloc[0]
    assert (row["family"], row["size_b"], row["group_size"], row["total_steps"]) == ("Qwen", 3.0, 5, 105)
    assert row["project"] == "grpo-sweep" and row["reward_key"] == "train/reward"
    report = table.report
    assert report.records_read == 2 * len(bundled_points) == report.records_kept


def test_a_torn_last_record_keeps_what_came_before_and_says_so(offline_folder, tmp_path, bundled_points):
    torn = tmp_path / "run-torn.wandb"
    data = run_file(offline_folder).read_bytes()
    # the box went away mid-write: cut inside the record that spans 60% of the file (a cut that
    # lands exactly between two records leaves a shorter, whole file, read in full without a word)
    start, end = next((a, b) for a, b in record_spans(run_file(offline_folder)) if b > 0.6 * len(data))
    torn.write_bytes(data[: (start + end) // 2])
    with pytest.warns(UserWarning, match="truncated"):
        table = load_runs([torn])
    issues = [i for i in table.report.issues if i.kind == "truncated"]
    assert len(issues) == 1 and issues[0].locations[0].startswith("byte ")
    kept = table.run(table.run_ids[0])
    assert 0 < len(kept) < len(bundled_points)
    assert np.allclose(kept["reward"], bundled_points["reward"][: len(kept)])
    report = table.report
    assert report.records_read == report.records_kept + report.records_dropped


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(0.0, 1.0), flips=st.lists(st.integers(0, 10**9), max_size=3))
def test_a_damaged_run_file_never_crashes_the_reader(offline_folder, tmp_path, cut, flips):
    data = bytearray(run_file(offline_folder).read_bytes())
    data = data[: int(len(data) * cut)]
    for flip in flips:
        if data:
            data[flip % len(data)] ^= 0xFF
    damaged = tmp_path / "run-damaged.wandb"
    damaged.write_bytes(bytes(data))
    try:
        table = load_runs([damaged], format="wandb-offline", warn=False)
    except LogReadError:
        return  # an unreadable file is a clear error
    report = table.report
    assert report.records_read == report.records_kept + report.records_dropped


def test_a_folder_copied_without_its_run_file_is_a_clear_error(offline_folder, tmp_path):
    copy = tmp_path / "wandb"
    shutil.copytree(offline_folder, copy, ignore=shutil.ignore_patterns("*.wandb"))
    with pytest.raises(LogReadError, match="no readable log found"):
        load_runs([copy])


def _offline_file(path: Path, rows: list[dict[str, float]]) -> Path:
    """A run file of one ``wandb.log`` call a row, written with wandb's own record writer."""
    store = DataStore()
    store.open_for_write(str(path))
    try:
        run = wandb_internal_pb2.Record()
        run.run.run_id, run.run.project = "mjq39fsw", "grpo"
        store.write(run)
        for step, row in enumerate(rows):
            record = wandb_internal_pb2.Record()
            record.history.step.num = step
            for key, value in {"_step": step, **row}.items():
                item = record.history.item.add()
                item.key, item.value_json = key, json.dumps(value)
            store.write(record)
    finally:
        store.close()
    return path


def test_the_total_reward_is_chosen_over_a_reward_functions_part(tmp_path):
    # souvikk1791/GRPO_sample_trainer wandb/run-20250219_111820-mjq39fsw (blob 47b37570): a
    # hand-written GRPO loop logs its total as 'rewards' beside the parts 'correctness_reward'
    # and 'format_reward'; with no default name logged, the scan fell back to 'format_reward'
    rows = [
        {"rewards": -0.011810302734375, "correctness_reward": 0, "format_reward": 0, "loss": -0.00505},
        {"rewards": -0.011810302734375, "correctness_reward": 0, "format_reward": 0, "loss": 0.00694},
        {"rewards": 0.009979248046875, "correctness_reward": 0, "format_reward": 0, "loss": 0.00247},
        {"rewards": 0.009979248046875, "correctness_reward": 0, "format_reward": 0.125, "loss": 0.04257},
    ]
    table = load_runs([_offline_file(tmp_path / "run-mjq39fsw.wandb", rows)], warn=False)
    assert table.runs.loc[0, "reward_key"] == "rewards"
    assert np.allclose(table.points["reward"], [r["rewards"] for r in rows])
    assert {"correctness_reward", "format_reward"} <= set(table.points.columns)  # kept as metrics


def test_an_average_reward_under_train_is_a_default_reward(tmp_path):
    # Dawn-Of-Justice/Fair-RLVR's callback logs the batch's mean total reward as train/avg_reward
    # beside its parts (train/r_fairness, ...)
    rows = [{"train/avg_reward": 0.1 * k, "train/r_fairness": 0.5, "train/accuracy": 0.2} for k in range(3)]
    table = load_runs([_offline_file(tmp_path / "run-knrf4q0d.wandb", rows)], warn=False)
    assert table.runs.loc[0, "reward_key"] == "train/avg_reward"
    assert np.allclose(table.points["reward"], [0.0, 0.1, 0.2])


def test_no_default_reward_name_is_a_reward_functions_part():
    parts = {"correctness_reward", "format_reward", "train/rewards/reward_fn/mean", "rewards/format/mean"}
    assert not parts & set(REWARD_CANDIDATES)
    assert {"rewards", "train/rewards", "train/avg_reward"} <= set(REWARD_CANDIDATES)
    # the names chosen before come first, as before: no run that read reads another reward now
    assert REWARD_CANDIDATES[:4] == ("train/reward", "reward", "critic/score/mean", "env/all/reward/total")
