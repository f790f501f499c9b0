"""Build the benchmark corpus from its manifest and write its data card.

Every run of ``manifest.csv`` is taken out of its repository's git mirror at the pinned commit
(checked against its blob id), read through ``bayesgrpo.load_runs`` and checked against its
points' checksum (``bayesgrpo.evaluate.corpus.build_corpus``). The runs are written, never
committed, to ``benchmarks/_scratch/corpus/built/`` (``points.csv.gz``, ``runs.csv``: one row a
run with its source and fold), and the counts of the data card (``README.md`` beside this file)
are regenerated from what was built.

Mirrors are bare git repositories under ``--mirrors`` named ``<owner>+<name>/repo``; the search
tool's ``fetch`` lays them out so. A run whose mirror is missing is listed with the repositories to
fetch; any other problem (a commit that lacks the file, a reader error, a checksum that differs)
is a failure: exit status 1.

Usage::

    python benchmarks/corpus/build.py [--mirrors /work/.mirror] [--no-card]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.evaluate.corpus import build_corpus, curve_shape, length_class, read_manifest
from bayesgrpo.evaluate.corpus.shapes import LONG
from bayesgrpo.evaluate.corpus.splits import SEALED

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = ROOT / "benchmarks" / "_scratch" / "corpus"
CARD = HERE / "README.md"
#: What the data card counts runs and sources by.
CARD_COLUMNS = (
    *("fold", "family", "size", "algorithm", "task"),
    *("format", "length", "licence", "stated range", "shape"),
)
_BEGIN, _END = "<!-- counts: begin (build.py writes this part) -->", "<!-- counts: end -->"


def _size_class(size_b: float) -> str:
    if not np.isfinite(size_b):
        return "not stated"
    for bound, label in ((1.0, "< 1B"), (4.0, "1-3B"), (10.0, "4-9B"), (30.0, "10-29B")):
        if size_b < bound:
            return label
    return "30B+"


def _algorithm_class(text: str) -> str:
    upper = (text or "").upper()
    for name in ("DAPO", "GSPO", "RLOO", "GRPO", "PPO", "GPG", "REINFORCE"):
        if name in upper:
            return name
    return "not stated"


def run_facts(points: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row a run: what the data card counts (family, size, algorithm, format, ... shape)."""
    by_run = points.sort_values(["run_id", "step"]).groupby("run_id", sort=False)
    shape = by_run["reward"].apply(lambda r: curve_shape(r.to_numpy()))
    last = by_run["step"].max()
    n_points = by_run.size()
    facts = runs.set_index("run_id")
    stated = facts["reward_min"].notna() & facts["reward_max"].notna()
    return pd.DataFrame(
        {
            "source": facts["source"],
            "fold": facts["fold"],
            "family": facts["family"].fillna("not stated").astype(str).str.lower(),
            "size": facts["size_b"].astype(float).map(_size_class),
            "size_b": facts["size_b"].astype(float),
            "algorithm": facts["algorithm"].fillna("").astype(str).map(_algorithm_class),
            "task": facts["task"]
            .fillna("")
            .astype(str)
            .str.strip()
            .str.lower()
            .replace({"": "not stated", "?": "not stated"}),
            "format": facts["format"].fillna("").astype(str),
            "licence": facts["licence"].fillna("none stated").astype(str),
            "stated range": stated.map({True: "stated (a score)", False: "not stated"}),
            "length": last.reindex(facts.index).map(length_class),
            "points": n_points.reindex(facts.index),
            "shape": shape.reindex(facts.index),
        }
    )


def _count_table(facts: pd.DataFrame, column: str) -> str:
    grouped = facts.groupby(column)
    table = pd.DataFrame({"runs": grouped.size(), "sources": grouped["source"].nunique()})
    table = table.sort_values("runs", ascending=False)
    lines = [f"| {column} | runs | sources |", "|---|---|---|"]
    lines += [f"| {name} | {row.runs} | {row.sources} |" for name, row in table.iterrows()]
    return "\n".join(lines)


def card_counts(facts: pd.DataFrame, problems: pd.DataFrame) -> str:
    """The generated part of the data card."""
    stated = facts[facts["stated range"] != "not stated"]
    sealed = facts[facts["fold"] == SEALED]
    falling = facts["shape"].isin(["peak then fall", "collapse"]).sum()
    named = facts[facts["family"] != "not stated"]
    families_10 = (named.groupby("family").size() >= 10).sum()
    stated_families = stated.loc[stated["family"] != "not stated", "family"].nunique()
    stated_sizes = stated["size_b"].dropna().nunique()
    from bayesgrpo.logs.readers.load import READERS

    formats = set(facts["format"])
    rows = [
        ("runs", len(facts), ">= 400"),
        ("independent sources", facts["source"].nunique(), ">= 60"),
        ("model families with 10+ runs", int(families_10), ">= 6"),
        ("runs on a stated reward range", len(stated), ">= 80"),
        ("... their families / sizes", f"{stated_families} / {stated_sizes}", ">= 3 / >= 4"),
        ("runs logged to step 1,000 or later", int((facts["length"] == LONG).sum()), ">= 40"),
        ("runs that peak then fall or collapse", int(falling), ">= 30"),
        ("reader formats with a run", f"{len(formats & set(READERS))} of {len(READERS)}", "all"),
    ]
    lines = [
        f"{len(facts)} runs from {facts['source'].nunique()} sources "
        f"({facts['source'].str.split(':').str[0].nunique()} repositories); "
        f"{len(sealed)} runs from {sealed['source'].nunique()} sources in the sealed fold; "
        f"{len(problems)} runs of the manifest not built here.",
        "",
        "| the corpus has | count | the corpus issue asks |",
        "|---|---|---|",
        *(f"| {name} | {count} | {target} |" for name, count, target in rows),
        "",
        f"Formats with no run yet: {', '.join(sorted(set(READERS) - formats)) or 'none'}.",
        "",
    ]
    for column in CARD_COLUMNS:
        lines += [f"### By {column}", "", _count_table(facts, column), ""]
    return "\n".join(lines)


def write_card(counts: str, card: Path = CARD) -> None:
    """Replace the generated part of the data card (between its markers) with ``counts``."""
    text = card.read_text()
    head, _, rest = text.partition(_BEGIN)
    _, _, tail = rest.partition(_END)
    card.write_text(f"{head}{_BEGIN}\n{counts}\n{_END}{tail}")


def main() -> None:
    """Build the corpus and write its data card."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--manifest", type=Path, default=HERE / "manifest.csv")
    parser.add_argument("--data", type=Path, default=ROOT / "data")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-card", action="store_true", help="do not rewrite the data card")
    args = parser.parse_args()
    start = time.perf_counter()
    manifest = read_manifest(args.manifest)
    build = build_corpus(manifest, args.mirrors, args.out / "files", args.data)
    built = args.out / "built"
    built.mkdir(parents=True, exist_ok=True)
    build.table.points.to_csv(built / "points.csv.gz", index=False)
    build.table.runs.to_csv(built / "runs.csv", index=False)
    facts = run_facts(build.table.points, build.table.runs)
    facts.to_csv(built / "facts.csv")
    print(
        f"built {len(build.table.runs)} of {len(manifest)} runs from "
        f"{build.table.runs['source'].nunique()} sources in {time.perf_counter() - start:.0f} s -> {built}"
    )
    if not args.no_card:
        write_card(card_counts(facts, build.problems))
    if build.missing_mirrors:
        print("fetch these repositories first: " + " ".join(build.missing_mirrors), file=sys.stderr)
    failed = build.problems[build.problems["problem"] != "no mirror"]
    if len(failed):
        print(failed.to_string(index=False), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
