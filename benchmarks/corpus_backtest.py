"""The backtests on the corpus: forecasts, stop decisions and transfer, each on sources held out.

The corpus (``python benchmarks/corpus/build.py``) is split by source into folds 0-4 and a sealed
fold (``bayesgrpo.evaluate.corpus.source_fold``). Each run keeps what its source states (family,
size, reward range, planned steps): the setting of the 60-run backtest (``backtest.py``), whose
tables this one extends; the live path as a new user calls it, raw rewards and no metadata, is
``corpus_live.py``.

- **Populations**: one per fold of 0-4, fitted with the shipped population's sampler settings on
  the runs of the other four folds; the sealed fold's runs get one fitted on all of folds 0-4.
  No sealed run is in any fit.
- **Forecasts**: every run cut at 10/25/50% of its steps, its later points forecast by bayesgrpo
  (its fold's population) and by the baselines; ratios of median CRPS and mean final-reward error
  over carrying the last value forward, and the share of later points inside the 90% and 50%
  bands.
- **Stop decisions**: the default rule and the fixed budgets run online (every 5% of a run, the
  horizon its last logged step); steps saved and reward given up against the run's end, for runs
  with and without a stated reward range.
- **Transfer**: leave one family out (every family with 10+ runs in folds 0-4): a population of
  the other families' runs of folds 0-4 predicts each run of the family zero-shot from its
  metadata, then after 5% and 10% of it; median CRPS over the population-mean curve's.

Every figure is given for folds 0-4 and for the sealed fold apart, and for the runs bundled in
``data/`` among them (the 60-run backtest's runs), pooled (no source above 10% of the weight) and
with each source weighted equally, with a 90% interval from a bootstrap over sources.

Resumable: fits, forecasts and stops are cached in ``benchmarks/_scratch/corpus_backtest/`` under
a hash of the runs they saw, the settings and the package's code.

Usage::

    python benchmarks/corpus/build.py            # the corpus (from the git mirrors)
    python benchmarks/corpus_backtest.py         # 11 population fits, then ~1 s a run
    python benchmarks/corpus_backtest.py --quick # smoke run: 3 sources a fold, one tiny fit for all
                                                 # (it checks the plumbing; its scores mean nothing)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import resource
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _corpus import (  # noqa: E402
    BUILT,
    cached_rows,
    code_hash,
    fold_group,
    forecast_summary,
    interval,
    ratio_of_medians,
    stop_summary,
)
from _markdown import command_line, machine_line, markdown_table  # noqa: E402

from bayesgrpo.evaluate.corpus import SEALED, load_built, read_manifest, source_bootstrap  # noqa: E402
from bayesgrpo.logs.table import RunsTable  # noqa: E402

logger = logging.getLogger("corpus_backtest")
SCRATCH = HERE / "_scratch" / "corpus_backtest"
RESULTS = HERE / "results" / "corpus_backtest.md"
QUICK_OUTPUT = HERE / "_scratch" / "corpus_backtest_quick.md"
#: The shipped population's sampler settings (``bayesgrpo.model.datasets.POPULATION_FIT``, its seed
#: aside) and model: every held-out population is fitted the way the one users get was.
FIT: dict[str, Any] = {"draws": 500, "thin": 8, "tune": 1000, "chains": 2}
QUICK_FIT: dict[str, Any] = {"draws": 100, "thin": 1, "tune": 100, "chains": 2}
MODEL: dict[str, Any] = {"pooling": "partial"}
FORECAST_METHODS = ("bayesgrpo", "persistence", "exp_least_squares", "scalerl_sigmoid")
#: The rule every interface decides with first; the fixed budgets the stop-decision bar names.
STOP_RULES = ("default rule", "fixed 0.5", "fixed 0.6")
#: A family is held out for transfer when folds 0-4 hold this many of its runs.
MIN_FAMILY_RUNS = 10


def _key(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _peak_memory_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cached_population(train: RunsTable, label: str, fit: dict[str, Any], seed: int) -> tuple[Any, str]:
    """The population fitted on ``train`` (loaded from the cache when it was fitted before) and the
    key it is cached under.
    """
    from bayesgrpo import RewardModel

    checksums = sorted(train.runs["points_sha256"].astype(str))
    key = _key({"runs": checksums, "fit": fit, "model": MODEL, "seed": seed, "code": code_hash(("model",))})
    path = SCRATCH / "populations" / f"{label.replace(' ', '_')}_{key}.nc"
    if path.exists():
        return RewardModel.load(path), key
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = RewardModel(**MODEL).fit(train, progressbar=False, random_seed=seed, **fit)
    seconds = time.perf_counter() - start
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save(path)
    record = {"label": label, "runs": len(train.run_ids), "points": len(train.points), "seconds": seconds}
    record |= {"peak_mib": _peak_memory_mib(), **fit_diagnostics(model)}
    with (SCRATCH / "fits.jsonl").open("a") as log:
        log.write(json.dumps({"file": path.name, **record}) + "\n")
    logger.info("%s: %d runs fitted in %.0f s", label, len(train.run_ids), seconds)
    return model, key


def fit_diagnostics(model: Any) -> dict[str, Any]:
    """Divergences, the largest r_hat, the smallest bulk ESS, and which runs did not mix."""
    report = model.diagnostics
    unsettled = [w for w in report.warnings if "r_hat" in w]
    return {
        "divergences": report.divergences,
        "max_r_hat": round(report.max_r_hat, 3),
        "min_ess_bulk": round(report.min_ess_bulk, 1),
        "what did not mix": unsettled[0].split(":")[0] if unsettled else "",
    }


def held_out_groups(runs: pd.DataFrame) -> dict[str, list[str]]:
    """Fold label -> the run ids it holds (folds 0-4 and the sealed one)."""
    return {str(fold): sorted(part["run_id"].astype(str)) for fold, part in runs.groupby("fold", sort=True)}


def fold_populations(table: RunsTable, args: argparse.Namespace) -> dict[str, tuple[Any, str]]:
    """``run_id -> (population fitted without its fold and without any sealed run, its key)``."""
    runs = table.runs
    open_runs = runs.loc[runs["fold"].astype(str) != SEALED, "run_id"].astype(str)
    populations: dict[str, tuple[Any, str]] = {}
    for i, (fold, held) in enumerate(held_out_groups(runs).items()):
        # a smoke run checks the plumbing with one fit of every open run (its scores mean nothing)
        train_ids = sorted(set(open_runs) - (set() if args.quick else set(held)))
        seed = args.seed if args.quick else args.seed + i
        fitted = cached_population(
            table.select(train_ids), "quick" if args.quick else f"fold {fold}", args.fit, seed
        )
        populations |= dict.fromkeys(held, fitted)
    return populations


def family_populations(table: RunsTable, args: argparse.Namespace) -> dict[str, dict[str, tuple[Any, str]]]:
    """Family -> ``run_id -> (population fitted on the other families' runs of folds 0-4, key)``."""
    runs = table.runs
    family = runs["family"].astype(str).str.lower()
    is_open = runs["fold"].astype(str) != SEALED
    counts = family[is_open & runs["family"].notna()].value_counts()
    result: dict[str, dict[str, tuple[Any, str]]] = {}
    for i, name in enumerate(sorted(counts[counts >= args.min_family_runs].index)):
        if args.quick:  # a smoke run: the one fit of every open run (its scores mean nothing)
            train_ids = runs.loc[is_open, "run_id"].astype(str)
            label, seed = "quick", args.seed
        else:
            train_ids = runs.loc[is_open & (family != name) & runs["family"].notna(), "run_id"].astype(str)
            label, seed = f"family {name}", args.seed + 100 + i
        fitted = cached_population(table.select(sorted(train_ids)), label, args.fit, seed)
        held = runs.loc[family == name, "run_id"].astype(str)
        result[name] = dict.fromkeys(held, fitted)
    return result


def transfer_summary(frame: pd.DataFrame, runs: pd.DataFrame, n_boot: int) -> pd.DataFrame:
    """Each transfer method's median CRPS over the population-mean curve's, per group and window."""
    wide = frame.pivot_table(index=["run_id", "window"], columns="method", values="crps").reset_index()
    wide["source"] = wide["run_id"].map(runs["source"])
    wide["group"] = wide["run_id"].map(runs["group"])
    methods = [m for m in frame["method"].unique() if m != "population_mean"]
    rows = []
    for (group, window), part in wide.groupby(["group", "window"], sort=True):
        for method in sorted(methods):
            pair = part.dropna(subset=[method, "population_mean"]) if method in part else part.iloc[:0]
            if pair.empty:
                continue
            values = pair[[method, "population_mean"]].to_numpy()
            row = {"group": group, "window": window, "method": method, "n runs": len(pair)}
            row["n sources"] = pair["source"].nunique()
            for label, scheme in (("pooled", "pooled"), ("each source equal", "equal")):
                row[f"median CRPS / population mean ({label})"] = interval(
                    source_bootstrap(values, pair["source"], ratio_of_medians, scheme, n_boot)
                )
            rows.append(row)
    return pd.DataFrame(rows)


def quick_table(table: RunsTable) -> RunsTable:
    """Three sources of each fold (their first three runs each): a smoke run's corpus."""
    runs = table.runs
    keep: list[str] = []
    for _, part in runs.groupby("fold", sort=True):
        for source in sorted(part["source"].unique())[:3]:
            keep += sorted(part.loc[part["source"] == source, "run_id"].astype(str))[:3]
    return table.select(keep)


def main(argv: list[str] | None = None) -> None:
    """Run the forecast, stopping and transfer backtests on the corpus's held-out sources."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--built", type=Path, default=BUILT)
    parser.add_argument("--cuts", type=float, nargs="+", default=[0.1, 0.25, 0.5])
    parser.add_argument("--draws", type=int, default=1000, help="predictive draws per forecast")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--boot", type=int, default=2000)
    parser.add_argument("--check-every", type=float, default=0.05, help="stop rules: check every share")
    parser.add_argument("--min-family-runs", type=int, default=MIN_FAMILY_RUNS)
    parser.add_argument("--skip", nargs="*", default=[], choices=["forecast", "stopping", "transfer"])
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 sources a fold, tiny fits")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    args.fit = QUICK_FIT if args.quick else FIT
    if args.quick:  # a smoke run's fits and rows never mix with the real ones
        global SCRATCH
        SCRATCH = SCRATCH.with_name(SCRATCH.name + "_quick")
    out = args.out or (QUICK_OUTPUT if args.quick else RESULTS)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    start = time.perf_counter()

    from bayesgrpo.evaluate.backtest import FixedFraction, forecast_backtest, stopping_backtest
    from bayesgrpo.evaluate.transfer_eval import transfer_scores
    from bayesgrpo.questions.stopping import default_rule

    table = load_built(args.built)
    if args.quick:
        args.min_family_runs = 3
        table = quick_table(table)
    manifest = read_manifest(HERE / "corpus" / "manifest.csv")
    bundled = set(manifest.loc[manifest["bundled_file"] != "", "points_sha256"])
    runs = table.runs.set_index(table.runs["run_id"].astype(str))
    runs["group"] = fold_group(runs["fold"])
    runs["bundled"] = runs["points_sha256"].isin(bundled)
    run_ids = sorted(runs.index)
    fitted = fold_populations(table, args)
    populations = {run_id: model for run_id, (model, _) in fitted.items()}
    keys = {run_id: key for run_id, (_, key) in fitted.items()}

    lines = [
        "# The backtests on the corpus: forecasts, stop decisions and transfer on held-out sources",
        "",
        f"`{command_line('corpus_backtest.py', argv)}` ({machine_line()})",
        "",
        f"{len(run_ids)} runs from {runs['source'].nunique()} sources; "
        f"{int((runs['group'] == 'sealed').sum())} runs from "
        f"{runs.loc[runs['group'] == 'sealed', 'source'].nunique()} sources in the sealed fold. Each "
        "run keeps what its source states (family, size, reward range, planned steps) and is "
        "forecast from a population fitted without its fold (the sealed fold's: on folds 0-4). "
        "'bundled': the runs of data/ among them, the 60-run backtest's runs. Intervals: 90%, "
        "bootstrap over sources.",
        "",
    ]
    by_group = runs.copy()
    if "forecast" not in args.skip:
        settings = {"cuts": args.cuts, "draws": args.draws, "seed": args.seed, "methods": FORECAST_METHODS}
        frame = cached_rows(
            SCRATCH / "forecast",
            run_ids,
            keys,
            settings,
            lambda ids: forecast_backtest(
                table.select(ids),
                populations,
                cuts=args.cuts,
                methods=FORECAST_METHODS,
                n_draws=args.draws,
                random_seed=args.seed,
            ),
        )
        bundled_frame = frame[frame["run_id"].map(runs["bundled"])]
        summary = pd.concat(
            [
                forecast_summary(frame, by_group, FORECAST_METHODS, args.boot),
                forecast_summary(
                    bundled_frame, by_group.assign(group="bundled runs"), FORECAST_METHODS, args.boot
                ),
            ],
            ignore_index=True,
        )
        lines += ["## Forecasts", "", "Ratios below 1: the method beats carrying the last value forward.", ""]
        lines += [markdown_table(summary), ""]

    if "stopping" not in args.skip:
        rules = {
            "default rule": default_rule(),
            "fixed 0.5": FixedFraction(0.5),
            "fixed 0.6": FixedFraction(0.6),
        }
        settings = {"check": args.check_every, "draws": args.draws, "seed": args.seed, "rules": list(rules)}
        frame = cached_rows(
            SCRATCH / "stops",
            run_ids,
            keys,
            settings,
            lambda ids: stopping_backtest(
                table.select(ids),
                populations,
                rules,
                check_every_fraction=args.check_every,
                n_draws=args.draws,
                random_seed=args.seed,
            ),
        )
        stated = runs["reward_min"].notna() & runs["reward_max"].notna()
        by_range = by_group.assign(
            group=by_group["group"] + np.where(stated, ", stated range", ", no stated range")
        )
        summary = pd.concat(
            [
                stop_summary(frame, by_group, STOP_RULES, args.boot),
                stop_summary(frame, by_range, STOP_RULES, args.boot),
            ],
            ignore_index=True,
        )
        lines += [
            "## Stop decisions",
            "",
            f"Checked every {args.check_every:.0%} of a run; the horizon is its last logged step. Steps "
            "saved: a share of the run; given up: the smoothed reward at the end minus at the stop, a "
            "share of the run's range (negative: the stop was better than the end); dip: the smoothed "
            "reward at the stop minus its mean over the 10% of the run around it. Each source weighted "
            "equally.",
            "",
            markdown_table(summary),
            "",
        ]

    if "transfer" not in args.skip:
        families = family_populations(table, args)
        frames = []
        for family, family_fitted in families.items():
            held = sorted(family_fitted)
            family_models = {run_id: model for run_id, (model, _) in family_fitted.items()}
            frame = cached_rows(
                SCRATCH / f"transfer_{family}",
                held,
                {run_id: key for run_id, (_, key) in family_fitted.items()},
                {"draws": args.draws, "seed": args.seed},
                lambda ids, pops=family_models: transfer_scores(
                    table.select(ids),
                    pops,
                    split="leave_one_family_out",
                    n_draws=args.draws,
                    random_seed=args.seed,
                ),
            )
            frames.append(frame.assign(family=family))
        frame = pd.concat(frames, ignore_index=True)
        lines += [
            "## Transfer: leave one family out",
            "",
            f"Families with {args.min_family_runs}+ runs in folds 0-4 ({', '.join(families)}): each held "
            "out in turn, its runs predicted by a population of the other families' runs of folds 0-4 "
            "from their metadata alone (zero-shot), with their first logged reward, and after 5% and "
            "10% of the run (on the rest). Ratios below 1: better than the population-mean curve.",
            "",
            markdown_table(transfer_summary(frame, by_group, args.boot)),
            "",
        ]

    fits = SCRATCH / "fits.jsonl"
    if fits.exists():
        records = pd.DataFrame([json.loads(line) for line in fits.read_text().splitlines() if line.strip()])
        records = records.drop_duplicates("file", keep="last")
        lines += [
            "## The population fits",
            "",
            "Sampler bar: 0 divergences, r_hat <= 1.01. Peak memory: the fitting process's resident peak.",
            "",
            markdown_table(records.drop(columns="file")),
            "",
        ]
    lines.insert(3, f"Wall time: {time.perf_counter() - start:.0f} s (cached parts not refitted).")
    lines.insert(4, "")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
