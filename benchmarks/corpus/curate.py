"""Turn scan results into the corpus manifest: one copy of each run, with its source and licence.

Reads every ``scan*.jsonl`` that ``scan.py`` wrote (``benchmarks/_scratch/corpus/``) and the
bundled runs (``data/runs.csv``), and writes ``benchmarks/corpus/manifest.csv``:

- repositories of ``corpus-exclude.txt`` are left out, and so is any run whose points equal a run
  of theirs (none are known here, as their logs are never fetched: the check is by fingerprint of
  what the scans saw);
- a run committed twice (the same points) is kept once: the bundled copy if there is one, else
  the one of the oldest commit; a run that is the start of a longer one in the same repository
  (the same first 20 points: a notebook committed mid-run, then at the end) is kept at its
  longest; a run saved in one repository both rounded (a notebook table, console dicts) and in
  full (``trainer_state.json``) is kept in full (:func:`near_copies`);
- runs with fewer than :data:`MIN_POINTS` points or a constant reward are left out;
- the source is the repository, or the recipe of a monorepo (:data:`MONOREPOS`);
- the licence is read from the repository's licence file at the pinned commit.

Each run is then built once (``bayesgrpo.evaluate.corpus.build_corpus``) to take its checksum.

Usage::

    python benchmarks/corpus/curate.py [--scans DIR] [--mirrors /work/.mirror]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.evaluate.corpus import MANIFEST_COLUMNS, build_corpus, points_checksum
from bayesgrpo.evaluate.corpus.build import git_blob_id, mirror_path
from bayesgrpo.logs.readers.model_names import model_identity

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scan import points_fingerprint  # noqa: E402  (the scanner beside this script)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRATCH = ROOT / "benchmarks" / "_scratch" / "corpus"
MANIFEST = HERE / "manifest.csv"
EXCLUDE = ROOT.parent / "shared" / "corpus-exclude.txt"
#: Fewest logged points a corpus run has (a 10% cut still leaves a point or two).
MIN_POINTS = 20
#: Repositories whose recipes are independent sources: the recipe is the notebook or folder.
MONOREPOS = {"unslothai/notebooks", "volcengine/verl"}
_PLATFORM_PREFIX = re.compile(r"^(kaggle|huggingface course|hf course|colab)[-_ ]+", re.IGNORECASE)


def excluded_repositories(path: Path = EXCLUDE) -> set[str]:
    """Lower-cased ``owner/name`` of every repository the corpus must not use."""
    if not path.exists():
        return set()
    lines = (line.strip() for line in path.read_text().splitlines())
    return {line.lower() for line in lines if line and not line.startswith("#")}


def recipe_of(repo: str, path: str) -> str:
    """The source of a run: its repository, or ``repo:recipe`` for a monorepo's recipe."""
    if repo not in MONOREPOS:
        return repo
    parts = Path(path).parts
    if repo == "unslothai/notebooks":
        stem = Path(path).stem
        stem = _PLATFORM_PREFIX.sub("", stem)
        return f"{repo}:{re.sub(r'[^a-z0-9]+', '_', stem.lower()).strip('_')}"
    return f"{repo}:{'/'.join(parts[:2]) if len(parts) > 2 else parts[0]}"


_LICENCES = (
    ("Apache-2.0", re.compile(r"Apache License", re.IGNORECASE)),
    ("MIT", re.compile(r"\bMIT License\b|Permission is hereby granted, free of charge", re.IGNORECASE)),
    ("LGPL-3.0", re.compile(r"GNU LESSER GENERAL PUBLIC LICENSE", re.IGNORECASE)),
    ("AGPL-3.0", re.compile(r"GNU AFFERO GENERAL PUBLIC LICENSE", re.IGNORECASE)),
    ("GPL-3.0", re.compile(r"GNU GENERAL PUBLIC LICENSE\s+Version 3", re.IGNORECASE)),
    ("GPL-2.0", re.compile(r"GNU GENERAL PUBLIC LICENSE\s+Version 2", re.IGNORECASE)),
    (
        "BSD-3-Clause",
        re.compile(r"Redistribution and use in source and binary forms.*Neither the name", re.I | re.S),
    ),
    ("BSD-2-Clause", re.compile(r"Redistribution and use in source and binary forms", re.IGNORECASE)),
    ("CC-BY-4.0", re.compile(r"Creative Commons Attribution 4\.0", re.IGNORECASE)),
    ("Unlicense", re.compile(r"This is free and unencumbered software", re.IGNORECASE)),
)


def licence_of(mirror: Path, commit: str) -> str:
    """The SPDX id of the licence file at the root of ``commit``, or ``"none stated"``."""
    listing = subprocess.run(
        ["git", f"--git-dir={mirror}", "ls-tree", "--name-only", commit], capture_output=True, text=True
    ).stdout.split()
    for name in listing:
        if re.match(r"^(licen[cs]e|copying)(\.|$)", name, re.IGNORECASE):
            text = subprocess.run(
                ["git", f"--git-dir={mirror}", "cat-file", "-p", f"{commit}:{name}"],
                capture_output=True,
                text=True,
                errors="replace",
            ).stdout
            for spdx, pattern in _LICENCES:
                if pattern.search(text):
                    return spdx
            return "other (see its licence file)"
    return "none stated"


def _commit_time(mirror: Path, commit: str) -> int:
    out = subprocess.run(
        ["git", f"--git-dir={mirror}", "show", "-s", "--format=%ct", commit], capture_output=True, text=True
    ).stdout.strip()
    return int(out) if out else 0


def scanned_runs(scans: Path) -> pd.DataFrame:
    """Every run row of every scan file under ``scans``."""
    rows = []
    for file in sorted(scans.glob("scan*.jsonl")):
        for line in file.read_text().splitlines():
            row = json.loads(line)
            if "run_id" in row and row.get("commit"):
                rows.append(row)
    return pd.DataFrame(rows)


def bundled_rows(data_dir: Path) -> pd.DataFrame:
    """The bundled runs as manifest rows (their file under ``data/``, their points' checksum)."""
    from bayesgrpo import load_runs
    from bayesgrpo.logs.readers.load import detect_format

    catalogue = pd.read_csv(data_dir / "runs.csv", dtype=str, keep_default_na=False)
    rows = []
    for _, run in catalogue.iterrows():
        file = data_dir / run["file"]
        table = load_runs(file, warn=False)
        ids = list(table.points["run_id"].unique())
        file_run_id = "" if len(ids) == 1 else run["run_id"]
        points = table.points[table.points["run_id"] == (file_run_id or ids[0])]
        repo = run["source"].split(" ")[0]
        path = re.sub(r" \(.*\)$", "", run["path"])
        rows.append(
            {
                "run_id": run["run_id"],
                "source": recipe_of(repo, path),
                "repo": repo,
                "commit": run["commit"],
                "path": path,
                "blob": git_blob_id(file.read_bytes()),
                "bundled_file": run["file"],
                "format": detect_format(file),
                "reward_key": run["reward_key"],
                "file_run_id": file_run_id,
                "points_sha256": points_checksum(points["step"], points["reward"]),
                "n_points": len(points),
                "first_step": int(points["step"].min()),
                "last_step": int(points["step"].max()),
                "model": run["model"],
                "family": run["family"],
                "size_b": run["size_b"],
                "algorithm": run["algo"],
                "task": run["task"],
                "group_size": run["group_size"],
                "reward_min": run.get("reward_min", ""),
                "reward_max": run.get("reward_max", ""),
                "licence": re.sub(r" \(.*\)$", "", run["license"]),
                "why": "bundled with the package (data/runs.csv)",
                "fingerprint": _fingerprint(points),
            }
        )
    return pd.DataFrame(rows)


def _fingerprint(points: pd.DataFrame) -> str:
    return points_fingerprint(points["step"].to_numpy(), points["reward"].to_numpy(dtype=float))


#: Formats that print rounded values (a notebook table, console dicts): another copy of the run in
#: one of the others is kept instead.
_ROUNDED_FORMATS = ("notebook", "trl-console")
_SUMMARY = ("reward_first", "reward_last", "reward_lo", "reward_hi")


def near_copies(found: pd.DataFrame, tolerance: float = 1e-4) -> pd.Series:
    """Runs that repeat another run of their repository at another precision.

    A notebook's table rounds to 6 decimals and console dicts to 4 significant digits, so the same
    run saved in full by ``trainer_state.json`` has another fingerprint; W&B counts steps from 0
    where the trainer's console counts from 1, and may hold one point more. Within a repository, a
    run whose number of points is within one (or 2%) of another's and whose first, last, lowest and
    highest reward are within ``tolerance`` of that run's reward range is a copy; the copy of a
    format that does not round is kept.

    Returns
    -------
    Series of bool
        True for each row to drop.
    """
    rounded = found["format"].isin(_ROUNDED_FORMATS)
    order = found.assign(_rounded=rounded).sort_values("_rounded", kind="stable")
    drop = pd.Series(False, index=found.index)
    for _, group in order.groupby("repo", sort=False):
        kept: list[tuple[np.ndarray, int]] = []
        for index, row in group.iterrows():
            summary = row[list(_SUMMARY)].to_numpy(dtype=float)
            points = int(row["n_points"])
            scale = max(float(summary[3] - summary[2]), 1e-9)
            if any(
                abs(points - n) <= max(1, 0.02 * n) and np.all(np.abs(summary - other) <= tolerance * scale)
                for other, n in kept
            ):
                drop[index] = True
            else:
                kept.append((summary, points))
    return drop


def select(scans: Path, mirrors: Path, data_dir: Path) -> pd.DataFrame:
    """The manifest rows: bundled runs first, then one copy of each scanned run."""
    excluded = excluded_repositories()
    bundled = bundled_rows(data_dir)
    found = scanned_runs(scans)
    # rows of an older scan carry no head fingerprint: their whole-run fingerprint stands in
    found["head_fingerprint"] = found["head_fingerprint"].fillna(found["fingerprint"])
    # a blob holds several runs when it yields several sets of points (one blob scanned twice, in
    # two scan files, may name its one run differently)
    runs_in_blob = found.groupby("blob")["fingerprint"].transform("nunique")
    found["run_id"] = found["run_id"].where(runs_in_blob > 1, "")
    found = found[~found["repo"].str.lower().isin(excluded)]
    found = found[(found["n_points"] >= MIN_POINTS) & (found["reward_hi"] > found["reward_lo"])]
    found = found[~found["fingerprint"].isin(set(bundled["fingerprint"]))]
    found["commit_time"] = [
        _commit_time(mirror_path(mirrors, r), c) for r, c in zip(found["repo"], found["commit"], strict=True)
    ]
    # one copy of each run: the longest of those that share their first points, oldest commit first
    found = found.sort_values(["n_points", "commit_time"], ascending=[False, True])
    # (the shared start only within a repository: unrelated runs can share a flat start)
    found = found.drop_duplicates("fingerprint").drop_duplicates(["repo", "head_fingerprint"])
    found = found[~near_copies(found)]
    found = found.sort_values(["repo", "path", "commit_time"])
    reviewed = reviewed_sources()
    rows = []
    licences: dict[tuple[str, str], str] = {}
    for _, run in found.iterrows():
        review = source_review(reviewed, run["repo"], run["path"])
        if review.get("decision") == "out":
            continue
        mirror = mirror_path(mirrors, run["repo"])
        key = (run["repo"], run["commit"])
        if key not in licences:
            licences[key] = licence_of(mirror, run["commit"])
        stated = _stated(run, review)
        rows.append(
            {
                "run_id": _run_id(run),
                "source": recipe_of(run["repo"], run["path"]),
                "repo": run["repo"],
                "commit": run["commit"],
                "path": run["path"],
                "blob": run["blob"],
                "bundled_file": "",
                "format": run["format"],
                "reward_key": run["reward_key"] or "",
                "file_run_id": run["run_id"],
                "n_points": run["n_points"],
                "first_step": run["first_step"],
                "last_step": run["last_step"],
                "total_steps": "" if _missing(run.get("total_steps")) else run["total_steps"],
                "licence": licences[key],
                "why": review.get("why")
                or f"{run['format']} log of {run['n_points']} points committed to a public repository",
            }
            | stated
        )
    manifest = pd.concat([bundled.drop(columns="fingerprint"), pd.DataFrame(rows)], ignore_index=True)
    for column in MANIFEST_COLUMNS:
        if column not in manifest:
            manifest[column] = ""
    # a number the source does not state as one ("5? (inferred)") is left empty, never guessed
    for column in ("size_b", "group_size", "total_steps", "reward_min", "reward_max"):
        manifest[column] = pd.to_numeric(manifest[column].replace("", None), errors="coerce")
    manifest = manifest.fillna({c: "" for c in MANIFEST_COLUMNS if manifest[c].dtype == object})
    return manifest[list(MANIFEST_COLUMNS)]


#: Reward keys that name a score in 0 .. 1 by construction when every logged value lies there: a
#: rule-based verl score or an accuracy reward (1 for a right answer, 0 otherwise).
_SCORE_KEY = re.compile(
    r"(critic/score/mean|val-core/.*/(reward|acc)/mean|val/test_score|accuracy|correct)", re.I
)


def _stated_unit_score(run: pd.Series) -> bool:
    if run["reward_min"] is not None and not pd.isna(run["reward_min"]):
        return True
    key = run["reward_key"] or ""
    return bool(_SCORE_KEY.search(key)) and run["reward_lo"] >= 0.0 and run["reward_hi"] <= 1.0


SOURCES = HERE / "sources.csv"
#: What a reviewer read in each repository (``sources.csv``): keep it or not, and what it states.
_REVIEWED = ("model", "family", "size_b", "algorithm", "task", "group_size", "reward_min", "reward_max")


def reviewed_sources(path: Path = SOURCES) -> pd.DataFrame:
    """The review of each repository (``sources.csv``: repo, path_glob, decision, what it states)."""
    if not path.exists():
        return pd.DataFrame(columns=["repo", "path_glob", "decision", *_REVIEWED, "why", "evidence"])
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def source_review(reviewed: pd.DataFrame, repo: str, path: str) -> dict[str, str]:
    """The first review row of ``repo`` whose ``path_glob`` matches ``path`` (empty if none)."""
    for _, row in reviewed[reviewed["repo"] == repo].iterrows():
        if fnmatch.fnmatch(path, row["path_glob"] or "*"):
            return {k: str(v).strip() for k, v in row.items()}
    return {}


def _stated(run: pd.Series, review: dict[str, str]) -> dict[str, object]:
    """What the source states of a run: the log's own words first, then the reviewer's reading."""
    model = _given(run.get("model")) or review.get("model", "")
    identity = model_identity(model)
    stated: dict[str, object] = {
        "model": model,
        "family": _canonical_family(
            _given(run.get("family")) or review.get("family") or identity.get("family", "")
        ),
        "size_b": _given(run.get("size_b")) or review.get("size_b") or identity.get("size_b", ""),
        "algorithm": _given(run.get("algorithm")) or review.get("algorithm", ""),
        "task": review.get("task", ""),
        "group_size": review.get("group_size", ""),
        "reward_min": "",
        "reward_max": "",
    }
    if review.get("reward_min") and review.get("reward_max"):
        stated["reward_min"], stated["reward_max"] = review["reward_min"], review["reward_max"]
    elif _stated_unit_score(run):
        stated["reward_min"] = _stated_bound(run, "reward_min", 0.0)
        stated["reward_max"] = _stated_bound(run, "reward_max", 1.0)
    return stated


def _stated_bound(run: pd.Series, column: str, score_bound: float) -> float:
    return score_bound if _missing(run[column]) else float(run[column])


#: The family names the readers give (``bayesgrpo.logs.readers.model_names``), by lower case.
_FAMILIES = {
    name.lower(): name
    for name in (
        "DeepSeek",
        "Gemma",
        "Granite",
        "Llama",
        "Mistral",
        "OLMo",
        "Phi",
        "Qwen",
        "SmolLM",
        "gpt-oss",
    )
}


def _canonical_family(family: object) -> str:
    """A family as the readers name it (``qwen`` -> ``Qwen``); ``other`` and blanks stay empty."""
    text = "" if _missing(family) else str(family).strip()
    return _FAMILIES.get(text.lower(), "" if text.lower() in ("", "other") else text)


def _given(value: object) -> object:
    """``value``, or None where it is missing (NaN, None or empty)."""
    return None if _missing(value) else value


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value)) or value == ""


def _run_id(run: pd.Series) -> str:
    stem = re.sub(r"[^A-Za-z0-9]+", "_", f"{run['repo']}_{Path(run['path']).stem}").strip("_")
    suffix = f"{run['blob'][:7]}"
    if run["run_id"]:
        suffix += "_" + re.sub(r"[^A-Za-z0-9]+", "_", str(run["run_id"]))[-40:]
    return f"{stem[:80]}_{suffix}"


def main() -> None:
    """Write the manifest from the scans, then check every run builds to its checksum."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scans", type=Path, default=SCRATCH)
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--data", type=Path, default=ROOT / "data")
    parser.add_argument("--out", type=Path, default=MANIFEST)
    args = parser.parse_args()
    manifest = select(args.scans, args.mirrors, args.data)
    build = build_corpus(manifest, args.mirrors, SCRATCH / "files", args.data, check=False)
    read = build.table.runs.set_index("run_id")["points_sha256"]
    unbuilt = build.problems
    manifest = manifest[manifest["run_id"].isin(read.index)].copy()
    manifest["points_sha256"] = manifest["run_id"].map(read)
    manifest.to_csv(args.out, index=False)
    print(f"{len(manifest)} runs from {manifest['source'].nunique()} sources -> {args.out}")
    if len(unbuilt):
        print(unbuilt.to_string(index=False), file=sys.stderr)


if __name__ == "__main__":
    main()
