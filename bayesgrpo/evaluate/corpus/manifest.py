"""The corpus manifest: one row a run, naming where its file is pinned and what its points are.

A row names the run's public source and the file that holds it: the repository, a commit whose
tree holds the file, the path, and the file's git blob id (its content hash), or, for the runs
bundled in ``data/``, the bundled file. A run of an MLflow file store is a folder: the path names
the run folder and the blob column holds its git tree id. The reader's format, the reward key and the run's id
inside the file say how :func:`bayesgrpo.load_runs` reads it; ``points_sha256`` is the checksum
of the points it must read (:func:`bayesgrpo.evaluate.corpus.points_checksum`). The rest is what
the source states of the run (model, family, size, algorithm, task, group size, planned steps,
the reward's stated range), its licence and why it is in.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bayesgrpo.errors import MetadataError
from bayesgrpo.logs.readers.base import PathLike

#: The manifest's columns, in order, with what each holds.
MANIFEST_COLUMNS: dict[str, str] = {
    "run_id": "the run's id in the corpus (unique)",
    "source": "the independent source: owner/name, or owner/name:recipe for a monorepo's recipe",
    "repo": "the public repository (owner/name)",
    "commit": "a commit whose tree holds the file",
    "path": "the file's path in that commit (an MLflow run: its run folder <store>/<experiment>/<run>)",
    "blob": "the file's git blob id (SHA-1 of its content, as git hashes it); an MLflow run folder's tree id",
    "bundled_file": "for runs bundled with the package: the file under data/, else empty",
    "format": "the reader (a key of bayesgrpo.logs.readers.load.READERS)",
    "reward_key": "the metric read as the reward, by its name in the log",
    "file_run_id": "the run's id as the reader names it inside the file (empty: the file's only run)",
    "points_sha256": "checksum of the (step, reward) points the reader must yield",
    "n_points": "logged points",
    "first_step": "first logged step",
    "last_step": "last logged step",
    "model": "the model, as the source states it",
    "family": "model family",
    "size_b": "parameters, billions",
    "algorithm": "GRPO, PPO, DAPO, RLOO, GSPO, ...",
    "task": "the training task or data set, as the source states it",
    "group_size": "completions per prompt",
    "total_steps": "planned optimizer steps, where the log states them",
    "reward_min": "the reward's stated lower bound (a score by construction), else empty",
    "reward_max": "the reward's stated upper bound, else empty",
    "licence": "the source's licence (SPDX id), or 'none stated'",
    "why": "why the run is in the corpus",
}

_REQUIRED = ("run_id", "source", "repo", "blob", "format", "points_sha256", "licence")


def read_manifest(path: PathLike) -> pd.DataFrame:
    """Read and check a corpus manifest.

    Parameters
    ----------
    path : str or Path
        The manifest CSV.

    Returns
    -------
    pandas.DataFrame
        One row a run, the columns of :data:`MANIFEST_COLUMNS` in order.

    Raises
    ------
    MetadataError
        For a missing column, an empty required cell, a run id given twice, or a row that names
        neither a commit and path nor a bundled file.
    """
    frame = pd.read_csv(Path(path), dtype=str, keep_default_na=False)
    missing = [column for column in MANIFEST_COLUMNS if column not in frame.columns]
    if missing:
        raise MetadataError(f"{path}: manifest lacks columns {missing}")
    for column in _REQUIRED:
        empty = frame.index[frame[column].str.strip() == ""]
        if len(empty):
            raise MetadataError(f"{path}: column {column!r} is empty on line(s) {[i + 2 for i in empty[:5]]}")
    repeated = frame["run_id"][frame["run_id"].duplicated()]
    if len(repeated):
        raise MetadataError(f"{path}: run ids given twice: {sorted(set(repeated))[:5]}")
    unplaced = frame.index[(frame["bundled_file"] == "") & ((frame["commit"] == "") | (frame["path"] == ""))]
    if len(unplaced):
        raise MetadataError(
            f"{path}: line(s) {[i + 2 for i in unplaced[:5]]} name neither a commit and path "
            "nor a bundled file"
        )
    frame = frame[list(MANIFEST_COLUMNS)].copy()
    for column in ("n_points", "first_step", "last_step", "size_b", "group_size", "total_steps"):
        frame[column] = pd.to_numeric(frame[column].replace("", None), errors="coerce")
    for column in ("reward_min", "reward_max"):
        frame[column] = pd.to_numeric(frame[column].replace("", None), errors="coerce")
    return frame
