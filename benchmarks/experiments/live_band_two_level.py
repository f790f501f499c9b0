"""The live band's stretch by quantile level: the 50% band and the 90% band's tails each matched.

The shipped stretch (``bayesgrpo.questions.band_stretch``, ``benchmarks/live_band_stretch.py``)
scales each side of the predictive band about its median by one factor, matched so that 5% of later
points lie beyond the 90% band's side. It brings the 90% band to 89-90% in the middle of a run, and
widens the 50% band too (0.52 -> 0.61 at the 50% cut), which was already wide on the runs that do
not rise. Here each side gets two factors instead: one for the offset of the 25/75% quantile (matched
so that 25% of later points lie beyond it) and one for the 5/95% quantile (5% beyond), the offsets
between and beyond them mapped piecewise-linearly (a monotone map of the draws, so still draws).
Same forecasts (``live_band_stretch.py``'s cache), same groups (rising or not, per knot), same
cross-fitting by source.

Usage::

    python benchmarks/live_band_stretch.py                  # the forecasts, cached (once)
    python benchmarks/experiments/live_band_two_level.py   # -> results/live_band_two_level.md
    python benchmarks/experiments/live_band_two_level.py --stated
    # -> results/live_band_two_level_stated.md: the runs that state a range, given it
    python benchmarks/experiments/live_band_two_level.py --stated --knots 0.15 0.2 0.25 0.3 0.35
    # -> results/live_band_two_level_stated_knots_0.15_0.2_0.25_0.3_0.35.md (earlier in a run)
    python benchmarks/experiments/live_band_two_level.py --knots 0.1 0.25
    # -> results/live_band_two_level_knots_0.1_0.25.md: the live band's early cuts, three maps
    python benchmarks/experiments/live_band_two_level.py --knots 0.1 0.25 --by-kind
    # -> ..._by_kind.md: the factors of runs read as scores and of the others learnt apart

With ``--stated`` the forecasts are the 24 runs whose metadata states a reward range, each given
it (``live_band_stretch.py``'s stated-range cache, cut at 40-80% of their steps): the kind the
package can tell apart (``BandStretch.stated_range``), so a map of their own could be shipped.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(BENCHMARKS))
from _markdown import markdown_table  # noqa: E402
from live_band_stretch import (  # noqa: E402
    LEVELS,
    cached_forecasts,
    per_run_scores,
    stretched_quantiles,
    summary_rows,
)

from bayesgrpo.evaluate.backtest.band_stretch import FACTOR_GRID, MIN_RUNS  # noqa: E402

RESULTS = HERE / "results"
#: The maps scored beside the band as drawn: label -> :func:`learnt`'s mode.
MAPS = {
    "one factor a side (shipped)": "one",
    "two factors a side": "two",
    "50% band only (90% as drawn)": "inner",
}
#: Quantile columns: the median, the 50% band's edges, the 90% band's edges.
MEDIAN, INNER, OUTER = 49, {"below": 24, "above": 74}, {"below": 4, "above": 94}


def share_beyond(frame: pd.DataFrame, column: int, factor: float, side: str) -> float:
    """Mean over runs of the share of later points beyond ``median + factor (q_column - median)``."""
    y, q, median = frame["y"].to_numpy(), frame[f"q{column}"].to_numpy(), frame[f"q{MEDIAN}"].to_numpy()
    edge = median + factor * (q - median)
    beyond = y > edge if side == "above" else y < edge
    return float(pd.Series(beyond).groupby(frame["run_id"].to_numpy()).mean().mean())


def matched(frame: pd.DataFrame, column: int, side: str, target: float) -> float:
    """The grid factor whose edge leaves ``target`` of the points beyond it."""
    shares = np.array([share_beyond(frame, column, float(f), side) for f in FACTOR_GRID])
    return float(FACTOR_GRID[int(np.argmin(np.abs(shares - target)))])


def learnt(frame: pd.DataFrame, mode: str) -> dict[tuple[float, bool, str], tuple[float, float]]:
    """Per (knot, rising, side): (inner, outer) factors. ``mode``: ``"one"`` the outer factor for
    both, ``"two"`` each matched, ``"inner"`` the inner matched and the outer edge left as drawn.
    """
    out = {}
    for (cut, rising), part in frame.groupby(["cut", "rising"]):
        for side in ("below", "above"):
            if part["run_id"].nunique() < MIN_RUNS:
                out[(cut, rising, side)] = (1.0, 1.0)
                continue
            outer = 1.0 if mode == "inner" else matched(part, OUTER[side], side, 0.05)
            inner = outer if mode == "one" else matched(part, INNER[side], side, 0.25)
            out[(cut, rising, side)] = (inner, outer)
    return out


def mapped_quantiles(frame: pd.DataFrame, factors: np.ndarray) -> np.ndarray:
    """The 99 quantiles mapped: offsets up to the inner edge times its factor, then linear to the
    outer edge's stretched offset and on beyond it. ``factors``: (N, 4) below-inner, below-outer,
    above-inner, above-outer.
    """
    q = frame[[f"q{i}" for i in range(len(LEVELS))]].to_numpy()
    median = q[:, [MEDIAN]]
    out = np.empty_like(q)
    for side, (inner_col, outer_col, columns) in {
        "below": (INNER["below"], OUTER["below"], slice(0, MEDIAN)),
        "above": (INNER["above"], OUTER["above"], slice(MEDIAN, None)),
    }.items():
        k = 0 if side == "below" else 2
        a, c = factors[:, [k]], factors[:, [k + 1]]
        o50, o90 = q[:, [inner_col]] - median, q[:, [outer_col]] - median
        d = q[:, columns] - median
        span = np.where(np.abs(o90 - o50) > 1e-12, o90 - o50, 1e-12)
        b = np.maximum((c * o90 - a * o50) / span, 0.05)
        inside = np.abs(d) <= np.abs(o50)
        out[:, columns] = median + np.where(inside, a * d, a * o50 + b * (d - o50))
    return out


def main() -> None:
    """Cross-fit both maps by source, score them beside the band as drawn, write the table."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--stated", action="store_true", help="the runs that state a range, given it")
    parser.add_argument("--knots", type=float, nargs="+", help="cuts other than live_band_stretch.py's")
    parser.add_argument(
        "--by-kind",
        action="store_true",
        help="learn the factors of runs read as scores and of runs whose range is estimated apart "
        "(the package tells the two apart: LiveForecaster.read_unit_score)",
    )
    args = parser.parse_args()
    start = time.perf_counter()
    if args.knots:
        import live_band_stretch

        setattr(live_band_stretch, "STATED_KNOTS" if args.stated else "KNOTS", tuple(args.knots))
    frame = cached_forecasts(0, 1000, stated=args.stated)
    flags = (" --stated" if args.stated else "") + (
        " --knots " + " ".join(f"{k:g}" for k in args.knots) if args.knots else ""
    )
    flags += " --by-kind" if args.by_kind else ""
    kinds = frame["range_source"].to_numpy() if args.by_kind else np.full(len(frame), "all")
    rows = []
    for cut, at in frame.assign(kind=kinds).groupby("cut"):
        at = at.reset_index(drop=True)
        for label, mode in MAPS.items():
            factors = np.ones((len(at), 4))
            for source, kind in at[["source", "kind"]].drop_duplicates().itertuples(index=False):
                held = (at["source"] == source).to_numpy()
                same_kind = (at["kind"] == kind).to_numpy()
                table = learnt(at[~held & same_kind], mode)
                for i in np.flatnonzero(held & same_kind):
                    key = (cut, bool(at.at[i, "rising"]))
                    none = (1.0, 1.0)  # no run of the group left once the source is held out
                    factors[i] = [*table.get((*key, "below"), none), *table.get((*key, "above"), none)]
            if mode == "one":
                quantiles = stretched_quantiles(at, factors[:, [1, 3]])
            else:
                quantiles = mapped_quantiles(at, factors)
            for band, q in (("as drawn", stretched_quantiles(at, np.ones((len(at), 2)))), (label, quantiles)):
                if band == "as drawn" and mode != "one":
                    continue
                summary = summary_rows(cut, band, per_run_scores(at, q), by_rise=False)
                rows += summary[:1] if args.stated else summary
    cuts = "/".join(f"{c * 100:g}" for c in sorted(frame["cut"].unique())) + "% of their steps"
    what = (
        f"{frame['run_id'].nunique()} bundled runs that state a reward range, each given it, cut at {cuts}"
        if args.stated
        else f"60 bundled runs, live path, no range given, cut at {cuts}"
    )
    lines = [
        "# The live band's stretch by quantile level"
        + (": runs given their stated range" if args.stated else ""),
        "",
        "Command: `python benchmarks/experiments/live_band_two_level.py" + flags + "` "
        f"({time.perf_counter() - start:.0f} s; "
        "the forecasts of `benchmarks/live_band_stretch.py`, seed 0)",
        "",
        f"{what}. Factors learnt per "
        "cut, for rising and other updates apart, on the other sources' runs (cross-fitted by source)"
        + (
            ", for runs read as scores on 0 .. 1 and runs whose range is estimated apart. "
            if args.by_kind
            else ". "
        )
        + "`one factor a side`: the shipped stretch (5% beyond each side of the 90% band). `two factors a "
        "side`: the 25/75% quantile's offset matched to 25% beyond it and the 5/95% quantile's to 5%, the "
        "offsets mapped piecewise-linearly. `50% band only`: the 25/75% offset matched, the 5/95% "
        "quantile left where it was drawn. Coverage: mean over runs; CRPS: per-run mean over 99 quantiles, "
        "units of the run's logged range.",
        "",
        markdown_table(pd.DataFrame(rows)),
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    name = "live_band_two_level" + ("_stated" if args.stated else "")
    name += "_knots_" + "_".join(f"{k:g}" for k in args.knots) if args.knots else ""
    name += ("_by_kind" if args.by_kind else "") + ".md"
    (RESULTS / name).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
