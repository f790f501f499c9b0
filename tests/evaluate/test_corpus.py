"""The benchmark corpus: folds by source name, weights, the bootstrap over sources, shapes, and the
builder reading pinned files out of a git mirror with a checksum per run.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.errors import MetadataError
from bayesgrpo.evaluate.corpus import (
    MANIFEST_COLUMNS,
    SEALED,
    build_corpus,
    curve_shape,
    length_class,
    points_checksum,
    read_manifest,
    run_weights,
    source_bootstrap,
    source_fold,
    weighted_median,
)
from bayesgrpo.evaluate.corpus.build import git_blob_id
from bayesgrpo.logs.writers.trl import trainer_state_text

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "benchmarks" / "corpus" / "manifest.csv"
EXCLUDE = ROOT.parent / "shared" / "corpus-exclude.txt"


def test_folds_are_a_function_of_the_name_and_seal_about_a_fifth():
    names = [f"owner{i}/repo{i}" for i in range(3000)]
    folds = pd.Series([source_fold(n) for n in names])
    assert [source_fold(n) for n in names[:50]] == list(folds[:50])  # stable
    shares = folds.value_counts(normalize=True)
    assert set(shares.index) == {SEALED, "0", "1", "2", "3", "4"}
    assert 0.17 < shares[SEALED] < 0.23
    for fold in "01234":
        assert 0.13 < shares[fold] < 0.19
    assert source_fold(" owner0/repo0 ") == source_fold("owner0/repo0")


def test_pooled_weights_cap_a_source_at_a_tenth_and_equal_weights_split_by_source():
    sources = ["big"] * 50 + [f"s{i}" for i in range(15) for _ in range(2)]
    pooled = run_weights(sources, "pooled", cap=0.1)
    by_source = pd.Series(pooled).groupby(pd.Series(sources)).sum()
    assert np.isclose(pooled.sum(), 1.0)
    assert np.isclose(by_source["big"], 0.1)
    assert np.allclose(by_source.drop("big"), 0.9 / 15)
    equal = run_weights(sources, "equal")
    assert np.allclose(pd.Series(equal).groupby(pd.Series(sources)).sum(), 1 / 16)
    # with no source over the cap, pooled is a plain mean over runs
    even = [f"s{i}" for i in range(20)]
    assert np.allclose(run_weights(even), 1 / 20)
    with pytest.raises(ValueError, match="scheme"):
        run_weights(even, "median")


def test_source_bootstrap_resamples_whole_sources():
    rng = np.random.default_rng(1)
    sources = np.repeat([f"s{i}" for i in range(12)], 5)
    offsets = np.repeat(rng.normal(0, 1, 12), 5)
    values = offsets + rng.normal(0, 0.01, 60)
    estimate, low, high = source_bootstrap(values, sources, scheme="equal", n_boot=500)
    assert low < estimate < high
    # the spread is the sources', not the runs' (which is 100 times smaller)
    assert high - low > 0.5
    same = source_bootstrap(np.ones(60), sources, n_boot=100)
    assert same == (1.0, 1.0, 1.0)


@pytest.mark.parametrize(
    ("curve", "shape"),
    [
        (0.2 + 0.6 * (1 - np.exp(-np.arange(200) / 30)), "rising"),
        (np.full(200, 0.4), "flat"),
        (np.concatenate([np.linspace(0.1, 0.8, 100), np.linspace(0.8, 0.45, 100)]), "peak then fall"),
        (np.concatenate([np.linspace(0.3, 0.7, 100), np.linspace(0.7, 0.05, 100)]), "collapse"),
    ],
)
def test_curve_shape(curve, shape):
    noisy = curve + np.random.default_rng(0).normal(0, 0.02, len(curve))
    assert curve_shape(noisy) == shape


def test_length_class():
    assert length_class(50) == "< 100 steps"
    assert length_class(999) == "300-999 steps"
    assert length_class(1000) == "1,000+ steps"


def _git(folder: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(
        ["git", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
        env=env | {"PATH": "/usr/bin:/bin"},
    ).stdout.strip()


@pytest.fixture
def mirror(tmp_path):
    """A bare mirror ``owner+name/repo`` holding one TRL run at a pinned commit."""
    work = tmp_path / "work"
    (work / "outputs" / "checkpoint-60").mkdir(parents=True)
    steps = np.arange(1, 61)
    points = pd.DataFrame({"step": steps, "reward": 0.2 + 0.5 * (1 - np.exp(-steps / 15))})
    state = work / "outputs" / "checkpoint-60" / "trainer_state.json"
    state.write_text(trainer_state_text(points))
    _git(work, "init", "-q")
    _git(work, "add", ".")
    _git(work, "commit", "-q", "-m", "run")
    commit = _git(work, "rev-parse", "HEAD")
    mirrors = tmp_path / "mirrors"
    (mirrors / "owner+name").mkdir(parents=True)
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(work), str(mirrors / "owner+name" / "repo")], check=True
    )
    row = {column: "" for column in MANIFEST_COLUMNS} | {
        "run_id": "owner_name_run",
        "source": "owner/name",
        "repo": "owner/name",
        "commit": commit,
        "path": "outputs/checkpoint-60/trainer_state.json",
        "blob": git_blob_id(state.read_bytes()),
        "format": "trl-state",
        "reward_key": "reward",
        "licence": "MIT",
        "family": "Qwen",
        "size_b": "1.5",
    }
    return mirrors, row, points


def _manifest(tmp_path: Path, rows: list[dict[str, str]]) -> pd.DataFrame:
    path = tmp_path / "manifest.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return read_manifest(path)


def test_build_reads_the_pinned_file_and_checks_its_points(tmp_path, mirror):
    mirrors, row, points = mirror
    row["points_sha256"] = points_checksum(points["step"], points["reward"])
    build = build_corpus(_manifest(tmp_path, [row]), mirrors, tmp_path / "out", check=True)
    assert build.problems.empty
    runs = build.table.runs.set_index("run_id")
    assert list(runs.index) == ["owner_name_run"]
    assert runs.loc["owner_name_run", "fold"] == source_fold("owner/name")
    assert runs.loc["owner_name_run", "size_b"] == 1.5  # what the manifest states wins
    assert np.allclose(build.table.points["reward"], points["reward"])


def test_build_reports_every_run_it_cannot_build(tmp_path, mirror):
    mirrors, row, points = mirror
    good = points_checksum(points["step"], points["reward"])
    rows = [
        row | {"run_id": "tampered", "points_sha256": "0" * 64},
        row | {"run_id": "other_blob", "points_sha256": good, "blob": "1" * 40},
        row | {"run_id": "unfetched", "points_sha256": good, "repo": "someone/else"},
        row | {"run_id": "fine", "points_sha256": good},
    ]
    build = build_corpus(_manifest(tmp_path, rows), mirrors, tmp_path / "out")
    problems = build.problems.set_index("run_id")["problem"].to_dict()
    assert problems == {"tampered": "checksum", "other_blob": "commit lacks file", "unfetched": "no mirror"}
    assert build.missing_mirrors == ["someone/else"]
    assert list(build.table.runs["run_id"]) == ["fine"]


@pytest.fixture
def mlflow_mirror(tmp_path, monkeypatch):
    """A bare mirror holding an MLflow file store (``mlruns/``) of one GRPO run, with an artifact."""
    tracking = pytest.importorskip("mlflow.tracking")
    entities = pytest.importorskip("mlflow.entities")
    Metric, Param = entities.Metric, entities.Param  # noqa: N806 - MLflow's class names
    work = tmp_path / "mlwork"
    work.mkdir()
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 writes a file store only so
    client = tracking.MlflowClient(tracking_uri=str(work / "mlruns"))
    experiment = client.create_experiment("grpo-gsm8k")
    run = client.create_run(experiment, run_name="qwen-grpo")
    steps = np.arange(1, 41)
    points = pd.DataFrame({"step": steps, "reward": 0.1 + 0.6 * (1 - np.exp(-steps / 12))})
    client.log_batch(
        run.info.run_id,
        metrics=[Metric("reward", float(r), 1_700_000_000_000 + int(s), int(s)) for s, r in points.values],
        params=[Param("model_name_or_path", "Qwen/Qwen2.5-0.5B-Instruct")],
    )
    client.set_terminated(run.info.run_id)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")
    run_folder = f"mlruns/{experiment}/{run.info.run_id}"
    (work / run_folder / "artifacts").mkdir(exist_ok=True)
    (work / run_folder / "artifacts" / "model.bin").write_bytes(b"\0" * 1000)  # never laid out
    _git(work, "init", "-q")
    _git(work, "add", ".")
    _git(work, "commit", "-q", "-m", "mlflow run")
    commit = _git(work, "rev-parse", "HEAD")
    mirrors = tmp_path / "mlmirrors"
    (mirrors / "owner+ml").mkdir(parents=True)
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(work), str(mirrors / "owner+ml" / "repo")], check=True
    )
    row = {column: "" for column in MANIFEST_COLUMNS} | {
        "run_id": "owner_ml_run",
        "source": "owner/ml",
        "repo": "owner/ml",
        "commit": commit,
        "path": run_folder,
        "blob": _git(work, "rev-parse", f"HEAD:{run_folder}"),
        "format": "mlflow",
        "reward_key": "reward",
        "licence": "MIT",
        "points_sha256": points_checksum(points["step"], points["reward"]),
    }
    return mirrors, row, points


def test_build_reads_an_mlflow_run_folder_pinned_by_its_tree_id(tmp_path, mlflow_mirror):
    mirrors, row, points = mlflow_mirror
    rows = [row, row | {"run_id": "other_tree", "blob": "2" * 40}]
    for _ in range(2):  # the second build reads the store the first laid out
        build = build_corpus(_manifest(tmp_path, rows), mirrors, tmp_path / "out")
        assert build.problems.set_index("run_id")["problem"].to_dict() == {"other_tree": "commit lacks file"}
        assert list(build.table.runs["run_id"]) == ["owner_ml_run"]
        assert np.allclose(build.table.points["reward"], points["reward"])
        run = build.table.runs.iloc[0]
        assert run["format"] == "mlflow" and run["experiment"] == "grpo-gsm8k"
        assert run["model"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert not list((tmp_path / "out").rglob("model.bin"))
    assert not (tmp_path / "out" / "owner+ml" / ("2" * 40)).exists()


def test_read_manifest_refuses_what_it_cannot_trust(tmp_path, mirror):
    _, row, _ = mirror
    row["points_sha256"] = "a" * 64
    with pytest.raises(MetadataError, match="given twice"):
        _manifest(tmp_path, [row, dict(row)])
    with pytest.raises(MetadataError, match="'blob' is empty"):
        _manifest(tmp_path, [row | {"blob": ""}])
    with pytest.raises(MetadataError, match="neither a commit"):
        _manifest(tmp_path, [row | {"commit": ""}])
    path = tmp_path / "short.csv"
    pd.DataFrame([row]).drop(columns="licence").to_csv(path, index=False)
    with pytest.raises(MetadataError, match="lacks columns"):
        read_manifest(path)


def test_the_committed_manifest_is_sound_and_its_bundled_runs_build():
    manifest = read_manifest(MANIFEST)
    assert manifest["run_id"].is_unique
    if EXCLUDE.exists():
        excluded = {line.strip().lower() for line in EXCLUDE.read_text().splitlines() if "/" in line}
        assert not set(manifest["repo"].str.lower()) & excluded
    bundled = manifest[manifest["bundled_file"] != ""]
    assert len(bundled) == 60
    build = build_corpus(bundled, ROOT / "no-mirrors-needed", ROOT / "unused", data_dir=ROOT / "data")
    assert build.problems.empty, build.problems.to_string()
    assert len(build.table.runs) == 60


def test_weighted_median_and_a_paired_statistic_over_sources():
    assert weighted_median(np.array([3.0, 1.0, 2.0]), np.ones(3)) == 2.0
    assert weighted_median(np.array([1.0, 10.0]), np.array([0.9, 0.1])) == 1.0
    sources = np.repeat([f"s{i}" for i in range(10)], 3)
    pairs = np.column_stack([np.full(30, 0.8), np.ones(30)])

    def ratio(values, weights):
        return weighted_median(values[:, 0], weights) / weighted_median(values[:, 1], weights)

    assert source_bootstrap(pairs, sources, ratio, n_boot=50) == (0.8, 0.8, 0.8)
