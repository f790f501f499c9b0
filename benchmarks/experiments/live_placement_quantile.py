"""Which quantile of the population's prefix shares places a run's range
(``LiveForecaster.placement_quantile``).

A run without a stated range is normalised by the whole range its prefix implies: the prefix's
range over a share read from the population's own-range runs of the nearest planned steps
(``live_placement_by_length.py``). The median share is the typical run's, but the two ways of
missing it do not cost the same: a range estimated too narrow caps the curve below where the run
goes (later points above every draw), one too wide only spreads the forecast. So a share below
the median, a wider range, may score better, at least once the shares say much: early in a run
the population's prefixes hold few points and their shares scatter from 0.1 to 1. Each of the 36
bundled runs given no range is updated by the population fitted without its source at several
cuts and quantiles (constant, and a ramp from the median at 10% of a run to 0.3 at 25%), and the
quantile of each cut is chosen for each source on the other sources' runs.

Usage::

    python benchmarks/_loso.py                                   # the populations (once)
    python benchmarks/experiments/live_placement_quantile.py     # -> results/live_placement_quantile.md
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
from live_placement_by_length import scored_variants, summarise  # noqa: E402

RESULTS = HERE / "results"
CUTS = (0.1, 0.175, 0.25, 0.35, 0.5)
#: ``label -> placement_quantile`` knots.
VARIANTS: dict[str, tuple[tuple[float, float], ...]] = {
    "0.5": ((0.0, 0.5),),
    "0.4": ((0.0, 0.4),),
    "0.3": ((0.0, 0.3),),
    "0.2": ((0.0, 0.2),),
    "ramp 0.5 at 10% -> 0.3 at 25%": ((0.1, 0.5), (0.25, 0.3)),
}


def cross_fitted(scored: pd.DataFrame, labels: list[str]) -> pd.DataFrame:
    """Per cut: each source's runs at the constant quantile with the lowest mean CRPS on the other
    sources' runs, against the median.
    """
    rows = []
    for cut, part in scored[scored["quantile"].isin(labels)].groupby("cut"):
        picked = []
        for source, own in part.groupby("source"):
            best = part[part["source"] != source].groupby("quantile")["crps"].mean().idxmin()
            picked.append(own[own["quantile"] == best].assign(chosen=float(best)))
        chosen = pd.concat(picked)
        median = part[part["quantile"] == "0.5"]
        rows.append(
            {
                "cut": cut,
                "quantile chosen (over sources)": f"{chosen['chosen'].min():g}-{chosen['chosen'].max():g}",
                "cover90: median -> chosen": (
                    f"{median['cover90'].mean():.3f} -> {chosen['cover90'].mean():.3f}"
                ),
                "median CRPS": f"{median['crps'].median():.3f} -> {chosen['crps'].median():.3f}",
                "mean CRPS": f"{median['crps'].mean():.3f} -> {chosen['crps'].mean():.3f}",
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    """Update the runs at each cut and quantile, score, write the report."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    variants = {label: {"placement_quantile": knots} for label, knots in VARIANTS.items()}
    scored = scored_variants(CUTS, variants, "quantile", args.seed, args.draws)
    constants = [label for label in VARIANTS if not label.startswith("ramp")]
    lines = [
        "# Which quantile of the population's prefix shares places a run's range",
        "",
        "Command: `python benchmarks/experiments/live_placement_quantile.py` "
        f"({time.perf_counter() - start:.0f} s; seed {args.seed}, {args.draws} draws). The bundled runs "
        "given no range whose update estimates it, each updated by the population fitted without its "
        "source, the range placed by the 12 own-range runs of the nearest planned steps at the given "
        "quantile of their shares (`LiveForecaster(placement_quantile=...)`). Scored on the later points "
        "in units of the run's logged range: predictive 50% / 90% coverage and share of later points below "
        "the median (mean over runs), CRPS (99 quantiles; median and mean over runs) and its median ratio "
        "to persistence's on the same points. The mid-run band factors are the shipped way's, learnt "
        "without each source with the median share.",
        "",
        "## All runs without a stated range",
        "",
        markdown_table(summarise(scored, ["cut", "quantile"])),
        "",
        "## By length",
        "",
        markdown_table(summarise(scored, ["length", "cut", "quantile"])),
        "",
        "## The constant quantile chosen without the run's source",
        "",
        markdown_table(cross_fitted(scored, constants)),
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    scored.to_csv(RESULTS / "live_placement_quantile_runs.csv", index=False)
    (RESULTS / "live_placement_quantile.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
