"""Build the corpus: each run's file out of its git mirror at the pinned commit, read by the package.

For every file of the manifest, :func:`build_corpus` takes the blob out of the repository's bare
mirror (``<mirrors>/<owner>+<name>/repo``, as the search tool's ``fetch`` lays them out), checks
that the pinned commit holds that blob at that path, writes it under the output folder with its
own name, and reads it with :func:`bayesgrpo.load_runs` (the format and reward key of the
manifest). Each run's points must match the manifest's checksum. Runs bundled in ``data/`` are
read from there. A run of an MLflow file store is a folder, not a file (``<store>/<experiment>/
<run>/``): its manifest row names the run folder and its git tree id, and the folder is laid out
as a one-run store (:func:`materialise_mlflow_run`) and read by its ``mlflow:`` URI. Nothing is
dropped in silence: a missing mirror, a commit that lacks the file, a
reader error and a checksum mismatch are each listed in :attr:`CorpusBuild.problems`, by run.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np
import pandas as pd
import yaml

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


def _check_pinned(mirror: Path, commit: str, path: str, sha: str) -> None:
    """Raise ``LookupError`` unless ``commit`` holds the object ``sha`` (a blob or tree) at ``path``."""
    held = subprocess.run(
        ["git", f"--git-dir={mirror}", "rev-parse", f"{commit}:{path}"], capture_output=True, text=True
    )
    if held.returncode != 0 or held.stdout.strip() != sha:
        raise LookupError(f"commit {commit[:12]} holds {held.stdout.strip()[:12] or 'no file'} at {path!r}")


def _git_blob(mirror: Path, commit: str, path: str, blob: str) -> bytes:
    _check_pinned(mirror, commit, path, blob)
    return subprocess.run(
        ["git", f"--git-dir={mirror}", "cat-file", "blob", blob], capture_output=True, check=True
    ).stdout


#: Formats whose run is a folder pinned by its git tree id (an MLflow file store's run folder).
FOLDER_FORMATS = frozenset({"mlflow"})
#: What of an MLflow run folder is laid out: all but its artifacts (checkpoints, models), which
#: hold no metric and can be large.
_SKIPPED_RUN_FOLDERS = ("artifacts",)


def _tree_files(mirror: Path, tree: str) -> Iterator[tuple[str, bytes]]:
    """``(path, content)`` of every file under the git tree ``tree`` but its artifacts.

    Raises
    ------
    LookupError
        When the mirror lacks a file of it (a snapshot leaves out large files).
    """
    listing = subprocess.run(
        ["git", f"--git-dir={mirror}", "ls-tree", "-r", "-z", tree], capture_output=True, check=True
    ).stdout.decode("utf-8", "surrogateescape")
    entries = []
    for entry in filter(None, listing.split("\0")):
        meta, _, path = entry.partition("\t")
        _, kind, sha = meta.split()
        if kind == "blob" and PurePosixPath(path).parts[0] not in _SKIPPED_RUN_FOLDERS:
            entries.append((path, sha))
    if not entries:
        return
    out = subprocess.run(
        ["git", f"--git-dir={mirror}", "cat-file", "--batch"],
        input=b"".join(sha.encode() + b"\n" for _, sha in entries),
        capture_output=True,
        check=True,
    ).stdout
    at = 0
    for path, sha in entries:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        if len(header) < 3 or header[1] != b"blob":
            raise LookupError(f"the mirror lacks {path!r} of tree {tree[:12]} ({sha[:12]})")
        size = int(header[2])
        yield path, out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1


def materialise_mlflow_run(mirror: PathLike, commit: str, path: str, tree: str, out: PathLike) -> str:
    """An MLflow run folder of a git mirror laid out as a one-run file store; its ``mlflow:`` URI.

    The run folder ``<store>/<experiment>/<run>`` must be the git tree ``tree`` at ``commit``. Its
    files (but its artifacts) are written to ``<out>/mlruns/<experiment>/<run>/``, beside the
    experiment's ``meta.yaml`` of that commit (a minimal one naming the experiment by its id where
    the commit has none), so that MLflow's client reads the run as it was logged.

    Parameters
    ----------
    mirror : str or Path
        The bare git mirror.
    commit : str
        A commit whose tree holds the run folder.
    path : str
        The run folder's path in that commit.
    tree : str
        The run folder's git tree id.
    out : str or Path
        An empty or missing folder to lay the store out in.

    Returns
    -------
    str
        ``mlflow:<out>/mlruns#<experiment id>``, for :func:`bayesgrpo.load_runs`.

    Raises
    ------
    LookupError
        When the commit does not hold that tree at that path, or the mirror lacks one of its files.
    """
    mirror, out = Path(mirror), Path(out)
    _check_pinned(mirror, commit, path, tree)
    run_path = PurePosixPath(path)
    experiment, run = run_path.parent.name, run_path.name
    if not experiment:
        raise LookupError(f"{path!r} is not a run folder <store>/<experiment>/<run>")
    store = out / "mlruns"
    run_folder = store / experiment / run
    # git keeps no empty folder; MLflow takes a folder as a run only when these are there
    for sub in ("metrics", "params", "tags", *_SKIPPED_RUN_FOLDERS):
        (run_folder / sub).mkdir(parents=True, exist_ok=True)
    for name, content in _tree_files(mirror, tree):
        file = run_folder / name
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(content)
    meta = subprocess.run(
        ["git", f"--git-dir={mirror}", "cat-file", "blob", f"{commit}:{run_path.parent / 'meta.yaml'}"],
        capture_output=True,
    )
    if meta.returncode == 0:
        (store / experiment / "meta.yaml").write_bytes(meta.stdout)
    else:
        stated = {"experiment_id": experiment, "name": experiment, "lifecycle_stage": "active"}
        (store / experiment / "meta.yaml").write_text(yaml.safe_dump(stated | {"artifact_location": ""}))
    return f"mlflow:{store}#{experiment}"


def git_blob_id(content: bytes) -> str:
    """The id git gives a file of this content (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\x00" % len(content) + content, usedforsecurity=False).hexdigest()


def _materialise(row: pd.Series, mirrors: Path, data_dir: Path, out: Path) -> Path | str:
    """The run's file on disk under ``out`` (or in ``data_dir``), checked against its blob id; for
    a run folder (:data:`FOLDER_FORMATS`), the ``mlflow:`` URI of its store laid out under ``out``.
    """
    if row["bundled_file"]:
        file = data_dir / row["bundled_file"]
        if git_blob_id(file.read_bytes()) != row["blob"]:
            raise LookupError(f"bundled file {row['bundled_file']} is not blob {row['blob'][:12]}")
        return file
    mirror = mirror_path(mirrors, row["repo"])
    if not mirror.exists():
        raise FileNotFoundError(row["repo"])
    if row["format"] in FOLDER_FORMATS:
        store = out / row["repo"].replace("/", "+", 1) / row["blob"]
        if not (store / "mlruns").exists():
            try:
                return materialise_mlflow_run(mirror, row["commit"], row["path"], row["blob"], store)
            except (LookupError, subprocess.CalledProcessError):
                shutil.rmtree(store, ignore_errors=True)  # no half-laid store for the next build
                raise
        _check_pinned(mirror, row["commit"], row["path"], row["blob"])
        return f"mlflow:{store / 'mlruns'}#{PurePosixPath(row['path']).parent.name}"
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
