"""Build the corpus: each run's file out of its git mirror at the pinned commit, read by the package.

For every file of the manifest, :func:`build_corpus` takes the blob out of the repository's bare
mirror (``<mirrors>/<owner>+<name>/repo``, as the search tool's ``fetch`` lays them out), checks
that the pinned commit holds that blob at that path, writes it under the output folder with its
own name, and reads it with :func:`bayesgrpo.load_runs` (the format and reward key of the
manifest). Each run's points must match the manifest's checksum. Runs bundled in ``data/`` are
read from there. Nothing is dropped in silence: a missing mirror, a commit that lacks the file, a
reader error and a checksum mismatch are each listed in :attr:`CorpusBuild.problems`, by run.
"""

from __future__ import annotations

import hashlib
import subprocess
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.evaluate.corpus.splits import source_fold
from bayesgrpo.logs.readers.base import PathLike
from bayesgrpo.logs.readers.load import load_runs
from bayesgrpo.logs.report import ReadReport
from bayesgrpo.logs.table import RunsTable, coerce_metadata

#: Metadata columns the manifest states and the built runs table carries (besides the fold).
CARRIED = (
    "source",
    "repo",
    "model",
    "family",
    "size_b",
    "algorithm",
    "task",
    "group_size",
    "total_steps",
    "reward_min",
    "reward_max",
    "licence",
)


def points_checksum(steps: np.ndarray | pd.Series, rewards: np.ndarray | pd.Series) -> str:
    """SHA-256 of a run's points, one ``step,reward`` line each (reward as ``repr`` of a float)."""
    lines = "".join(
        f"{int(s)},{float(r)!r}\n" for s, r in zip(np.asarray(steps), np.asarray(rewards), strict=True)
    )
    return hashlib.sha256(lines.encode("ascii")).hexdigest()


def mirror_path(mirrors: Path, repo: str) -> Path:
    """Where the bare mirror of ``owner/name`` lies under ``mirrors``."""
    return mirrors / repo.replace("/", "+", 1) / "repo"


@dataclass
class CorpusBuild:
    """What :func:`build_corpus` built.

    Attributes
    ----------
    table : RunsTable
        Every run that was read and matched its checksum, under its corpus ``run_id``; its runs
        frame carries the manifest's metadata and each run's ``fold``.
    problems : pandas.DataFrame
        One row per run not built: ``run_id``, ``source``, ``problem`` (``"no mirror"``,
        ``"commit lacks file"``, ``"read error"``, ``"no such run in file"``, ``"checksum"``),
        ``detail``.
    """

    table: RunsTable
    problems: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def missing_mirrors(self) -> list[str]:
        """Repositories to fetch before the corpus can be built whole."""
        if self.problems.empty:
            return []
        return sorted(set(self.problems.loc[self.problems["problem"] == "no mirror", "detail"]))


def _git_blob(mirror: Path, commit: str, path: str, blob: str) -> bytes:
    held = subprocess.run(
        ["git", f"--git-dir={mirror}", "rev-parse", f"{commit}:{path}"], capture_output=True, text=True
    )
    if held.returncode != 0 or held.stdout.strip() != blob:
        raise LookupError(f"commit {commit[:12]} holds {held.stdout.strip()[:12] or 'no file'} at {path!r}")
    return subprocess.run(
        ["git", f"--git-dir={mirror}", "cat-file", "blob", blob], capture_output=True, check=True
    ).stdout


def git_blob_id(content: bytes) -> str:
    """The id git gives a file of this content (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\x00" % len(content) + content, usedforsecurity=False).hexdigest()


def _materialise(row: pd.Series, mirrors: Path, data_dir: Path, out: Path) -> Path:
    """The run's file on disk under ``out`` (or in ``data_dir``), checked against its blob id."""
    if row["bundled_file"]:
        file = data_dir / row["bundled_file"]
        if git_blob_id(file.read_bytes()) != row["blob"]:
            raise LookupError(f"bundled file {row['bundled_file']} is not blob {row['blob'][:12]}")
        return file
    mirror = mirror_path(mirrors, row["repo"])
    if not mirror.exists():
        raise FileNotFoundError(row["repo"])
    # the file keeps its own name and its folder's (TensorBoard runs are named by their folder)
    target = out / row["repo"].replace("/", "+", 1) / row["blob"] / (Path(row["path"]).parent.name or "root")
    file = target / Path(row["path"]).name
    if not file.exists():
        content = _git_blob(mirror, row["commit"], row["path"], row["blob"])
        target.mkdir(parents=True, exist_ok=True)
        file.write_bytes(content)
    return file


def build_corpus(
    manifest: pd.DataFrame,
    mirrors: PathLike,
    out: PathLike,
    data_dir: PathLike = "data",
    check: bool = True,
) -> CorpusBuild:
    """Read every run of the manifest from its pinned file and check its points.

    Parameters
    ----------
    manifest : pandas.DataFrame
        From :func:`bayesgrpo.evaluate.corpus.read_manifest`.
    mirrors : str or Path
        The folder of bare git mirrors (``<owner>+<name>/repo``).
    out : str or Path
        Where the files are written (never committed).
    data_dir : str or Path
        The package's bundled data folder, for runs with a ``bundled_file``.
    check : bool
        Compare each run's points with its ``points_sha256`` (off only to take the checksums of
        new rows); the checksum read is kept in the runs frame's ``points_sha256`` either way.

    Returns
    -------
    CorpusBuild
    """
    mirrors, out, data_dir = Path(mirrors), Path(out), Path(data_dir)
    problems: list[dict[str, str]] = []
    points: list[pd.DataFrame] = []
    runs: list[dict[str, object]] = []
    reports: list[ReadReport] = []
    files: dict[tuple[str, str, str, str], RunsTable | Exception] = {}
    for _, row in manifest.iterrows():
        base = {"run_id": row["run_id"], "source": row["source"]}
        try:
            file = _materialise(row, mirrors, data_dir, out)
        except FileNotFoundError as exc:
            problems.append(base | {"problem": "no mirror", "detail": str(exc)})
            continue
        except (LookupError, subprocess.CalledProcessError) as exc:
            problems.append(base | {"problem": "commit lacks file", "detail": str(exc)})
            continue
        key = (str(file), row["format"], row["reward_key"], row["blob"])
        if key not in files:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    files[key] = load_runs(
                        file, format=row["format"] or None, reward=row["reward_key"] or None, warn=False
                    )
                except BayesGRPOError as exc:
                    files[key] = exc
            read = files[key]
            if isinstance(read, RunsTable):
                reports.append(read.report)
        table = files[key]
        if isinstance(table, Exception):
            problems.append(base | {"problem": "read error", "detail": f"{type(table).__name__}: {table}"})
            continue
        in_file = list(table.points["run_id"].unique())
        file_run_id = row["file_run_id"] or (in_file[0] if len(in_file) == 1 else None)
        run_points = table.points[table.points["run_id"] == file_run_id]
        if run_points.empty:
            problems.append(base | {"problem": "no such run in file", "detail": f"runs there: {in_file[:5]}"})
            continue
        checksum = points_checksum(run_points["step"], run_points["reward"])
        if check and checksum != row["points_sha256"]:
            problems.append(
                base
                | {
                    "problem": "checksum",
                    "detail": f"read {checksum[:12]}, manifest {row['points_sha256'][:12]}",
                }
            )
            continue
        points.append(run_points.assign(run_id=row["run_id"]))
        read_meta = table.runs.set_index("run_id").loc[file_run_id].to_dict()
        stated = {column: row[column] for column in CARRIED if not _blank(row[column])}
        runs.append(
            {k: v for k, v in read_meta.items() if not _blank(v)}
            | stated
            | {"run_id": row["run_id"], "fold": source_fold(row["source"]), "points_sha256": checksum}
        )
    all_points = (
        pd.concat(points, ignore_index=True) if points else pd.DataFrame(columns=["run_id", "step", "reward"])
    )
    all_runs = coerce_metadata(pd.DataFrame(runs if runs else {"run_id": []}))
    report = ReadReport(sources=[account for one in reports for account in one.sources])
    built = RunsTable(all_points, all_runs, report)
    return CorpusBuild(
        table=built,
        problems=pd.DataFrame(problems, columns=["run_id", "source", "problem", "detail"]),
    )


def load_built(folder: PathLike) -> RunsTable:
    """The corpus as ``benchmarks/corpus/build.py`` wrote it (``points.csv.gz``, ``runs.csv``).

    Parameters
    ----------
    folder : str or Path
        The build's output folder (``benchmarks/_scratch/corpus/built``).

    Returns
    -------
    RunsTable
        Every built run; its runs frame carries ``source``, ``fold`` and the manifest's metadata.
    """
    folder = Path(folder)
    points = pd.read_csv(folder / "points.csv.gz", dtype={"run_id": str})
    runs = coerce_metadata(pd.read_csv(folder / "runs.csv", dtype={"run_id": str}))
    return RunsTable(points.sort_values(["run_id", "step"], ignore_index=True), runs)


def _blank(value: object) -> bool:
    if value is None or value is pd.NA:
        return True
    if isinstance(value, float) and np.isnan(value):
        return True
    return isinstance(value, str) and value.strip() == ""
