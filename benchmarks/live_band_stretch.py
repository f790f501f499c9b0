"""Learn the live predictive band's stretch (mid-run, rising or not) and ship it.

The live backtest's split (``benchmarks/live_backtest.py``: every bundled run updated by the
population fitted without its source, no stated range given, as users' runs come), cut at the
knots of progress :data:`KNOTS`, the band as drawn (``LiveForecaster(band_stretch=None)``). Each
update is flagged as still rising or not the way the package flags it
(:func:`bayesgrpo.questions.band_stretch.rising_runs`), and the factors are learnt
(:func:`bayesgrpo.evaluate.backtest.learn_band_stretch`): once on every source (what the package
ships, ``bayesgrpo/_data/live_band_stretch.json``) and once without each source (what the
backtests score that source's runs with, ``results/live_band_stretch.json``). The window
:data:`WINDOW` is where ``benchmarks/experiments/live_rise_recalibration.py`` found the stretch
both calibrated and sharper by the CRPS (40-50% of a run); at 30% it costs twice the CRPS and
from 70% the band holds 90% as drawn.

The report (``results/live_band_stretch.md``) scores the band as drawn and stretched by the
cross-fitted factors at each knot: coverage of the 50% and 90% bands and the CRPS (99 quantiles),
for all updates and for the rising and other ones.

Usage::

    python benchmarks/_loso.py                # the populations (once, about 30 min on 2 cores)
    python benchmarks/live_band_stretch.py    # forecasts cached in _scratch/live_band_stretch (~3 min)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _loso import loso_populations  # noqa: E402
from _markdown import markdown_table  # noqa: E402

RESULTS = HERE / "results"
SCRATCH = HERE / "_scratch" / "live_band_stretch"
SHIPPED = HERE.parent / "bayesgrpo" / "_data" / "live_band_stretch.json"
#: Progress at which the factors are learnt (cuts of each run's step span). By 0.45 the live
#: band's noise has turned from the Student-t to the run's recent residuals
#: (:data:`bayesgrpo.questions.live.RECENT_RESIDUALS_FROM`): the factors learnt there are the
#: residual band's.
KNOTS = (0.4, 0.45, 0.5, 0.6, 0.7, 0.8)
#: Progress inside which the package stretches the band.
WINDOW = (0.35, 0.65)
#: The knots and window of the factors of runs whose range is stated (given to the update),
#: learnt apart on those runs (:attr:`BandStretch.stated_range`).
STATED_KNOTS = (0.4, 0.45, 0.5, 0.6, 0.7, 0.8)
STATED_WINDOW = (0.35, 0.85)
#: The knots and window of the early factors of runs whose range is estimated
#: (:attr:`BandStretch.early`): the 50% band's edges alone, the 90% band's kept as drawn
#: (``benchmarks/experiments/live_band_two_level.py --knots 0.1 0.25 --by-kind``). The window
#: starts at 0: an update cut at 10% of a run's logged steps sits at 5-10% of its planned ones.
EARLY_KNOTS = (0.1, 0.25)
EARLY_WINDOW = (0.0, 0.35)
#: Fewest runs of a group to learn its early factors from: early in a run few updates rise (4
#: and 7 of the 36 at 10% and 25%), too few to set the shape of their band's centre; they keep 1.
EARLY_MIN_RUNS = 10
LEVELS = np.linspace(0.01, 0.99, 99)
COMMAND = "python benchmarks/live_band_stretch.py"


def cross_fitted_stretches(table) -> dict:
    """``run_id -> BandStretch`` learnt without the run's source (``results/live_band_stretch.json``):
    what the backtests score a run's stretched band with.
    """
    from bayesgrpo.evaluate.backtest import source_group
    from bayesgrpo.questions.band_stretch import BandStretch

    path = RESULTS / "live_band_stretch.json"
    if not path.exists():
        raise SystemExit(f"{path} is missing: run `{COMMAND}` first")
    without = {
        source: BandStretch.from_dict(mapping)
        for source, mapping in json.loads(path.read_text())["without_source"].items()
    }
    stretches = {}
    for row in table.runs.to_dict("records"):
        source = source_group(row)
        if source not in without:
            raise SystemExit(f"{path} has no factors learnt without source {source!r}: rerun `{COMMAND}`")
        stretches[str(row["run_id"])] = without[source]
    return stretches


def stretch_file_hash() -> str:
    """A hash of the cross-fitted factors (a backtest's cache key: new factors re-run its forecasts)."""
    import hashlib

    path = RESULTS / "live_band_stretch.json"
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12] if path.exists() else "none"


def forecasts(cut: float, seed: int, n_draws: int, stated: bool = False) -> pd.DataFrame:
    """Every later point of every bundled run at one cut: its reward, the band's 99 quantiles,
    the update's rising flag and progress (reward units over the run's logged range).

    ``stated``: only the runs whose metadata states a reward range, each given its range (what
    :attr:`BandStretch.stated_range` is learnt on); otherwise every run, no range given.
    """
    from bayesgrpo.evaluate.backtest import cut_points, live_forecasters, planned_horizon, source_group
    from bayesgrpo.evaluate.backtest.cuts import prefix_table, run_points
    from bayesgrpo.model.datasets import load_bundled
    from bayesgrpo.questions.band_stretch import rising_runs

    sys.path.insert(0, str(HERE))
    from live_backtest import range_kinds, without_stated_range

    bundled = load_bundled(warn=False)
    kinds = range_kinds(bundled)
    table = (
        bundled.select([r for r in bundled.run_ids if kinds[r] == "stated"])
        if stated
        else without_stated_range(bundled)
    )
    sources = {row["run_id"]: source_group(row) for row in bundled.runs.to_dict("records")}
    populations = loso_populations(bundled)
    lives = live_forecasters(
        populations, table.run_ids, n_draws, seed, band_stretch=dict.fromkeys(table.run_ids)
    )
    frames = []
    for run_id in table.run_ids:
        run = table.select([run_id])
        points = run_points(run, run_id)
        spread = float(points["reward"].max() - points["reward"].min())
        cut_at = cut_points(points, cut)
        if cut_at.held_out.empty or len(cut_at.observed) < 5 or spread <= 0:
            continue
        horizon = planned_horizon(run)
        update = lives[run_id].update(prefix_table(run, cut_at.observed), horizon=horizon)
        steps = cut_at.held_out["step"].to_numpy(dtype=float)
        draws = update.reward_draws(steps, band="predictive")
        quantiles = np.quantile(draws, LEVELS, axis=0).T / spread
        first = float(points["step"].iloc[0])
        frame = pd.DataFrame(quantiles, columns=[f"q{i}" for i in range(len(LEVELS))])
        frames.append(
            frame.assign(
                run_id=run_id,
                source=sources[run_id],
                range=kinds[run_id],
                cut=cut,
                progress=(update.step - first) / (update.horizon_step - first),
                rising=bool(rising_runs(update.curve_draws)[0]),
                range_source=update.reward_range[2],
                y=cut_at.held_out["reward"].to_numpy(dtype=float) / spread,
            )
        )
    return pd.concat(frames, ignore_index=True)


def cached_forecasts(
    seed: int, n_draws: int, stated: bool = False, knots: tuple[float, ...] | None = None
) -> pd.DataFrame:
    """:func:`forecasts` at every knot (:data:`KNOTS`, :data:`STATED_KNOTS` or ``knots``), each
    cached on disk under a hash of the package's code.
    """
    from live_backtest import code_hash

    code = code_hash()[:12]
    frames = []
    for cut in knots or (STATED_KNOTS if stated else KNOTS):
        kind = "_stated" if stated else ""
        path = SCRATCH / f"seed{seed}_draws{n_draws}_cut{cut:g}{kind}_{code}.parquet"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            forecasts(cut, seed, n_draws, stated).to_parquet(path)
        frames.append(pd.read_parquet(path))
    return pd.concat(frames, ignore_index=True)


#: The band edges the learner reads by name, and their columns of the 99 quantiles (``q{i}`` is
#: the quantile at ``LEVELS[i]``: ``q49`` the median, ``q4``/``q94`` the 90% band's edges).
EDGE_COLUMNS = {"q05": 4, "q25": 24, "q50": 49, "q75": 74, "q95": 94}


def band_edges(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``frame`` as :func:`bayesgrpo.evaluate.backtest.learn_band_stretch` reads them:
    the band's edges by name (:data:`EDGE_COLUMNS`) beside the run, cut, rise flag and reward.

    A frame of its own: the edges' names are also names of the 99 quantiles' columns (``q50`` is
    the quantile at level 0.51), which they must not overwrite.
    """
    edges = {name: frame[f"q{i}"].to_numpy() for name, i in EDGE_COLUMNS.items()}
    return frame[["run_id", "cut", "rising", "y"]].assign(**edges)


def stretched_quantiles(frame: pd.DataFrame, factors: np.ndarray) -> np.ndarray:
    """The 99 quantiles of each row stretched about the median by its (below, above) factors, or
    with four a row (below, above, then the 50% band's below, above) mapped by quantile level as
    the package maps a band's draws (:func:`bayesgrpo.model.draws.stretch_offsets`).
    """
    from bayesgrpo.model.draws import stretch_offsets

    q = frame[[f"q{i}" for i in range(len(LEVELS))]].to_numpy()
    median = q[:, [49]]
    if factors.shape[1] == 2 or np.array_equal(factors[:, 2:], factors[:, :2]):
        factor = np.where(q >= median, factors[:, [1]], factors[:, [0]])
        return median + factor * (q - median)
    offset = q - median
    above = stretch_offsets(offset, offset[:, [74]], offset[:, [94]], factors[:, [3]], factors[:, [1]])
    below = stretch_offsets(offset, offset[:, [24]], offset[:, [4]], factors[:, [2]], factors[:, [0]])
    return median + np.where(q >= median, above, below)


def stretch_factors(frame: pd.DataFrame, stretches: list, inner: bool = False) -> np.ndarray:
    """Per row of ``frame``: the (below, above) factors its :class:`BandStretch` (``stretches``,
    one a row) gives at the row's progress and rise flag; with ``inner``, then the 50% band's
    (below, above) (:meth:`BandStretch.inner_factors`).
    """
    rows = zip(stretches, frame["progress"], frame["rising"], strict=True)
    return np.array(
        [
            stretch.factors(float(progress), bool(rising))
            + (stretch.inner_factors(float(progress), bool(rising)) if inner else ())
            for stretch, progress, rising in rows
        ]
    )


def per_run_scores(frame: pd.DataFrame, q: np.ndarray) -> pd.DataFrame:
    """Per run: 50% and 90% coverage and the mean CRPS (quantile-score average)."""
    y = frame["y"].to_numpy()[:, None]
    pinball = np.maximum(LEVELS * (y - q), (LEVELS - 1.0) * (y - q))
    scored = pd.DataFrame(
        {
            "run_id": frame["run_id"].to_numpy(),
            "rising": frame["rising"].to_numpy(),
            "range": frame["range"].to_numpy(),
            "cover90": (y[:, 0] >= q[:, 4]) & (y[:, 0] <= q[:, 94]),
            "cover50": (y[:, 0] >= q[:, 24]) & (y[:, 0] <= q[:, 74]),
            "crps": 2.0 * pinball.mean(axis=1),
        }
    )
    return scored.groupby(["run_id", "rising", "range"], as_index=False).mean()


def summary_rows(cut: float, band: str, scored: pd.DataFrame, by_rise: bool = True) -> list[dict]:
    """Coverage and CRPS of one band at one cut over all runs, by rise (``by_rise``) and by range."""
    groups = [("all", scored)]
    if by_rise:
        groups += [("rising", scored[scored["rising"]]), ("not rising", scored[~scored["rising"]])]
    groups += [
        ("no stated range", scored[scored["range"] == "unstated"]),
        ("stated range", scored[scored["range"] == "stated"]),
    ]
    return [
        {
            "cut": cut,
            "band": band,
            "runs": runs,
            "n": len(part),
            "cover50": part["cover50"].mean(),
            "cover90": part["cover90"].mean(),
            "crps_median": part["crps"].median(),
            "crps_mean": part["crps"].mean(),
        }
        for runs, part in groups
    ]


def knot_rows(
    frame: pd.DataFrame, stretch, without: dict | None = None, count_runs: bool = False
) -> list[dict]:
    """The factors of ``stretch`` at each of its knots, with the number of (rising) updates there.

    ``without``: the factors learnt without each source, whose range of rising-above factors is
    added; ``count_runs``: add the number of runs at each knot.
    """
    rows = []
    for i, knot in enumerate(stretch.knots):
        at = frame[frame["cut"] == knot]
        row: dict = {"knot": knot}
        if count_runs:
            row["runs"] = int(at["run_id"].nunique())
        row["rising updates"] = int(at[at["rising"]]["run_id"].nunique())
        row["rising below"] = stretch.rising_below[i]
        row["rising above"] = stretch.rising_above[i]
        row["other below"] = stretch.other_below[i]
        row["other above"] = stretch.other_above[i]
        if stretch.rising_below_inner is not None:  # mapped by level at these knots
            for name in ("rising below", "rising above", "other below", "other above"):
                row[f"{name}, 50% band"] = getattr(stretch, name.replace(" ", "_") + "_inner")[i]
        if without is not None:
            row["rising above, without a source (range)"] = "{:.2f}-{:.2f}".format(
                *(f(s.rising_above[i] for s in without.values()) for f in (min, max))
            )
        rows.append(row)
    return rows


def band_rows(frame: pd.DataFrame, without: dict, by_rise: bool = True) -> list[dict]:
    """Per cut: the band as drawn and stretched by the factors learnt without each run's source
    (``without``: source -> :class:`BandStretch`), scored over all runs, and (``by_rise``) by rise
    and by range too.
    """
    rows: list[dict] = []
    for cut, at in frame.groupby("cut"):
        at = at.reset_index(drop=True)
        cross = stretch_factors(at, [without[source] for source in at["source"]], inner=True)
        for band, factors in (("as drawn", np.ones((len(at), 2))), ("stretched, cross-fitted", cross)):
            summary = summary_rows(cut, band, per_run_scores(at, stretched_quantiles(at, factors)), by_rise)
            rows += summary if by_rise else summary[:1]
    return rows


def main() -> None:
    """Forecast (cached), learn, cross-fit, score, write the factors and the report."""
    from bayesgrpo.evaluate.backtest import cross_fitted_band_stretch, learn_band_stretch

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    given_none = cached_forecasts(args.seed, args.draws)
    stated = cached_forecasts(args.seed, args.draws, stated=True)
    sources = dict(zip(given_none["run_id"], given_none["source"], strict=False))
    # a run given no range whose rewards lie in 0 .. 1 is read as a score on 0 .. 1
    # (LiveForecaster.read_unit_score): its update is a stated-range one, banded by the stated
    # factors; the no-range factors are learnt on the updates that estimated their range
    frame = given_none[given_none["range_source"] == "estimated"].reset_index(drop=True)
    early = cached_forecasts(args.seed, args.draws, knots=EARLY_KNOTS)
    early = early[early["range_source"] == "estimated"].reset_index(drop=True)
    read_as_score = sorted(set(given_none.loc[given_none["range_source"] == "score", "run_id"]))
    provenance = f"`{COMMAND}`: the bundled runs' live updates by populations fitted without their source"
    stated_provenance = (
        f"`{COMMAND}`: the live updates of the bundled runs that state a reward range, given it, by "
        "populations fitted without their source"
    )
    edges, stated_edges = band_edges(frame), band_edges(stated)
    stated_shipped = learn_band_stretch(
        stated_edges, STATED_WINDOW, learnt_on=stated_provenance, by_level=True
    )
    stated_without = cross_fitted_band_stretch(
        stated_edges, sources, STATED_WINDOW, learnt_on=stated_provenance, by_level=True
    )
    early_options = {
        "learnt_on": provenance + ", early in a run",
        "by_level": True,
        "outer_as_drawn": True,
        "min_runs": EARLY_MIN_RUNS,
    }
    early_edges = band_edges(early)
    early_shipped = learn_band_stretch(early_edges, EARLY_WINDOW, **early_options)
    early_without = cross_fitted_band_stretch(early_edges, sources, EARLY_WINDOW, **early_options)
    mid_run = learn_band_stretch(edges, WINDOW, learnt_on=provenance)
    shipped = replace(mid_run, stated_range=stated_shipped, early=early_shipped)
    without = {
        source: replace(stretch, stated_range=stated_without[source], early=early_without[source])
        for source, stretch in cross_fitted_band_stretch(edges, sources, WINDOW, learnt_on=provenance).items()
    }
    document = {"command": COMMAND, "all_sources": shipped.to_dict()}
    SHIPPED.write_text(json.dumps(document, indent=1) + "\n")
    RESULTS.mkdir(exist_ok=True)
    document["without_source"] = {source: stretch.to_dict() for source, stretch in without.items()}
    (RESULTS / "live_band_stretch.json").write_text(json.dumps(document, indent=1) + "\n")

    factor_rows = knot_rows(frame, shipped, without=without)
    rows = band_rows(frame, without)
    stated_factor_rows = knot_rows(stated, stated_shipped, count_runs=True)
    early_factor_rows = knot_rows(early, early_shipped, count_runs=True)
    early_rows = band_rows(early, without)
    stated_rows = band_rows(stated, stated_without, by_rise=False)
    progress = frame.groupby(["run_id", "cut"])["progress"].first()
    lines = [
        "# The live predictive band's stretch, learnt on held-out sources",
        "",
        f"Command: `{COMMAND}` ({time.perf_counter() - start:.0f} s, forecasts cached in "
        "`benchmarks/_scratch/live_band_stretch`; seed "
        f"{args.seed}, {args.draws} draws). Writes `bayesgrpo/_data/live_band_stretch.json` (shipped) and "
        "`benchmarks/results/live_band_stretch.json` (also the factors without each source, which the "
        "backtests score that source's runs with).",
        "",
        f"{frame['run_id'].nunique()} bundled runs, each updated through `LiveForecaster` by the population "
        "fitted without its source, no stated range given and the range estimated from the prefix (the "
        f"other {len(read_as_score)} runs log every reward inside 0 .. 1 and are read as a score on 0 .. 1, "
        "`LiveForecaster.read_unit_score`: their updates are those of the last section), cut at "
        + ", ".join(f"{k:.0%}" for k in KNOTS)
        + " of its logged step span (the update's progress on its planned horizon: "
        f"{progress.min():.2f}-{progress.max():.2f}), the band as drawn. `rising`: the prefix's logged "
        "reward rose over the run's latest tenth by more than 1% of the update's reward range at the "
        "one-sided 95% bound (`rising_runs`, the stop rule's guard). Each side of the 90% band is "
        "stretched about the median so that 5% of later points (mean over runs) lie beyond it, apart for "
        "rising and other updates, a group of fewer than 5 runs keeping 1. The package uses the factors "
        f"at progress {WINDOW[0]:g}-{WINDOW[1]:g} only, interpolated between knots, and only for runs "
        "whose range is estimated (those given one or read as a score on 0 .. 1: the last section).",
        "",
        "## The shipped factors (learnt on every source)",
        "",
        markdown_table(pd.DataFrame(factor_rows)),
        "",
        "## The band as drawn and stretched by factors learnt without the run's source",
        "",
        "cover50/cover90: mean over runs of the share of later points inside the band; crps: over runs of "
        "the per-run mean CRPS (99 quantiles), units of the run's logged range. `no stated range` / "
        "`stated range`: the runs' metadata (the update is given no range).",
        "",
        markdown_table(pd.DataFrame(rows)),
        "",
        "## Early in a run: the 50% band alone",
        "",
        "The same updates of the runs whose range is estimated, cut at "
        + ", ".join(f"{k:.0%}" for k in EARLY_KNOTS)
        + ". There a stretch of the 90% band costs every run CRPS (its misses are runs whose rise has "
        "not begun), but the 50% band is too narrow: its 25/75% quantiles alone are matched so that 25% "
        "of later points lie beyond each, the 5/95% quantiles kept as drawn (`BandStretch.early`, used at "
        f"progress {EARLY_WINDOW[0]:g}-{EARLY_WINDOW[1]:g}, held at the nearest knot's factors outside the "
        "knots; `benchmarks/experiments/live_band_two_level.py --knots 0.1 0.25 --by-kind`).",
        "",
        markdown_table(pd.DataFrame(early_factor_rows)),
        "",
        markdown_table(pd.DataFrame(early_rows)),
        "",
        "## Runs that state their range, given it",
        "",
        f"The {stated['run_id'].nunique()} bundled runs whose metadata states a reward range, each updated "
        "by the population fitted without its source *with* its range given (as the forecast backtest and "
        "a user who states it do), cut at "
        + ", ".join(f"{k:.0%}" for k in STATED_KNOTS)
        + ". Their factors are learnt apart (`BandStretch.stated_range`) and used at progress "
        f"{STATED_WINDOW[0]:g}-{STATED_WINDOW[1]:g} on runs given a range, by quantile level "
        "(`BandStretch.by_level`): each side's 5/95% quantile matched so that 5% of later points lie "
        "beyond it (the same rule), and its 25/75% quantile so that 25% do (`, 50% band`), the offsets "
        "between and beyond them mapped piecewise-linearly "
        "(`benchmarks/experiments/live_band_two_level.py --stated`).",
        "",
        markdown_table(pd.DataFrame(stated_factor_rows)),
        "",
        markdown_table(pd.DataFrame(stated_rows).drop(columns="runs")),
        "",
    ]
    (RESULTS / "live_band_stretch.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
