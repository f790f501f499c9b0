"""Find reward logs in fetched git mirrors: every version of every file, read by the package.

The corpus (``benchmarks/corpus/README.md``) is built from public repositories that commit their
training logs. This script is how candidates are found: for each bare git mirror given, it walks
every blob of every commit, keeps the files whose name and content look like a log a reader
of bayesgrpo takes (TRL ``trainer_state.json`` and console dicts, verl console lines and file
logger JSONL, TensorBoard event files, notebooks with a GRPO progress table, W&B panel exports,
CSV/JSONL tables with a reward column, Parquet tables whose footer names a step and a reward
column), reads each through ``bayesgrpo.load_runs`` and writes one JSON line per run it yields:
the repository, a commit that holds the file, its path and blob, the format, the reward key the
reader chose,
what the log states of the run (model, size, total steps, reward range), its length and a
fingerprint of its points (to find the same run committed twice, or copied between repositories).

A run of an MLflow file store is a folder (``<store>/<experiment>/<run>/`` with ``meta.yaml`` and
``metrics/``): every version of such a folder is laid out as a one-run store
(``bayesgrpo.evaluate.corpus.build.materialise_mlflow_run``) and read by its ``mlflow:`` URI; its
row's path is the run folder and its blob the folder's git tree id.

Usage::

    python benchmarks/corpus/scan.py /work/.mirror/OWNER+NAME/repo ... --out scan.jsonl

Mirrors already in ``--out`` are skipped, and so are the blobs of a mirror whose scan was cut
short, so a long scan resumes where it stopped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from bayesgrpo import load_runs
from bayesgrpo.errors import UnknownMetricError
from bayesgrpo.evaluate.corpus.build import materialise_mlflow_run
from bayesgrpo.logs.readers.tabular import STEP_NAMES
from bayesgrpo.logs.table import RunsTable

#: File names worth a look, by suffix or name.
_LOG_NAME = re.compile(
    r"(trainer_state\.json$|tfevents|\.ipynb$|\.log$|\.txt$|\.out$|\.csv$|\.jsonl$|\.json$|\.wandb$"
    r"|\.parquet$)",
    re.IGNORECASE,
)
#: What a log must hold for the readers to be tried on it (a Parquet file: its footer).
_SIGNATURES = (b"reward", b"Reward", b"REWARD", b"critic/score", b"objective/scores")
#: What a Parquet footer must also hold: a step column (a data set's ``reward_model`` column alone
#: is not a log), by its name as the footer's schema writes it, after its length (pandas' own
#: metadata in the footer says ``"step": 1`` of every range index).
_PARQUET_STEPS = tuple(bytes([len(name)]) + name.encode() for name in STEP_NAMES)
_MIN_BYTES = 400
_MAX_BYTES = 60 * 2**20
#: Fewest logged points a run needs to be worth a row.
MIN_POINTS = 10
#: Points compared to tell a run from a longer or shorter copy of itself (a notebook committed
#: mid-run and again at the end holds one run twice).
HEAD_POINTS = 20


def _git(mirror: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={mirror}", *args],
        input=stdin,
        capture_output=True,
        check=True,
    ).stdout


def _repository_name(mirror: Path) -> str:
    folder = mirror.parent.name if mirror.name == "repo" else mirror.name
    return folder.replace("+", "/", 1)


def object_listing(mirror: Path) -> list[tuple[str, str]]:
    """Every (object, path) of the mirror's history: blobs and trees, each object once."""
    listing = _git(mirror, "rev-list", "--all", "--objects", "--missing=allow-any").decode("utf-8", "replace")
    pairs = []
    for line in listing.splitlines():
        sha, _, path = line.partition(" ")
        if path:
            pairs.append((sha, path))
    return pairs


def candidate_blobs(mirror: Path, listing: list[tuple[str, str]] | None = None) -> list[tuple[str, str, int]]:
    """Every (blob, path, size) of the mirror's history whose name looks like a log."""
    seen: dict[str, str] = {}
    for sha, path in object_listing(mirror) if listing is None else listing:
        if _LOG_NAME.search(path) and sha not in seen:
            seen[sha] = path
    if not seen:
        return []
    checks = _git(
        mirror,
        "cat-file",
        "--batch-check=%(objectname) %(objecttype) %(objectsize)",
        stdin="\n".join(seen).encode() + b"\n",
    ).decode()
    blobs = []
    for line in checks.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "blob" and _MIN_BYTES <= int(parts[2]) <= _MAX_BYTES:
            blobs.append((parts[0], seen[parts[0]], int(parts[2])))
    return blobs


def commit_holding(mirror: Path, sha: str, path: str) -> str | None:
    """A commit whose tree holds blob ``sha`` at ``path`` (the newest that does).

    ``git log --find-object`` is asked first; in a snapshot with missing objects it fails, and the
    newest 500 commits are then asked one by one.
    """
    try:
        commits = _git(mirror, "log", "--all", "--format=%H", f"--find-object={sha}").decode().split()
    except subprocess.CalledProcessError:
        commits = _git(mirror, "rev-list", "--all", "--max-count=500").decode().split()
    for commit in commits:
        try:
            found = _git(mirror, "rev-parse", f"{commit}:{path}").decode().strip()
        except subprocess.CalledProcessError:
            continue
        if found == sha:
            return commit
    return None


def introducing_commits(mirror: Path) -> dict[tuple[str, str], str]:
    """``(blob, path) -> a commit whose tree holds it``, from one pass over the history.

    ``git log --raw`` names, for each commit, the blobs it writes at each path: the commit that
    writes a blob at a path holds it there.
    """
    try:
        text = _git(mirror, "log", "--all", "--format=commit %H", "--raw", "--no-abbrev", "--no-renames")
    except subprocess.CalledProcessError:
        return {}
    held: dict[tuple[str, str], str] = {}
    commit = ""
    for line in text.decode("utf-8", "replace").splitlines():
        if line.startswith("commit "):
            commit = line[7:].strip()
        elif line.startswith(":"):
            meta, _, path = line.partition("\t")
            parts = meta.split()
            if len(parts) >= 5 and parts[4] != "D":
                held.setdefault((parts[3], path), commit)
    return held


def points_fingerprint(steps: np.ndarray, rewards: np.ndarray) -> str:
    """A hash of a run's points rounded to 4 significant digits: equal for copies of one log."""
    rounded = [f"{int(s)}:{float(r):.4g}" for s, r in zip(steps, rewards, strict=True)]
    return hashlib.sha256(",".join(rounded).encode()).hexdigest()[:16]


def parquet_footer(content: bytes) -> bytes:
    """A Parquet file's footer (its schema: the column names), or ``b""`` if it is not one."""
    if len(content) < 12 or not content.endswith(b"PAR1"):
        return b""
    length = int.from_bytes(content[-8:-4], "little")
    return content[-8 - length : -8] if length <= len(content) - 12 else b""


def _looks_like_log(path: str, content: bytes) -> bool:
    if "tfevents" in path.lower():
        return True
    if path.lower().endswith(".parquet"):  # binary: its column names are in the footer
        footer = parquet_footer(content)
        return any(s in footer for s in _SIGNATURES) and any(s in footer for s in _PARQUET_STEPS)
    return any(signature in content for signature in _SIGNATURES)


#: A reward-like metric the reader suggests when the default names are not logged.
_SUGGESTED_REWARD = re.compile(r"'([^']*reward[^']*)'", re.IGNORECASE)
#: A suggested name is taken only if it reads as a mean reward: ``reward``, ``terminal_reward``,
#: ``Reward``, ``train/reward_mean``; not ``reward_std`` or ``constant_reward_groups``.
_MEAN_REWARD = re.compile(r"^([a-z]+[_/ ])?rewards?([_/ ]mean)?$", re.IGNORECASE)


def _load(file: Path | str) -> RunsTable:
    """Read a file with the default reward, or with the reward-like metric the reader suggests.

    A log whose reward is logged under a name no reader knows (``terminal_reward``, a notebook
    table's ``Reward``) is read with that name: the manifest records it as the run's reward key.
    """
    try:
        return load_runs(file, warn=False)
    except UnknownMetricError as exc:
        suggested = _SUGGESTED_REWARD.findall(str(exc).split("Did you mean")[-1])
        means = [name for name in suggested if _MEAN_REWARD.match(name)]
        if not means:
            raise
        return load_runs(file, reward=means[0], warn=False)


def read_blob_runs(path: str, content: bytes) -> Iterator[dict[str, object]]:
    """Read one blob through ``load_runs`` under its own name; one dict per run of enough points."""
    with tempfile.TemporaryDirectory() as folder:
        parent = Path(folder) / (Path(path).parent.name or "root")
        parent.mkdir()
        file = parent / Path(path).name
        file.write_bytes(content)
        yield from _read_runs(file)


def read_mlflow_runs(mirror: Path, commit: str, path: str, tree: str) -> Iterator[dict[str, object]]:
    """Read one version of an MLflow run folder (git tree ``tree`` at ``path``) as a one-run store."""
    with tempfile.TemporaryDirectory() as folder:
        try:
            uri = materialise_mlflow_run(mirror, commit, path, tree, folder)
        except (LookupError, subprocess.CalledProcessError) as exc:
            yield {"error": f"{type(exc).__name__}: {exc}"[:300]}
            return
        yield from _read_runs(uri)


def _read_runs(source: Path | str) -> Iterator[dict[str, object]]:
    """One dict per run of enough points that ``load_runs`` reads from ``source`` (else its error)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            table = _load(source)
        except Exception as exc:  # noqa: BLE001 - a scan records what each reader says
            yield {"error": f"{type(exc).__name__}: {exc}"[:300]}
            return
    runs = table.runs.set_index("run_id")
    for run_id, points in table.points.groupby("run_id", sort=False):
        if points["reward"].notna().sum() < MIN_POINTS:
            continue
        meta = runs.loc[run_id]
        steps = points["step"].to_numpy()
        rewards = points["reward"].to_numpy(dtype=float)
        yield {
            "run_id": str(run_id),
            "format": _text(meta.get("format")),
            "reward_key": _text(meta.get("reward_key")),
            "model": _text(meta.get("model")),
            "family": _text(meta.get("family")),
            "size_b": _number(meta.get("size_b")),
            "algorithm": _text(meta.get("algorithm")),
            "total_steps": _number(meta.get("total_steps")),
            "reward_min": _number(meta.get("reward_min")),
            "reward_max": _number(meta.get("reward_max")),
            "n_points": len(points),
            "first_step": int(steps.min()),
            "last_step": int(steps.max()),
            "reward_first": float(rewards[np.isfinite(rewards)][0]),
            "reward_last": float(rewards[np.isfinite(rewards)][-1]),
            "reward_lo": float(np.nanmin(rewards)),
            "reward_hi": float(np.nanmax(rewards)),
            "fingerprint": points_fingerprint(steps, rewards),
            "head_fingerprint": points_fingerprint(steps[:HEAD_POINTS], rewards[:HEAD_POINTS]),
        }


def _text(value: object) -> str | None:
    return (
        None
        if value is None or (isinstance(value, float) and np.isnan(value)) or str(value) == "<NA>"
        else str(value)
    )


def _number(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if np.isnan(number) else number


def _blob_contents(mirror: Path, shas: list[str]) -> Iterator[tuple[str, bytes | None]]:
    """Each blob's content, streamed from one ``git cat-file --batch`` (None: the snapshot lacks it)."""
    process = subprocess.Popen(
        ["git", f"--git-dir={mirror}", "cat-file", "--batch"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        for sha in shas:
            process.stdin.write(sha.encode() + b"\n")
            process.stdin.flush()
            header = process.stdout.readline().split()
            if len(header) < 3 or header[1] != b"blob":  # "<sha> missing"
                yield sha, None
                continue
            content = process.stdout.read(int(header[2]))
            process.stdout.read(1)  # the newline after the content
            yield sha, content
    finally:
        process.stdin.close()
        process.wait()


#: What a notebook must hold to have a reward column in a progress table (its HTML, escaped in JSON),
#: a reward in the trainer's console dicts printed into a cell's output (newer TRL), or a callback's
#: printed ``Step N | name: value`` lines.
_NOTEBOOK_TABLE = re.compile(
    rb"<th>\s*[\w/ ]*reward|\{'loss': [^}]{0,400}'reward'|Step \d+ \| [\w /.\-]+: [-+]?[\d.]", re.IGNORECASE
)


def mlflow_run_folders(mirror: Path, listing: list[tuple[str, str]]) -> list[tuple[str, str, int]]:
    """Every version (tree, path, bytes) of an MLflow run folder in the mirror's history.

    A run folder ``<store>/<experiment>/<run>`` holds a ``meta.yaml`` and a ``metrics/`` folder
    (one file per metric, nested where its name has a ``/``); its bytes are those of its files
    but its artifacts.
    """
    paths = {path for _, path in listing}
    folders = {
        path[: -len("/meta.yaml")]
        for path in paths
        if path.endswith("/meta.yaml")
        and path.count("/") >= 2
        and f"{path[: -len('/meta.yaml')]}/metrics" in paths
    }
    versions = []
    for sha, path in listing:
        if path not in folders:
            continue
        try:
            entries = _git(mirror, "ls-tree", "-r", "-l", "-z", sha).decode("utf-8", "replace")
        except subprocess.CalledProcessError:  # a blob of that path, or a tree the snapshot lacks
            continue
        names, size = set(), 0
        for entry in filter(None, entries.split("\0")):
            meta, _, name = entry.partition("\t")
            parts = meta.split()
            names.add(name.split("/")[0])
            if name.split("/")[0] != "artifacts" and len(parts) == 4 and parts[3].isdigit():
                size += int(parts[3])
        if {"meta.yaml", "metrics"} <= names:
            versions.append((sha, path, size))
    return versions


def scan_mirror(
    mirror: Path, skip: frozenset[str] | set[str] = frozenset(), only: set[str] | None = None
) -> Iterator[dict[str, object]]:
    """One dict per run found in the mirror's history (and one per blob a reader refused).

    Blobs (and MLflow run folders' trees) in ``skip`` (already scanned) are passed over; with
    ``only``, every blob outside it too.
    """
    repository = _repository_name(mirror)
    listing = object_listing(mirror)
    for tree, path, size in mlflow_run_folders(mirror, listing):
        if tree in skip or (only is not None and tree not in only):
            continue
        commit = commit_holding(mirror, tree, path)
        if commit is None:
            continue
        for row in read_mlflow_runs(mirror, commit, path, tree):
            yield {"repo": repository, "commit": commit, "path": path, "blob": tree, "bytes": size} | row
    blobs = [
        (sha, path, size)
        for sha, path, size in candidate_blobs(mirror, listing)
        if sha not in skip and (only is None or sha in only)
    ]
    holders: dict[tuple[str, str], str] | None = None
    paths = {sha: (path, size) for sha, path, size in blobs}
    for sha, content in _blob_contents(mirror, [sha for sha, _, _ in blobs]):
        path, size = paths[sha]
        if content is None or not _looks_like_log(path, content[:_MAX_BYTES]):
            continue
        if path.lower().endswith(".ipynb") and not _NOTEBOOK_TABLE.search(content):
            continue
        rows = list(read_blob_runs(path, content))
        if not rows:
            continue
        if holders is None:
            holders = introducing_commits(mirror)
        commit = holders.get((sha, path)) or commit_holding(mirror, sha, path)
        for row in rows:
            yield {"repo": repository, "commit": commit, "path": path, "blob": sha, "bytes": size} | row


def main() -> None:
    """Scan mirrors for reward logs."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mirrors", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--retry",
        action="store_true",
        help="read again, with the readers as they are now, the blobs a reader refused in any scan "
        "file beside --out and the notebooks with console dicts (after a reader fix); new rows go to --out",
    )
    args = parser.parse_args()
    if args.retry:
        retry(args.mirrors, args.out)
        return
    done: set[str] = set()
    seen_blobs: dict[str, set[str]] = {}
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            row = json.loads(line)
            if row.get("scanned"):
                done.add(row["repo"])
            elif "blob" in row:
                seen_blobs.setdefault(row["repo"], set()).add(row["blob"])
    with args.out.open("a") as out:
        for mirror in args.mirrors:
            repository = _repository_name(mirror)
            if repository in done:
                continue
            found = 0
            try:
                for row in scan_mirror(mirror, seen_blobs.get(repository, set())):
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    found += "run_id" in row
            except subprocess.CalledProcessError as exc:
                print(f"{repository}: git failed: {exc.stderr.decode()[:200]}", file=sys.stderr)
            out.write(json.dumps({"repo": repository, "scanned": True, "runs": found}) + "\n")
            out.flush()
            print(f"{repository}: {found} runs", file=sys.stderr)


def retry(mirrors: list[Path], out: Path) -> None:
    """Read again the blobs readers refused, and notebooks the older scanner passed over."""
    refused: dict[str, set[str]] = {}
    read: set[str] = set()
    for file in sorted(out.parent.glob("scan*.jsonl")):
        for line in file.read_text().splitlines():
            row = json.loads(line)
            if "error" in row and not str(row["error"]).startswith("UnknownFormatError"):
                refused.setdefault(row["repo"], set()).add(row["blob"])
            elif "run_id" in row:
                read.add(row["blob"])
    with out.open("a") as handle:
        for mirror in mirrors:
            repository = _repository_name(mirror)
            listing = object_listing(mirror)
            notebooks = {sha for sha, path in listing if path.lower().endswith(".ipynb")}
            only = (refused.get(repository, set()) | notebooks) - read
            found = 0
            for row in scan_mirror(mirror, only=only):
                if "run_id" in row:
                    handle.write(json.dumps(row) + "\n")
                    found += 1
            handle.flush()
            print(f"{repository}: {found} runs read on retry", file=sys.stderr)


if __name__ == "__main__":
    main()
