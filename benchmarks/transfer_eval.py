"""Transfer evaluation on the bundled real runs: held-out runs predicted zero-shot and early on.

Splits: K-fold by run (``kfold_populations``, stratified by source: an approximation of
leave-one-run-out, one fit per fold instead of one per run), leave one size out
(``size_out_populations``: every run of one model size predicted from a population fitted on all
other sizes) and leave one family out (``family_out_populations``). Every held-out run is
predicted zero-shot from its metadata, zero-shot plus its initial reward, and after 5% / 10% of
its run, against the population-mean curve and the run's prefix fitted alone
(``bayesgrpo.evaluate.transfer_eval``).

Writes to ``benchmarks/results/`` (``--output-dir``): ``transfer_eval.md`` and
``transfer_eval_runs.csv`` (one row per split, run, window, method).

Usage::

    python benchmarks/transfer_eval.py                    # 5 folds + one fit per size and family (19)
    python benchmarks/transfer_eval.py --quick            # smoke run: 14 runs, 2 folds, 2 sizes
    python benchmarks/transfer_eval.py --cache /tmp/pops  # keep the fits for a rerun

``--quick`` writes to ``benchmarks/_scratch/transfer_eval_quick/`` unless ``--output-dir`` is given.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.model.curves import DEFAULT_CURVE
from bayesgrpo.model.sampling import DEFAULT_THIN

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _markdown import machine_line, markdown_table
from backtest import pick_runs  # the same run selection as the backtest

RESULTS = HERE / "results"
QUICK_OUTPUT = HERE / "_scratch" / "transfer_eval_quick"
TARGET_GAIN = 0.30
SPLITS = ("kfold_by_run", "leave_one_size_out", "leave_one_family_out", "leave_one_run_out")
#: Splits run unless --splits names others (leave-one-run-out costs one population fit per run).
DEFAULT_SPLITS = ("kfold_by_run", "leave_one_size_out", "leave_one_family_out")

logger = logging.getLogger("transfer_eval")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line of the transfer benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=5, help="K of the K-fold split (number of runs: LOO)")
    parser.add_argument(
        "--draws", type=int, default=500, help="population fit draws and tuning steps per chain"
    )
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--prefixes", type=float, nargs="+", default=[0.05, 0.1])
    parser.add_argument("--forecast-draws", type=int, default=1000, help="predictive draws per forecast")
    parser.add_argument("--min-size-runs", type=int, default=2, help="sizes with fewer runs are not held out")
    parser.add_argument("--sizes", type=float, nargs="+", default=None, help="hold out only these sizes")
    parser.add_argument("--splits", nargs="+", default=list(DEFAULT_SPLITS), choices=SPLITS)
    parser.add_argument("--runs", type=int, default=None, help="use this many runs (spread over sources)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 14 runs, 2 folds, 2 sizes, tiny fits"
    )
    parser.add_argument("--cache", type=Path, default=None, help="folder to save / reuse the population fits")
    parser.add_argument("--output-dir", type=Path, default=None)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.folds, args.draws, args.runs = 2, 100, args.runs or 14
        args.forecast_draws = min(args.forecast_draws, 300)
    args.output_dir = args.output_dir or (QUICK_OUTPUT if args.quick else RESULTS)
    return args


def cached_populations(cache: Path | None, key: dict, fit: Callable[[], dict]) -> dict:
    """``run_id -> population`` from ``fit()``, saved to / loaded from ``cache`` when it holds ``key``."""
    from bayesgrpo.model.reward_model import RewardModel

    if cache is not None and (cache / "settings.json").exists():
        if json.loads((cache / "settings.json").read_text()) == key:
            mapping = json.loads((cache / "runs.json").read_text())
            models = {i: RewardModel.load(cache / f"population{i}.nc") for i in sorted(set(mapping.values()))}
            logger.info("loaded %d populations from %s", len(models), cache)
            return {run_id: models[i] for run_id, i in mapping.items()}
        logger.info("cache %s holds other settings: refitting", cache)
    populations = fit()
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        index = {id(m): i for i, m in enumerate({id(m): m for m in populations.values()}.values())}
        for model in {id(m): m for m in populations.values()}.values():
            model.save(cache / f"population{index[id(model)]}.nc")
        (cache / "runs.json").write_text(json.dumps({r: index[id(m)] for r, m in populations.items()}))
        (cache / "settings.json").write_text(json.dumps(key))
    return populations


def fit_table(split: str, populations: dict, table) -> pd.DataFrame:
    """One row per distinct population: what it held out and how its fit went."""
    rows = []
    for model in {id(m): m for m in populations.values()}.values():
        held = [r for r, m in populations.items() if m is model]
        sizes = pd.to_numeric(table.runs.set_index("run_id").loc[held, "size_b"], errors="coerce")
        d = model.diagnostics
        rows.append(
            {
                "split": split,
                "held_out": len(held),
                "held_out_sizes": ", ".join(f"{s:g}" for s in sorted(set(sizes.dropna()))) or "?",
                "runs_fitted": len(model.data.run_ids),
                "seconds": d.seconds if d else np.nan,
                "divergences": d.divergences if d else -1,
                "max_r_hat": d.max_r_hat if d else np.nan,
                "min_ess_bulk": d.min_ess_bulk if d else np.nan,
            }
        )
    return pd.DataFrame(rows)


def verdict(gains: pd.DataFrame) -> list[str]:
    """The issue's target, per split: zero-shot whole-curve mean CRPS >= 30% below the population mean's."""
    lines = []
    for split in gains["split"].unique():
        row = gains[
            (gains["split"] == split) & (gains["window"] == "whole_curve") & (gains["method"] == "zero_shot")
        ]
        if row.empty:
            lines.append(f"- {split}: no zero-shot rows.")
            continue
        r = row.iloc[0]
        met = r["crps_mean_gain"] >= TARGET_GAIN
        lines.append(
            f"- {split}: zero-shot whole-curve CRPS is {100 * r['crps_mean_gain']:.1f}% below the "
            f"population-mean curve's on the mean ({100 * r['crps_median_gain']:.1f}% on the median; lower "
            f"on {r['crps_wins']} runs): target (>= {100 * TARGET_GAIN:.0f}% on the mean) "
            f"**{'met' if met else 'not met'}**."
        )
    return lines


def final_coverage(frame: pd.DataFrame, table) -> tuple[pd.DataFrame, list[str]]:
    """How often a run's final reward fell inside its 90% interval, per split and method.

    Each method on its own window (zero-shot methods on the whole curve, ``after_<p>`` and
    ``run_alone_<p>`` after their prefix); for leave one family out also per held-out family.
    Returns the table and the verdict lines against the target (85-95% leaving a family out).
    """
    own = frame[(frame["window"] == "whole_curve") | (frame["window"] == frame["method"]) |
                (frame["method"].str.startswith("run_alone") &
                 (frame["window"] == frame["method"].str.replace("run_alone", "after")))]  # fmt: skip
    family = table.runs.set_index("run_id")["family"].astype(str)
    own = own.assign(family=own["run_id"].map(family))
    rows = (
        own.groupby(["split", "method"], sort=False)
        .agg(runs=("run_id", "nunique"), final_cover90=("final_cover90", "mean"))
        .reset_index()
    )
    lofo = own[own["split"] == "leave_one_family_out"]
    per_family = (
        lofo.groupby(["method", "family"], sort=False)
        .agg(runs=("run_id", "nunique"), final_cover90=("final_cover90", "mean"))
        .reset_index()
        .assign(split="leave_one_family_out, by family")
    )
    lines = []
    for method, group in rows[rows["split"] == "leave_one_family_out"].groupby("method", sort=False):
        share = float(group["final_cover90"].iloc[0])
        met = "met" if 0.85 <= share <= 0.95 else "not met"
        lines.append(
            f"- leave_one_family_out, {method}: {100 * share:.0f}% of {int(group['runs'].iloc[0])} runs' "
            f"final rewards inside their 90% interval (target 85-95%): **{met}**."
        )
    columns = ["split", "method", "family", "runs", "final_cover90"]
    return pd.concat([rows, per_family], ignore_index=True)[columns], lines


def main(argv: list[str] | None = None) -> None:
    """Fit the held-out populations, score transfer and write the results."""
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO, format="%(asctime)s %(name)s: %(message)s"
    )
    logging.getLogger("bayesgrpo.model").setLevel(logging.ERROR)  # fit warnings are in the fit table
    warnings.simplefilter("ignore")

    from bayesgrpo.evaluate.backtest import kfold_populations
    from bayesgrpo.evaluate.transfer_eval import (
        family_out_populations,
        improvement_over,
        known_reward_bounds,
        run_out_populations,
        size_groups,
        size_out_populations,
        transfer_scores,
        transfer_summary,
    )
    from bayesgrpo.model.datasets import load_bundled

    command = "python benchmarks/transfer_eval.py" + "".join(
        " " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )
    machine = machine_line()
    table = load_bundled(warn=False)
    if args.runs is not None and args.runs < len(table):
        table = table.select(pick_runs(table, args.runs, args.seed))
    args.output_dir.mkdir(parents=True, exist_ok=True)
    fit_kwargs = {"draws": args.draws, "tune": args.draws, "chains": args.chains, "thin": DEFAULT_THIN}
    groups = size_groups(table, args.min_size_runs)
    sizes = args.sizes
    if args.quick and sizes is None:
        sizes = sorted(groups, key=lambda s: -len(groups[s]))[:2]
    sizes = sorted(groups) if sizes is None else sorted(float(s) for s in sizes)

    frames, fits, seconds = [], [], {}
    for split in args.splits:
        cache = None if args.cache is None else args.cache / split
        key = {"split": split, "runs": sorted(table.run_ids), "seed": args.seed, **fit_kwargs}
        if split == "kfold_by_run":
            key["folds"] = args.folds
            populations = cached_populations(
                cache,
                key,
                lambda: kfold_populations(table, args.folds, fit_kwargs=fit_kwargs, random_seed=args.seed),
            )
        elif split == "leave_one_family_out":
            populations = cached_populations(
                cache, key, lambda: family_out_populations(table, fit_kwargs, args.seed)
            )
        elif split == "leave_one_run_out":
            populations = cached_populations(
                cache, key, lambda: run_out_populations(table, None, fit_kwargs, args.seed)
            )
        else:
            key.update({"sizes": sizes, "min_runs": args.min_size_runs})
            populations = cached_populations(
                cache,
                key,
                lambda: size_out_populations(
                    table, fit_kwargs, args.seed, min_runs=args.min_size_runs, sizes=sizes
                ),
            )
        fit_table_rows = fit_table(split, populations, table)
        # the fits' own times, loaded from the cache or not (the wall time here is the load's)
        fit_seconds = float(fit_table_rows["seconds"].sum())
        fits.append(fit_table_rows)
        start = time.perf_counter()
        frames.append(
            transfer_scores(
                table,
                populations,
                split=split,
                prefixes=args.prefixes,
                n_draws=args.forecast_draws,
                random_seed=args.seed,
            )
        )
        seconds[split] = (fit_seconds, time.perf_counter() - start)
        logger.info("split %s: fits %.0f s, scores %.0f s", split, *seconds[split])

    frame = pd.concat(frames, ignore_index=True)
    frame.to_csv(args.output_dir / "transfer_eval_runs.csv", index=False)
    summary = transfer_summary(frame)
    gains = improvement_over(frame)
    fits_frame = pd.concat(fits, ignore_index=True)
    with_range = sum(known_reward_bounds(row) is not None for row in table.runs.to_dict("records"))
    timing = "; ".join(
        f"{s}: fits {f:.0f} s (their own times, cached or not), predictions and scores {p:.0f} s"
        for s, (f, p) in seconds.items()
    )
    prefixes = ", ".join(f"{100 * p:g}%" for p in args.prefixes)
    coverage, coverage_verdict = final_coverage(frame, table)
    lines = [
        "# Transfer evaluation on the bundled real runs",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine}. {timing}.  ",
        (
            f"Settings: {len(table)} runs ({with_range} with a stated reward range); populations (curve "
            f"{DEFAULT_CURVE}) {args.chains} chains x {args.draws} draws (thin {DEFAULT_THIN}) "
            f"+ {args.draws} tuning steps, default sampler; {args.forecast_draws} predictive draws "
            f"per forecast; prefixes {prefixes}."
        ),
        "",
        "## What is measured",
        "",
        (
            f"Splits. `kfold_by_run`: {args.folds}-fold cross-validation over runs, stratified by source "
            "(each run is predicted by the population fitted on the other folds); it stands in for "
            "leave-one-run-out, which would cost one fit per run. `leave_one_run_out` (when asked for): "
            "each run with a stated reward range is predicted by a population fitted on every other run, "
            f"one fit per run. `leave_one_size_out`: for each model size with at least {args.min_size_runs} "
            f"runs (held out: {', '.join(f'{s:g}B' for s in sizes)}), every run of that size is predicted by "
            "a population fitted on all the other runs (runs of unknown size stay in every population and "
            "are never held out). `leave_one_family_out`: every run of one model family is predicted by a "
            "population fitted on the runs of all other families, to which it is a new family."
        ),
        "",
        (
            "Methods. `zero_shot`: `predict_new_run` from the run's metadata only (family, size, task, "
            "batch and group size, reward range) and its planned horizon. `zero_shot_initial`: the same "
            "plus `initial_reward` = the run's first logged reward. `after_<p>`: the population updated "
            "live by the run's points in the first p of its step span. `population_mean`: `predict_new_run` "
            "with every covariate removed (the population's average run, same reward range and horizon). "
            "`run_alone_<p>`: the prefix fitted alone, exponential saturation law by least squares with a "
            "residual bootstrap (given the metadata reward range when stated; falls back to persistence "
            "below 5 points). Zero-shot and population-mean predictions need the reward range "
            f"(`reward_min`/`reward_max`): only the {with_range} runs that state it (all from verl logs) get "
            "those rows; the prefix methods run on every run."
        ),
        "",
        (
            "Scores. Every forecast is draws of the logged reward (curve draws plus one logged point's "
            "noise, Student-t with the population's nu and the run's sigma, as in the forecast backtest). "
            "CRPS (mean over the window's points) and the absolute error of the final reward (mean of the "
            "run's last 5% of points) are in units of the run's logged reward range. Windows: `whole_curve` "
            "= every logged point but the first (the first is `zero_shot_initial`'s input); `after_<p>` = "
            "the points after the p prefix, where every method is compared on the same points. Gains: `1 - "
            "score / population_mean's` over the runs both scored (0.3 = 30% better). `not_ok`: live "
            "updates with Pareto k > 0.7 or baselines that fell back to persistence. Raw rows: "
            "`transfer_eval_runs.csv`."
        ),
        "",
        "## A family it never saw: the final reward inside its 90% interval",
        "",
        (
            "The final reward is the mean of the run's last 5% of logged points; its interval, the 5% "
            "and 95% quantiles of the draws of that same mean (noise averaged over as many points). "
            "Zero-shot rows exist only for runs with a stated reward range; leaving a family out, "
            "those are the Qwen runs (predicted by a population whose runs on a stated range hold "
            "one Gemma run) and the Gemma run (from a population of Qwen runs)."
        ),
        "",
        *coverage_verdict,
        "",
        markdown_table(coverage),
        "",
        "## Against the target (zero-shot CRPS >= 30% better than the population-mean curve)",
        "",
        *verdict(gains),
        "",
        "## Gains over the population-mean curve",
        "",
        markdown_table(gains),
        "",
        "## Scores per split, window and method",
        "",
        markdown_table(summary),
        "",
        "## Population fits",
        "",
        markdown_table(fits_frame),
        "",
    ]
    (args.output_dir / "transfer_eval.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
