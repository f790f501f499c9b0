"""The 60 bundled real runs load in one call with their manifest's counts and metadata."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.model.datasets import data_dir, load_bundled


@pytest.fixture(scope="module")
def bundled():
    return load_bundled(warn=False)


def test_the_only_repair_is_the_gemma_logs_missing_final_newline(bundled):
    # the real gemma console log ends without a newline: its last field may be cut and is dropped
    changes = [i for i in bundled.report.issues if i.action != "info"]
    assert [(i.kind, i.action, i.count) for i in changes] == [("truncated", "repaired", 1)]
    assert changes[0].source.endswith("gemma-2-2b-it-ppo-bsz512_4-prompt1024-resp-512-0.640.log")


@pytest.fixture(scope="module")
def manifest() -> pd.DataFrame:
    return pd.read_csv(data_dir() / "runs.csv", dtype={"run_id": str})


def test_all_runs_load(bundled, manifest):
    assert len(bundled) == 60
    assert sorted(bundled.run_ids) == sorted(manifest["run_id"])
    assert bundled.report.balanced
    assert bundled.report.records_dropped == 0


def test_point_counts_and_steps_match_the_manifest(bundled, manifest):
    summary = bundled.summary().set_index("run_id")
    expected = manifest.set_index("run_id")
    for run_id, row in expected.iterrows():
        got = summary.loc[run_id]
        assert got["n_points"] == row["n_points"], run_id
        assert got["first_step"] == int(float(row["first_step"])), run_id
        assert got["last_step"] == int(float(row["last_step"])), run_id


def test_metadata_matches_the_manifest(bundled, manifest):
    runs = bundled.runs.set_index("run_id")
    for row in manifest.itertuples(index=False):
        got = runs.loc[row.run_id]
        assert got["family"] == row.family
        assert (np.isnan(row.size_b) and np.isnan(got["size_b"])) or got["size_b"] == row.size_b
        assert got["algorithm"] == row.algo.split()[0]
        assert got["licence"] == row.license
        assert got["source"] == row.source
        assert got["reward_key"] == row.reward_key


@pytest.mark.parametrize(
    ("written", "size", "inferred"),
    [("6", 6, False), ("5? (inferred)", 5, True), ("1 (PPO, rollout.n=1)", 1, False), ("?", None, False)],
)
def test_group_size_free_text_is_parsed_without_guessing(bundled, manifest, written, size, inferred):
    run_id = manifest.loc[manifest["group_size"].fillna("?") == written, "run_id"].iloc[0]
    got = bundled.runs.set_index("run_id").loc[run_id]
    if size is None:
        assert pd.isna(got["group_size"])
    else:
        assert got["group_size"] == size
    assert bool(got["group_size_inferred"]) is inferred


def test_tasks_are_normalised_and_the_written_form_kept(bundled):
    runs = bundled.runs
    assert set(runs.loc[runs["task_as_written"] == "openai/gsm8k", "task"]) == {"gsm8k"}
    assert set(runs.loc[runs["task_as_written"] == "GSM8K", "task"]) == {"gsm8k"}


def test_unlisted_copies_are_noted_not_read(bundled):
    notes = [i for i in bundled.report.notes if i.kind == "not_in_manifest"]
    assert any(i.source.endswith(".ipynb") for i in notes)
