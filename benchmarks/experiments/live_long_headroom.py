"""Room above the estimated range for long runs only (``LiveForecaster.range_headroom``).

``live_band_early.py`` found the live band's early misses on the runs that estimate their range
are the long ones (more than 150 planned steps): their forecast's median sits below 72-80% of
their later points at 10-30% of a run. The curve of a run without a stated range is bounded by
the range the update estimates from the prefix. A long run's early prefix spans little of what
the run will reach, so the curve cannot climb far enough. ``live_takeover.py`` tried room above
the estimate for every run and found it hurt early (the population places such runs' level near
the top of their range, so a roomier range moved the whole early forecast up). Here the room is
given to the long runs only, at several sizes, and they are scored on their own. The short runs
are unchanged by construction.

Usage::

    python benchmarks/_loso.py                               # the populations (once)
    python benchmarks/experiments/live_long_headroom.py      # -> results/live_long_headroom.md
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(BENCHMARKS))
sys.path.insert(0, str(HERE))
from _markdown import markdown_table  # noqa: E402
from live_band_early import LONG_RUN_STEPS  # noqa: E402
from live_placement_by_length import scored_variants  # noqa: E402

RESULTS = HERE / "results"
HEADROOMS = (0.0, 0.25, 0.5, 1.0, 2.0)
CUTS = (0.1, 0.25, 0.5)


def cross_fitted_choice(scored: pd.DataFrame) -> pd.DataFrame:
    """Per length and cut: each source's runs scored at the headroom with the lowest mean CRPS on
    the other sources' runs of that length and cut (what a headroom chosen on these runs would give
    a source it never saw).
    """
    rows = []
    for (length, cut), part in scored.groupby(["length", "cut"]):
        chosen = []
        for source, own in part.groupby("source"):
            others = part[part["source"] != source]
            if others.empty:
                continue
            best = others.groupby("headroom")["crps"].mean().idxmin()
            chosen.append(own[own["headroom"] == best].assign(chosen=best))
        picked = pd.concat(chosen)
        drawn = part[(part["headroom"] == 0.0) & part["run_id"].isin(picked["run_id"])]
        rows.append(
            {
                "length": length,
                "cut": cut,
                "runs": picked["run_id"].nunique(),
                "headroom chosen (range over sources)": "{:g}-{:g}".format(
                    picked["chosen"].min(), picked["chosen"].max()
                ),
                "cover90: none -> chosen": f"{drawn['cover90'].mean():.3f} -> {picked['cover90'].mean():.3f}",
                "median CRPS": f"{drawn['crps'].median():.3f} -> {picked['crps'].median():.3f}",
                "mean CRPS": f"{drawn['crps'].mean():.3f} -> {picked['crps'].mean():.3f}",
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    """Update the long runs at each cut and headroom, score, write the report."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    # the range placed by all the population's runs, as when this experiment was first run (the
    # default since places it by the runs of the nearest planned steps: live_placement_by_length.py)
    variants = {
        h: {"range_headroom": h, "long_run_steps": None, "placement_neighbours": None} for h in HEADROOMS
    }
    scored = scored_variants(CUTS, variants, "headroom", args.seed, args.draws)
    summary = (
        scored.groupby(["length", "cut", "headroom"])
        .agg(
            runs=("run_id", "nunique"),
            cover50=("cover50", "mean"),
            cover90=("cover90", "mean"),
            below_median=("below_median", "mean"),
            crps_median=("crps", "median"),
            crps_mean=("crps", "mean"),
        )
        .reset_index()
    )
    lines = [
        "# Room above the estimated range, for long runs only",
        "",
        "Command: `python benchmarks/experiments/live_long_headroom.py` "
        f"({time.perf_counter() - start:.0f} s; "
        f"seed {args.seed}, {args.draws} draws). The bundled runs given no range whose update estimates it "
        f"and that are planned for more than {LONG_RUN_STEPS} steps, each updated by the population fitted "
        "without its source (`LiveForecaster(range_headroom=h)`: the estimated range's top raised by h x "
        "its width), scored on their later points in units of the run's logged range: coverage of the "
        "predictive 50% / 90% band and the share of later points below its median (mean over runs), CRPS "
        "(99 quantiles; median and mean over runs).",
        "",
        markdown_table(summary),
        "",
        "## The headroom chosen without the run's source",
        "",
        "Per length and cut, each source's runs get the headroom of the grid with the lowest mean CRPS "
        "on the other sources' runs of the same length and cut (a source alone in its group keeps none "
        "and is left out).",
        "",
        markdown_table(cross_fitted_choice(scored)),
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "live_long_headroom.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
