"""The live path as users meet it: leave one source out, no stated reward range, cut runs.

Every bundled run is predicted by a population fitted without any run of its source (its
notebook with its editions and copies, its verl recipe, its repository:
``bayesgrpo.evaluate.backtest.source_groups``; the 24 populations are fitted once by
``benchmarks/_loso.py`` and cached). The held-out run is given **without its stated reward
range** (most users' logs state none), cut at 10/25/50% of its steps, and updated through
``LiveForecaster`` exactly as ``bayesgrpo stop``, the TRL callback and ``watch`` do; the
predictive band (a logged reward, noise included) is scored on every later logged point beside
persistence and the other baselines on the same pairs. The stopping rules run online on the same
populations. Every number is reported for all runs and for runs with and without a stated range
(in their metadata; the live update is never told it).

Resumable: each run's forecast rows are cached in ``benchmarks/_scratch/live_backtest/`` under a
hash of the settings and of ``bayesgrpo/``'s model, questions and evaluate code.

Usage::

    python benchmarks/_loso.py            # the populations (about 30 min on 2 cores, once)
    python benchmarks/live_backtest.py    # forecasts (~15 min with the Domhan ensemble) and stops
    python benchmarks/live_backtest.py --quick   # 6 runs, no Domhan, into benchmarks/_scratch/
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _loso import CACHE, loso_populations
from _markdown import machine_line, markdown_table
from _pit import pit_section

RESULTS = HERE / "results"
SCRATCH = HERE / "_scratch" / "live_backtest"
BASELINES = ("persistence", "exp_least_squares", "scalerl_sigmoid", "domhan_ensemble")
#: Targets of the live path (the live-path issue): at every cut.
COVER90_TARGET = (0.88, 0.92)
CRPS_VS_PERSISTENCE_TARGET = 0.85

logger = logging.getLogger("live_backtest")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuts", type=float, nargs="+", default=[0.1, 0.25, 0.5])
    parser.add_argument("--forecast-draws", type=int, default=1000)
    parser.add_argument("--domhan-steps", type=int, default=1000)
    parser.add_argument("--no-domhan", action="store_true", help="leave the slow Domhan ensemble out")
    parser.add_argument("--check-every", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", type=Path, default=CACHE, help="the leave-one-source-out populations")
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    parser.add_argument("--skip-stopping", action="store_true")
    parser.add_argument("--quick", action="store_true", help="6 runs, no Domhan, into _scratch")
    return parser.parse_args(argv)


def without_stated_range(table):
    """The table as a user's logs give it: no ``reward_min``/``reward_max``."""
    from bayesgrpo.logs.table import RunsTable

    runs = table.runs.copy()
    runs["reward_min"] = np.nan
    runs["reward_max"] = np.nan
    return RunsTable(points=table.points, runs=runs, report=table.report)


def range_kinds(table) -> dict[str, str]:
    """``stated`` or ``unstated`` per run, from its metadata."""
    stated = table.runs[["reward_min", "reward_max"]].notna().all(axis=1)
    return dict(zip(table.runs["run_id"].astype(str), np.where(stated, "stated", "unstated"), strict=True))


def code_hash() -> str:
    """A hash of the code the forecasts depend on: a change re-runs them."""
    digest = hashlib.sha256()
    root = HERE.parent / "bayesgrpo"
    for folder in ("model", "questions", "evaluate"):
        for path in sorted((root / folder).rglob("*.py")):
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def forecasts(table, populations, args: argparse.Namespace, methods: list[str]) -> pd.DataFrame:
    """Every run's forecast rows, from the cache where it holds them."""
    from live_band_stretch import cross_fitted_stretches, stretch_file_hash

    from bayesgrpo.evaluate.backtest import forecast_backtest

    key = {
        "cuts": args.cuts,
        "draws": args.forecast_draws,
        "domhan": args.domhan_steps,
        "methods": methods,
        "seed": args.seed,
        "code": code_hash(),
        "populations": str(args.cache),
        "band_stretch": stretch_file_hash(),
    }
    stretches = cross_fitted_stretches(table)
    tag = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    folder = SCRATCH / f"forecast_{tag}"
    folder.mkdir(parents=True, exist_ok=True)
    options = {"domhan_ensemble": {"n_steps": args.domhan_steps}} if "domhan_ensemble" in methods else {}
    frames = []
    for i, run_id in enumerate(table.run_ids):
        path = folder / f"{hashlib.sha256(run_id.encode()).hexdigest()[:16]}.csv"
        if path.exists():
            frames.append(pd.read_csv(path))
            continue
        start = time.perf_counter()
        frame = forecast_backtest(
            table.select([run_id]),
            {run_id: populations[run_id]},
            cuts=args.cuts,
            methods=methods,
            baseline_options=options,
            n_draws=args.forecast_draws,
            random_seed=args.seed,
            band_stretch={run_id: stretches[run_id]},  # learnt without the run's source
        )
        frame.to_csv(path, index=False)
        frames.append(frame)
        logger.info("run %d/%d %s: %.0f s", i + 1, len(table.run_ids), run_id, time.perf_counter() - start)
    return pd.concat(frames, ignore_index=True)


def forecast_summary(frame: pd.DataFrame, kinds: dict[str, str]) -> pd.DataFrame:
    """Per cut, runs (all / stated / unstated range) and method: the scores users read."""
    frame = frame.assign(range=frame["run_id"].map(kinds))
    parts = [frame.assign(range="all"), frame]
    grouped = pd.concat(parts, ignore_index=True).groupby(["cut", "range", "method"], sort=True)
    summary = grouped.agg(
        n=("run_id", "size"),
        crps_median=("crps", "median"),
        cover50=("cover50", "mean"),
        cover90=("cover90", "mean"),
        final_error_median=("final_abs_error", "median"),
        final_error_mean=("final_abs_error", "mean"),
    ).reset_index()
    return summary


def verdict(summary: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The live path against persistence and the best baseline, per cut and range; the targets."""
    rows, lines = [], []
    for (cut, kind), part in summary.groupby(["cut", "range"], sort=True):
        by_method = part.set_index("method")
        if "bayesgrpo" not in by_method.index:
            continue
        bayes = by_method.loc["bayesgrpo"]
        baselines = by_method.drop(index="bayesgrpo")
        best = baselines["crps_median"].idxmin()
        persistence = by_method.loc["persistence", "crps_median"]
        rows.append(
            {
                "cut": cut,
                "range": kind,
                "n": int(bayes["n"]),
                "bayesgrpo_crps": bayes["crps_median"],
                "persistence_crps": persistence,
                "vs_persistence": bayes["crps_median"] / persistence,
                "best_baseline": best,
                "best_crps": baselines.loc[best, "crps_median"],
                "vs_best": bayes["crps_median"] / baselines.loc[best, "crps_median"],
                "cover50": bayes["cover50"],
                "cover90": bayes["cover90"],
                "final_error": bayes["final_error_median"],
                "best_final_error": baselines["final_error_median"].min(),
            }
        )
    table = pd.DataFrame(rows)
    for kind in ("all", "unstated", "stated"):
        part = table[table["range"] == kind]
        for row in part.itertuples(index=False):
            cover_ok = COVER90_TARGET[0] <= row.cover90 <= COVER90_TARGET[1]
            crps_ok = row.vs_persistence <= CRPS_VS_PERSISTENCE_TARGET
            lines.append(
                f"- {kind} ranges, cut {row.cut:g} ({row.n} runs): 90% predictive band holds "
                f"{row.cover90:.1%} of later points ({'met' if cover_ok else 'NOT met'}: "
                f"{COVER90_TARGET[0]:.0%}-{COVER90_TARGET[1]:.0%}); median CRPS {row.bayesgrpo_crps:.3f} = "
                f"{row.vs_persistence:.2f} x persistence ({'met' if crps_ok else 'NOT met'}: <= "
                f"{CRPS_VS_PERSISTENCE_TARGET}), {row.vs_best:.2f} x the best baseline ({row.best_baseline})."
            )
    return table, lines


def path_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """How often each live-update path answered, and its scores, per cut."""
    bayes = frame[frame["method"] == "bayesgrpo"]
    return (
        bayes.groupby(["cut", "path"], sort=True)
        .agg(
            n=("run_id", "size"),
            crps_median=("crps", "median"),
            cover50=("cover50", "mean"),
            cover90=("cover90", "mean"),
            final_error_median=("final_abs_error", "median"),
            not_ok=("status", lambda s: int((s != "ok").sum())),
        )
        .reset_index()
    )


def departure_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per cut and ``departure`` (``LiveUpdate.departure.kind``, "none" when the prefix's latest
    points lay inside the update's band): how often, and the forecasts' scores beside
    persistence's on the same pairs.
    """
    bayes = frame[frame["method"] == "bayesgrpo"].copy()
    bayes["departure"] = bayes["departure"].fillna("").replace("", "none")
    persistence = frame[frame["method"] == "persistence"].set_index(["run_id", "cut"])["crps"]
    bayes["persistence_crps"] = persistence.reindex(
        pd.MultiIndex.from_frame(bayes[["run_id", "cut"]])
    ).to_numpy()
    return (
        bayes.groupby(["cut", "departure"], sort=True)
        .agg(
            n=("run_id", "size"),
            cover90=("cover90", "mean"),
            crps_median=("crps", "median"),
            persistence_crps_median=("persistence_crps", "median"),
        )
        .reset_index()
    )


def stopping(table, populations, args: argparse.Namespace) -> pd.DataFrame:
    """The backtest's stopping rules on the same populations and runs (cached as one table)."""
    from backtest import stopping_rules

    from bayesgrpo.evaluate.backtest import stopping_backtest

    key = {
        "check": args.check_every,
        "draws": args.forecast_draws,
        "seed": args.seed,
        "code": code_hash(),
        "runs": table.run_ids,
        "populations": str(args.cache),
    }
    tag = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    path = SCRATCH / f"stopping_{tag}.csv"
    if path.exists():
        return pd.read_csv(path)
    stops = stopping_backtest(
        table,
        populations,
        stopping_rules(),
        check_every_fraction=args.check_every,
        n_draws=args.forecast_draws,
        random_seed=args.seed,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    stops.to_csv(path, index=False)
    return stops


#: The fixed budgets the stop-decision issue asks a posterior rule to dominate.
FIXED_BUDGETS = ("fixed 0.5", "fixed 0.6")


def paired_section(stops: pd.DataFrame, sources: dict[str, str], rules: list[str]) -> list[str]:
    """``rules`` against each fixed budget run for run, the interval resampling whole sources."""
    from bayesgrpo.evaluate.backtest import paired_rule_differences

    paired = paired_rule_differences(stops, sources, rules, FIXED_BUDGETS)

    def with_interval(name: str) -> list[str]:
        values = paired[[f"{name}_diff", f"{name}_low", f"{name}_high"]].to_numpy()
        return [f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]" for d, lo, hi in values]

    shown = pd.DataFrame(
        {
            "rule": paired["rule"],
            "against": paired["against"],
            "runs / sources": [f"{r} / {s}" for r, s in zip(paired["runs"], paired["sources"], strict=True)],
            "steps saved, difference [90%]": with_interval("saved"),
            "given up vs the end, difference [90%]": with_interval("given_up"),
            "share of resamples dominating": paired["share_dominating"].round(2),
        }
    )
    return [
        "Paired with the fixed budgets, run for run (`bayesgrpo.evaluate.backtest.paired_rule_differences`: "
        "the rule's value minus the budget's, mean over runs; the 90% interval and the share of resamples "
        "in which the rule saves as many steps and gives up no more come from 2000 resamples of whole "
        "sources, since runs of one source are near copies):",
        "",
        markdown_table(shown),
        "",
    ]


def stopping_section(stops: pd.DataFrame, kinds: dict[str, str], sources: dict[str, str]) -> list[str]:
    """The stop-decision issue's bar, and the frontier against the run's end, for all runs and by
    stated range, with the frontier's posterior rules paired with the fixed budgets.
    """
    from backtest import BUDGET_TARGET_GIVEN_UP, BUDGET_TARGET_SAVED, DIP_TARGET, budget_lines, dominance

    from bayesgrpo.evaluate.backtest import frontier

    lines = [
        "Against the stop-decision issue's bar (dominate `fixed 0.5` and `fixed 0.6` against the end, "
        f">= {BUDGET_TARGET_SAVED:.0%} saved at <= {BUDGET_TARGET_GIVEN_UP:.0%} given up, the mean dip at "
        f"the stop within {DIP_TARGET:.0%} of the range; `dip_mean` below):",
        "",
        *budget_lines(
            stops, kinds, {"unstated": "runs without a stated range", "stated": "runs with a stated range"}
        ),
        "",
    ]
    stops = stops.assign(range=stops["run_id"].map(kinds))
    for kind in ("all", "unstated", "stated"):
        part = stops if kind == "all" else stops[stops["range"] == kind]
        if part.empty:
            continue
        front = frontier(part.assign(reward_given_up=part["reward_vs_end"]))
        dominated = dominance(front)
        bayes = front[front["kind"] == "bayes"]
        target = bayes[(bayes["steps_saved_mean"] >= 0.5) & (bayes["given_up_mean"] <= 0.01)]
        fixed = front[front["rule"].isin(["fixed 0.5", "fixed 0.6"])]
        lines += [
            f"### {kind} ranges ({part['run_id'].nunique()} runs)",
            "",
            (
                "Target (>= 50% of steps saved at <= 1% of the range given up against the run's end): "
                + (
                    "met by " + ", ".join(f"`{r}`" for r in target["rule"])
                    if len(target)
                    else "NOT met by any posterior rule"
                )
                + "."
            ),
            "",
            markdown_table(
                pd.concat([bayes[bayes["on_frontier"]], fixed])[
                    ["rule", "steps_saved_mean", "given_up_mean", "dip_mean", "share_stopped", "on_frontier"]
                ].rename(columns={"given_up_mean": "given_up_vs_end_mean"})
            ),
            "",
        ]
        lines += paired_section(part, sources, bayes.loc[bayes["on_frontier"], "rule"].tolist())
        if len(dominated):
            free = dominated.loc[dominated["dominated by"] == "none", "baseline rule"].tolist()
            lines += [
                "Fixed or patience rules no posterior rule dominates (as many steps saved, no more given "
                "up against the end): " + (", ".join(f"`{r}`" for r in free) if free else "none") + ".",
                "",
            ]
    return lines


def main(argv: list[str] | None = None) -> None:
    """Run the live backtest and write ``results/live_backtest.md``."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("bayesgrpo").setLevel(logging.WARNING)
    warnings.simplefilter("ignore")
    from bayesgrpo.model.datasets import load_bundled

    command = "python benchmarks/live_backtest.py" + "".join(
        " " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )
    bundled = load_bundled(warn=False)
    start = time.perf_counter()
    populations = loso_populations(bundled, args.cache)
    fit_seconds = time.perf_counter() - start
    kinds = range_kinds(bundled)
    from bayesgrpo.evaluate.backtest import source_group

    sources = {str(row["run_id"]): source_group(row) for row in bundled.runs.to_dict("records")}
    table = without_stated_range(bundled)
    slow = args.no_domhan or args.quick
    methods = ["bayesgrpo", *(m for m in BASELINES if not (slow and m == "domhan_ensemble"))]
    if args.quick:
        table = table.select(table.run_ids[::10])
        args.output_dir = SCRATCH / "quick"
    args.output_dir.mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    frame = forecasts(table, populations, args, methods)
    forecast_seconds = time.perf_counter() - start
    frame.to_csv(args.output_dir / "live_backtest_forecast_runs.csv", index=False)
    summary = forecast_summary(frame, kinds)
    against, verdict_lines = verdict(summary)
    paths = path_summary(frame)

    machine = machine_line()
    lines = [
        "# The live path, leave one source out, no stated range",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine}. Populations loaded in {fit_seconds:.0f} s "
        f"({len({id(p) for p in populations.values()})} leave-one-source-out fits, `benchmarks/_loso.py`); "
        f"forecasts {forecast_seconds:.0f} s (0 when cached).",
        "",
        (
            f"{len(table.run_ids)} bundled runs, each predicted by a population fitted without any run of "
            "its source, given without its stated reward range, cut at "
            + "/".join(f"{c:.0%}" for c in args.cuts)
            + " of its steps and updated through `LiveForecaster` (as `bayesgrpo stop` does; horizon = the "
            "run's planned steps). Scored on every later logged point: CRPS (median over runs, in units of "
            "the run's logged reward range), the share of points inside the 50% and 90% **predictive** band "
            "(a logged reward, noise included; mean over runs), and the error of the final reward (mean of "
            "the run's last 5% of points; median over runs). Baselines see the same prefix. `stated` / "
            "`unstated`: whether the run's metadata states a range (never told to the live update). Raw "
            "rows: `live_backtest_forecast_runs.csv`."
        ),
        "",
        "## Against the targets",
        "",
        *verdict_lines,
        "",
        "## bayesgrpo against persistence and the best baseline",
        "",
        markdown_table(against),
        "",
        "## Which path answered",
        "",
        "`importance`: Laplace + importance sampling; `ensemble_mcmc`: its fallback where the importance "
        "weights were unreliable (Pareto k > 0.7). Scored apart.",
        "",
        markdown_table(paths),
        "",
        "## When the update says the run has left its forecast",
        "",
        "At each cut the update sets the prefix's latest 20% of logged points against its own 90% "
        "predictive band (`LiveUpdate.departure`, `bayesgrpo.questions.live.recent_departure`; a "
        "`ForecastDepartureWarning` and a line in `bayesgrpo stop`'s row): `above` / `below`, the points "
        "lie on one side far more often than the band allows (the run has left its curve); `noise`, on both "
        "sides (the band is too narrow for them); `none`, neither. The forecasts' later scores, per kind:",
        "",
        markdown_table(departure_summary(frame)),
        "",
        "## Every method",
        "",
        markdown_table(summary),
        "",
        *pit_section(frame, kinds, args.output_dir / "live_backtest_pit.png"),
    ]
    if not args.skip_stopping:
        start = time.perf_counter()
        stops = stopping(table, populations, args)
        stops.to_csv(args.output_dir / "live_backtest_stopping_runs.csv", index=False)
        lines += [
            "## Stop decisions",
            "",
            (
                f"The stopping backtest's rules, run online (checks every {args.check_every:g} of a run) on "
                "the same populations and the same range-less runs; reward given up is measured against the "
                "run's own end (smoothed over 5% of its points; negative: the stop kept more than running "
                f"on). {time.perf_counter() - start:.0f} s (0 when cached). Raw rows: "
                "`live_backtest_stopping_runs.csv`."
            ),
            "",
            *stopping_section(stops, kinds, sources),
        ]
    (args.output_dir / "live_backtest.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
