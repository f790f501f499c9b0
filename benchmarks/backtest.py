"""Backtests on the bundled real runs: forecasts from cut prefixes, and stopping rules run online.

Populations are fitted by K-fold cross-validation over runs (``bayesgrpo.evaluate.backtest.
kfold_populations``: each run is forecast from a population that never saw it); every run is
cut at 10/25/50% of its steps and its rest forecast by bayesgrpo and the baselines of
``bayesgrpo.evaluate.baselines`` on the same cuts; every stopping rule is run on every run.

Writes to ``benchmarks/results/`` (``--output-dir``):

* ``backtest_forecast.md`` and ``backtest_forecast_runs.csv`` (one row per run, cut, method);
* ``backtest_stopping.md``, ``backtest_stopping_runs.csv`` (one row per run and rule) and the
  frontier figure ``stopping_frontier.png``: the reward given up against the run's own end is the
  headline (all runs, and runs with and without a stated range apart), against its best smoothed
  point the second view, with the noise floor that view has;
* ``backtest_calibration_runs.csv`` (one row per run, online check and eps: the stop
  probability and what the run then did; summarised in ``backtest_stopping.md``).

Usage::

    python benchmarks/backtest.py                      # 5 folds, 500 + 500 draws per chain (~30+ min)
    python benchmarks/backtest.py --quick              # smoke run: 8 runs, 2 folds, tiny settings
    python benchmarks/backtest.py --cache /tmp/pops    # keep the fold fits for a rerun
    python benchmarks/backtest.py --split loso         # leave one source out (benchmarks/_loso.py's
                                                       # cached populations) -> results/loso/

``--quick`` writes to ``benchmarks/_scratch/backtest_quick/`` unless ``--output-dir`` is given.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.model.curves import DEFAULT_CURVE
from bayesgrpo.model.sampling import DEFAULT_THIN

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _markdown import machine_line, markdown_table

RESULTS = HERE / "results"
QUICK_OUTPUT = HERE / "_scratch" / "backtest_quick"
ALL_METHODS = ("bayesgrpo", "persistence", "exp_least_squares", "scalerl_sigmoid", "domhan_ensemble")
#: The stopping target, against the run's own end (the calibration issue's point 4, the headline):
#: at least this share of steps saved ...
END_TARGET_SAVED = 0.5
#: ... at no more than this share of the run's reward range given up against its end.
END_TARGET_GIVEN_UP = 0.01
#: The earlier bar, against the best smoothed point of the run (the second view): steps saved.
BEST_POINT_TARGET_SAVED = 0.4
#: The stop-decision issue's bar, against the run's end: a posterior rule that dominates these
#: fixed budgets (as many steps saved, no more given up) ...
BUDGETS = ("fixed 0.5", "fixed 0.6")
#: ... and saves at least this share of the steps at no more than this share of the range given up,
#: with its mean dip at the stop (``dip_at_stop``) within this share of the range either way.
BUDGET_TARGET_SAVED, BUDGET_TARGET_GIVEN_UP, DIP_TARGET = 0.45, 0.01, 0.01

logger = logging.getLogger("backtest")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line of the backtest benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--split",
        choices=["kfold", "loso"],
        default="kfold",
        help="kfold: K folds by run, stratified by source (default); loso: leave one source out, the "
        "populations of benchmarks/_loso.py (fitted there with the shipped population's settings); "
        "its results go to results/loso/",
    )
    parser.add_argument(
        "--folds", type=int, default=5, help="K of the K-fold population fits (number of runs: LOO)"
    )
    parser.add_argument(
        "--draws", type=int, default=500, help="population fit draws and tuning steps per chain"
    )
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--cuts", type=float, nargs="+", default=[0.1, 0.25, 0.5])
    parser.add_argument("--methods", nargs="+", default=list(ALL_METHODS), choices=ALL_METHODS)
    parser.add_argument("--curve", default=DEFAULT_CURVE, help="curve family of bayesgrpo's populations")
    parser.add_argument("--domhan-steps", type=int, default=1000, help="emcee steps of the Domhan ensemble")
    parser.add_argument("--forecast-draws", type=int, default=1000, help="predictive draws per forecast")
    parser.add_argument(
        "--check-every", type=float, default=0.05, help="Bayesian stopping checks, share of a run"
    )
    parser.add_argument(
        "--smoothing",
        type=float,
        default=0.05,
        help="centred rolling mean the reward given up is measured on, share of a run's points",
    )
    parser.add_argument("--runs", type=int, default=None, help="use this many runs (spread over sources)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="smoke run: 8 runs, 2 folds, tiny settings")
    parser.add_argument("--skip-forecast", action="store_true")
    parser.add_argument("--skip-stopping", action="store_true")
    parser.add_argument(
        "--skip-calibration", action="store_true", help="leave out the reliability of the stop probability"
    )
    parser.add_argument(
        "--cache", type=Path, default=None, help="folder to save / reuse the fold populations"
    )
    parser.add_argument("--output-dir", type=Path, default=None)
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="run each run's forecasts and stopping rules on a local Ray with this many workers "
        "(bayesgrpo[ray]; the rows equal the serial ones: benchmarks/fleet_backtest.py measures both)",
    )
    parser.add_argument("--address", default=None, help="... or on the Ray cluster at this address")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.folds, args.draws, args.runs = 2, 100, args.runs or 8
        args.domhan_steps, args.forecast_draws = min(args.domhan_steps, 100), min(args.forecast_draws, 300)
    default_dir = RESULTS / "loso" if args.split == "loso" else RESULTS
    args.output_dir = args.output_dir or (QUICK_OUTPUT if args.quick else default_dir)
    return args


def pick_runs(table, n: int, seed: int) -> list[str]:
    """``n`` runs spread over sources: one per source in turn, in a seeded order."""
    rng = np.random.default_rng(seed)
    runs = table.runs.assign(source=table.runs["source"].astype("string").fillna("?"))
    by_source = {
        s: list(rng.permutation(frame["run_id"].astype(str).to_numpy()))
        for s, frame in runs.groupby("source", sort=True)
    }
    picked: list[str] = []
    while len(picked) < n and any(by_source.values()):
        for source in sorted(by_source):
            if by_source[source] and len(picked) < n:
                picked.append(by_source[source].pop())
    return picked


def populations_for(table, args: argparse.Namespace) -> tuple[dict, pd.DataFrame]:
    """The K-fold populations (loaded from ``--cache`` when it holds the same settings) and a
    table of their fits.
    """
    from bayesgrpo.evaluate.backtest import fold_assignment, kfold_populations, source_groups
    from bayesgrpo.model.reward_model import RewardModel

    if args.split == "loso":
        from _loso import loso_populations

        populations = loso_populations(table)
        groups = source_groups(table)
        return populations, fits_table(populations, groups, "source")
    fit_kwargs = {"draws": args.draws, "tune": args.draws, "chains": args.chains, "thin": DEFAULT_THIN}
    key = {"runs": sorted(table.run_ids), "folds": args.folds, "seed": args.seed, **fit_kwargs}
    if args.curve != "weibull":  # (weibull caches written before the option keep their key)
        key["curve"] = args.curve
    folds = fold_assignment(table, args.folds, args.seed)
    populations = None
    if args.cache is not None and (args.cache / "settings.json").exists():
        if json.loads((args.cache / "settings.json").read_text()) == key:
            models = {k: RewardModel.load(args.cache / f"fold{k}.nc") for k in range(args.folds)}
            populations = {run_id: models[fold] for run_id, fold in folds.items()}
            logger.info("loaded %d fold populations from %s", args.folds, args.cache)
        else:
            logger.info("cache %s holds other settings: refitting", args.cache)
    if populations is None:
        populations = kfold_populations(
            table,
            args.folds,
            fit_kwargs=fit_kwargs,
            random_seed=args.seed,
            model_kwargs={"curve": args.curve},
        )
        if args.cache is not None:
            args.cache.mkdir(parents=True, exist_ok=True)
            for fold in range(args.folds):
                run_id = next(r for r, f in folds.items() if f == fold)
                populations[run_id].save(args.cache / f"fold{fold}.nc")
            (args.cache / "settings.json").write_text(json.dumps(key))
    groups = {fold: [r for r, f in folds.items() if f == fold] for fold in range(args.folds)}
    return populations, fits_table(populations, groups, "fold")


def fits_table(populations: dict, groups: dict, label: str) -> pd.DataFrame:
    """One row per held-out group (``label``: its name): the runs fitted and how the fit mixed."""
    rows = []
    for name, held in groups.items():
        model = populations[held[0]]
        d = model.diagnostics
        rows.append(
            {
                label: name,
                "runs_fitted": len(model.data.run_ids),
                "held_out": len(held),
                "seconds": d.seconds if d else np.nan,
                "divergences": d.divergences if d else -1,
                "max_r_hat": d.max_r_hat if d else np.nan,
                "min_ess_bulk": d.min_ess_bulk if d else np.nan,
            }
        )
    return pd.DataFrame(rows)


def forecast_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Median and mean of each score per cut and method."""
    grouped = frame.groupby(["cut", "method"], sort=False)
    out = grouped.agg(
        runs=("run_id", "nunique"),
        crps_median=("crps", "median"),
        crps_mean=("crps", "mean"),
        final_err_median=("final_abs_error", "median"),
        final_err_mean=("final_abs_error", "mean"),
        lpd_median=("lpd", "median"),
        lpd_mean=("lpd", "mean"),
        cover50_mean=("cover50", "mean"),
        cover90_mean=("cover90", "mean"),
        width50_median=("width50", "median"),
        width90_median=("width90", "median"),
        seconds_median=("seconds", "median"),
        not_ok=("status", lambda s: int((s != "ok").sum())),
    ).reset_index()
    order = {m: i for i, m in enumerate(ALL_METHODS)}
    return out.sort_values(
        ["cut", "method"], key=lambda c: c.map(order) if c.name == "method" else c
    ).reset_index(drop=True)


def win_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Per cut and baseline: runs where bayesgrpo scores better (CRPS, final error, LPD)."""
    rows = []
    for cut, at_cut in frame.groupby("cut", sort=True):
        wide = {m: at_cut[at_cut["method"] == m].set_index("run_id") for m in at_cut["method"].unique()}
        if "bayesgrpo" not in wide:
            continue
        bayes = wide["bayesgrpo"]
        for method, other in wide.items():
            if method == "bayesgrpo":
                continue
            runs = bayes.index.intersection(other.index)
            row = {"cut": cut, "baseline": method, "runs": len(runs)}
            for metric, better in (("crps", "lower"), ("final_abs_error", "lower"), ("lpd", "higher")):
                a, b = bayes.loc[runs, metric], other.loc[runs, metric]
                wins = (a < b) if better == "lower" else (a > b)
                row[f"{metric}_wins"] = f"{int(wins.sum())}/{len(runs)}"
            rows.append(row)
    return pd.DataFrame(rows)


#: The calibration issue's forecast targets (leave one source out, every cut): the 90% and 50%
#: intervals' mean coverage of later points ...
COVER90_TARGET = (0.88, 0.92)
COVER50_TARGET = (0.48, 0.52)
#: ... and the median CRPS at most this share of the best baseline's.
CRPS_VS_BEST_TARGET = 0.8


def calibration_targets(frame: pd.DataFrame, kinds: dict[str, str]) -> tuple[pd.DataFrame, list[str]]:
    """The forecast against the calibration issue's targets, per cut, for all runs and for runs with
    and without a stated range apart (its point 5): coverage of the 90% and 50% intervals, median
    CRPS against the best baseline's, and the final-reward error (mean over runs, as the quality
    bars above) against every baseline's.
    """
    from live_backtest import forecast_summary as summary_by_range

    summary = summary_by_range(frame, kinds)
    rows, lines = [], []
    for kind in ("all", "unstated", "stated"):
        for cut, part in summary[summary["range"] == kind].groupby("cut", sort=True):
            by_method = part.set_index("method")
            if "bayesgrpo" not in by_method.index or len(by_method) < 2:
                continue
            bayes = by_method.loc["bayesgrpo"]
            baselines = by_method.drop(index="bayesgrpo")
            best = baselines["crps_median"].idxmin()
            best_final = baselines["final_error_mean"].idxmin()
            row = {
                "cut": cut,
                "range": kind,
                "n": int(bayes["n"]),
                "cover90": bayes["cover90"],
                "cover50": bayes["cover50"],
                "crps": bayes["crps_median"],
                "best_baseline": best,
                "best_crps": baselines.loc[best, "crps_median"],
                "vs_best": bayes["crps_median"] / baselines.loc[best, "crps_median"],
                "final_error_mean": bayes["final_error_mean"],
                "best_final_baseline": best_final,
                "best_final_error_mean": baselines.loc[best_final, "final_error_mean"],
            }
            rows.append(row)
            met = {
                "cover90": COVER90_TARGET[0] <= row["cover90"] <= COVER90_TARGET[1],
                "cover50": COVER50_TARGET[0] <= row["cover50"] <= COVER50_TARGET[1],
                "crps": row["vs_best"] <= CRPS_VS_BEST_TARGET,
                "final": row["final_error_mean"] < row["best_final_error_mean"],
            }

            def said(ok: bool) -> str:
                return "met" if ok else "NOT met"

            lines.append(
                f"- {kind} ranges, cut {cut:g} ({row['n']} runs): 90% interval holds {row['cover90']:.1%} "
                f"({said(met['cover90'])}: {COVER90_TARGET[0]:.0%}-{COVER90_TARGET[1]:.0%}), 50% interval "
                f"{row['cover50']:.1%} ({said(met['cover50'])}: {COVER50_TARGET[0]:.0%}-"
                f"{COVER50_TARGET[1]:.0%}); median CRPS {row['crps']:.3f} = {row['vs_best']:.2f} x the best "
                f"baseline's ({best}; {said(met['crps'])}: <= {CRPS_VS_BEST_TARGET}); final-reward error "
                f"{row['final_error_mean']:.3f} against the best baseline's "
                f"{row['best_final_error_mean']:.3f} ({best_final}; {said(met['final'])}: below every "
                "baseline's)."
            )
    return pd.DataFrame(rows), lines


def forecast_verdict(summary: pd.DataFrame) -> list[str]:
    """Plain sentences on the DESIGN.md quality bars, from the summary (honest either way)."""
    lines = []
    for cut, at_cut in summary.groupby("cut", sort=True):
        at_cut = at_cut.set_index("method")
        if "bayesgrpo" not in at_cut.index:
            continue
        bayes = at_cut.loc["bayesgrpo"]
        others = at_cut.drop(index="bayesgrpo")
        lost_crps = [m for m in others.index if others.loc[m, "crps_median"] <= bayes["crps_median"]]
        lost_final = [m for m in others.index if others.loc[m, "final_err_mean"] <= bayes["final_err_mean"]]
        cover = bayes["cover90_mean"]
        lines.append(
            f"- cut {cut:g}: median CRPS {bayes['crps_median']:.3f} "
            + ("beats every baseline" if not lost_crps else f"does not beat {', '.join(lost_crps)}")
            + f"; final-reward MAE {bayes['final_err_mean']:.3f} "
            + ("beats every baseline" if not lost_final else f"does not beat {', '.join(lost_final)}")
            + f"; 90% intervals cover {100 * cover:.1f}% of held-out points "
            + ("(within the 85-95% bar)." if 0.85 <= cover <= 0.95 else "(outside the 85-95% bar).")
        )
    return lines


def given_up_with_reference(table, stops: pd.DataFrame, fraction) -> pd.Series:
    """``reward_given_up`` of every row of ``stops`` with the reference smoothed over ``fraction``
    of each run's points (or each run's cross-validated window, ``"cv"``).
    """
    from bayesgrpo.evaluate.backtest import reward_given_up, run_points, smoothed_reward

    reference = {}
    for run_id in stops["run_id"].unique():
        frame = run_points(table, run_id)
        rewards = frame["reward"].to_numpy(dtype=float)
        spread = float(rewards.max() - rewards.min()) or 1.0
        reference[run_id] = (smoothed_reward(rewards, fraction), spread, frame["step"].to_numpy(dtype=float))
    given_up = [reward_given_up(*reference[row.run_id], row.stop_step)[0] for row in stops.itertuples()]
    return pd.Series(given_up, index=stops.index)


def smoothing_sensitivity(table, stops, fractions=(0.05, 0.1, 0.2, "cv")):
    """Mean reward given up per rule with the reference smoothed over other shares of a run.

    The same stops, the same measure as ``stopping_backtest`` (``reward_given_up``), only the
    window changes: how much of ``full run``'s floor is noise left by a short window, and
    whether the ranking holds. ``"cv"``: each run's cross-validated window.
    """
    columns = {}
    for fraction in fractions:
        label = fraction if isinstance(fraction, str) else f"{fraction:g}"
        given_up = given_up_with_reference(table, stops, fraction)
        columns[f"given_up_window_{label}"] = given_up.groupby(stops["rule"]).mean()
    out = pd.DataFrame(columns)
    out.insert(0, "steps_saved_mean", stops.groupby("rule")["steps_saved"].mean())
    return out.sort_values("steps_saved_mean", ascending=False).reset_index(names="rule")


def target_lines(
    front: pd.DataFrame,
    dominated: pd.DataFrame,
    saved: float = END_TARGET_SAVED,
    given_up: float = END_TARGET_GIVEN_UP,
) -> tuple[str, str]:
    """The two verdicts of a stopping target (>= ``saved`` of the steps at <= ``given_up`` of the
    range; dominance of the fixed-fraction and patience rules), as sentence ends.
    """
    bayes = front[front["kind"] == "bayes"]
    within = bayes[bayes["given_up_mean"] <= given_up + 1e-12]
    hits = within[within["steps_saved_mean"] >= saved]
    if len(within):  # the rules inside the reward bar that save the most
        which, closest = (
            "most steps saved within the reward bar",
            within.sort_values("steps_saved_mean", ascending=False),
        )
    else:  # none inside it: the rules that give up the least
        which, closest = "least given up", bayes.sort_values("given_up_mean")
    target = (
        f"met by {', '.join(hits['rule'])}"
        if len(hits)
        else f"not met by any Bayesian rule ({which}: "
        + ", ".join(
            f"{r.rule}: {r.steps_saved_mean:.1%} saved at {r.given_up_mean:+.3f}"
            for r in closest.head(3).itertuples()
        )
        + ")"
    )
    undominated = dominated[dominated["dominated by"] == "none"]["baseline rule"].tolist()
    return target, ("all of them" if not undominated else f"not {', '.join(undominated)}")


def budget_verdict(table: pd.DataFrame, label: str) -> list[str]:
    """The stop-decision issue's targets in words, for one set of runs.

    ``table``: one row per rule with ``rule``, ``kind`` (``"bayes"`` for the posterior rules),
    ``steps_saved``, ``vs_end`` (mean reward given up against the run's end) and ``dip`` (mean dip
    at the stop), means over the set's runs. Lines: which posterior rules dominate each budget of
    :data:`BUDGETS`; which save >= :data:`BUDGET_TARGET_SAVED` at <= :data:`BUDGET_TARGET_GIVEN_UP`
    with ``|dip| <=`` :data:`DIP_TARGET`; and which one rule does all of it.
    """
    bayes = table[table["kind"] == "bayes"]
    by_rule = table.set_index("rule")
    lines, dominating = [], []
    for name in BUDGETS:
        ref = by_rule.loc[name]
        better = bayes[(bayes["steps_saved"] >= ref["steps_saved"]) & (bayes["vs_end"] <= ref["vs_end"])]
        dominating.append(set(better["rule"]))
        lines.append(
            f"- {label}: `{name}` ({ref['steps_saved']:.0%} saved, {ref['vs_end']:+.1%} vs the end) is "
            + (
                "dominated by " + ", ".join(f"`{r}`" for r in better["rule"])
                if len(better)
                else "dominated by no posterior rule"
            )
            + "."
        )
    bar = bayes[
        (bayes["steps_saved"] >= BUDGET_TARGET_SAVED)
        & (bayes["vs_end"] <= BUDGET_TARGET_GIVEN_UP)
        & (bayes["dip"].abs() <= DIP_TARGET)
    ]
    lines.append(
        f"- {label}: >= {BUDGET_TARGET_SAVED:.0%} saved at <= {BUDGET_TARGET_GIVEN_UP:.0%} given up vs the "
        f"end with a mean dip within {DIP_TARGET:.0%}: "
        + (", ".join(f"`{r}`" for r in bar["rule"]) if len(bar) else "no posterior rule")
        + "."
    )
    every = [r for r in bar["rule"] if all(r in d for d in dominating)]
    lines.append(
        f"- {label}: one posterior rule that does all of it (dominates {' and '.join(BUDGETS)}, and the bar "
        "above): " + (", ".join(f"`{r}`" for r in every) if every else "none") + "."
    )
    return lines


def run_kinds(table) -> dict[str, str]:
    """``run_id -> "stated range"`` or ``"own range"`` (no ``reward_min``/``reward_max``)."""
    from bayesgrpo.questions.live import stated_reward_range

    return {
        str(row["run_id"]): "stated range" if stated_reward_range(row) is not None else "own range"
        for row in table.runs.to_dict("records")
    }


def against_end(stops: pd.DataFrame) -> pd.DataFrame:
    """``stops`` with the reward given up measured against each run's own end (``reward_vs_end``)."""
    return stops.assign(reward_given_up=stops["reward_vs_end"])


def end_target_lines(table, stops: pd.DataFrame) -> list[str]:
    """The headline verdicts against the run's end, for all runs and for runs with and without a
    stated reward range apart (the calibration issue's points 4 and 5).
    """
    from bayesgrpo.evaluate.backtest import frontier

    kinds = stops["run_id"].map(run_kinds(table))
    lines = []
    for label, part in (
        ("all runs", stops),
        ("runs without a stated range", stops[kinds == "own range"]),
        ("runs with a stated range", stops[kinds == "stated range"]),
    ):
        if part.empty:
            continue
        front = frontier(against_end(part))
        target, dominated = target_lines(front, dominance(front))
        lines.append(
            f"- {label} ({part['run_id'].nunique()}): >= {END_TARGET_SAVED:.0%} of steps saved at <= "
            f"{END_TARGET_GIVEN_UP:.0%} of the range given up against the run's end: {target}; fixed and "
            f"patience rules dominated by a bayesgrpo rule (as many steps saved, no more given up "
            f"against the end): {dominated}."
        )
    return lines


def budget_lines(stops: pd.DataFrame, kinds: dict[str, str], labels: dict[str, str]) -> list[str]:
    """:func:`budget_verdict` for all runs and for each kind of run apart.

    ``stops``: the stopping backtest's rows (with ``dip``); ``kinds``: run_id -> kind;
    ``labels``: kind -> the words for its runs.
    """
    from bayesgrpo.evaluate.backtest import frontier

    lines = []
    run_kind = stops["run_id"].map(kinds)
    for kind, words in {"all": "all runs", **labels}.items():
        part = stops if kind == "all" else stops[run_kind == kind]
        if part.empty:
            continue
        front = frontier(against_end(part)).rename(
            columns={"steps_saved_mean": "steps_saved", "given_up_mean": "vs_end", "dip_mean": "dip"}
        )
        lines += budget_verdict(front, f"{words} ({part['run_id'].nunique()})")
    return lines


def by_kind_of_run(table, stops: pd.DataFrame) -> pd.DataFrame:
    """Mean steps saved and reward given up (against the run's end, and against its best smoothed
    point) per rule, for runs with a stated reward range and runs normalised by their own range
    (the two behave differently: long clean verl runs against short noisy notebook runs).
    """
    kind = stops["run_id"].map(run_kinds(table))
    out = stops.assign(run_kind=kind).pivot_table(
        index="rule",
        columns="run_kind",
        values=["steps_saved", "reward_vs_end", "reward_given_up", "dip"],
        aggfunc="mean",
    )
    out.columns = [f"{metric}_{run_kind}".replace(" ", "_") for metric, run_kind in out.columns]
    order = [
        f"{m}_{k}"
        for m in ("steps_saved", "reward_vs_end", "reward_given_up", "dip")
        for k in ("own_range", "stated_range")
    ]
    out = out[[c for c in order if c in out.columns]]
    counts = kind.groupby(stops["run_id"]).first().value_counts()
    out = out.reset_index().sort_values("rule")
    out.attrs["runs"] = {k: int(v) for k, v in counts.items()}
    return out


def calibration_section(table, populations, args: argparse.Namespace) -> list[str]:
    """Reliability of the stop probability: stated P(gain < eps) against how often it came true."""
    from bayesgrpo.evaluate.backtest import calibration_table, stop_probability_calibration

    start = time.perf_counter()
    checks = stop_probability_calibration(
        table,
        populations,
        eps_values=(0.01, 0.02),
        check_every_fraction=args.check_every,
        n_draws=args.forecast_draws,
        random_seed=args.seed,
    )
    seconds = time.perf_counter() - start
    checks.to_csv(args.output_dir / "backtest_calibration_runs.csv", index=False)
    lines = [
        "## Is the stop probability right? (reliability)",
        "",
        (
            f"At every check (every {args.check_every:g} of a run, {checks['run_id'].nunique()} runs, "
            f"{len(checks) // 2} checks, {seconds:.0f} s) the live update's P(gain to the last step < eps) "
            "is set against what the run then did: the gain of its smoothed reward (each run's "
            "cross-validated window) from the check to its last step, in the same unit as eps (a share of "
            "the bounds the update used). A calibrated probability comes true as often as it says. The "
            "rule's probability is about the curve's gain; the outcome is read on smoothed logged rewards, "
            "which keep some noise, so a run on its plateau can still show a gain or loss. The predictive "
            "probability is the model's probability of that outcome itself (later points drawn with their "
            "noise, smoothed the same way): it is the fair test of the model's honesty, the first tells how "
            "often a stop's promise held on the logged rewards. Checks of one run are not independent; raw "
            "rows: `backtest_calibration_runs.csv`."
        ),
        "",
    ]
    for column, label in (
        ("probability", "the rule's P(curve gain < eps)"),
        ("predictive_probability", "the predictive P(smoothed logged gain < eps)"),
    ):
        lines += [f"### {label}", ""]
        for eps, part in checks.groupby("eps"):
            brier = float(((part[column] - part["below"].astype(float)) ** 2).mean())
            base = float(part["below"].mean())
            high = part[part[column] >= 0.9]
            lines.append(
                f"- eps {eps:g}: Brier score {brier:.3f} (always saying the base rate {base:.2f}: "
                f"{base * (1 - base):.3f}); of the {len(high)} checks with P >= 0.9 (mean "
                f"{high[column].mean():.3f}), {high['below'].mean():.1%} gained less than eps."
            )
        lines += ["", markdown_table(calibration_table(checks, column=column)), ""]
    return lines


def stopping_rules() -> dict:
    """The stopping rules the backtest compares, by label."""
    from bayesgrpo.evaluate.backtest import FixedFraction, MedianPruning, Patience
    from bayesgrpo.questions.stopping import GuardedBudgetRule, PlateauRule

    rules: dict = {}
    for eps in (0.005, 0.01, 0.02, 0.03):
        for prob in (0.8, 0.9, 0.95):
            rules[f"plateau eps={eps:g} p={prob:g}"] = PlateauRule(eps, prob, relative=True)
    # a budget the posterior may move (its defaults: past the budget on while P(gain < 2%) < 0.3,
    # before it only where P(gain < 1%) >= 0.9, neither while the logged reward still rises;
    # benchmarks/experiments/README.md: stop_guarded_budget, stop_momentum.py)
    for fraction in (0.5, 0.6):
        rules[f"guarded budget {fraction:g}"] = GuardedBudgetRule(fraction)
    # the opt-in flat stop (2026-11-29): from 20% of the run, stop where the logged reward rose
    # < 2% of the range over its latest 20% (benchmarks/experiments/README.md: stop_flat_evidence)
    rules["guarded budget 0.5, flat stop 0.02"] = GuardedBudgetRule(0.5, flat_eps=0.02)
    # the default before the rise guard (2026-11-28), kept as the benchmarks' reference
    rules["guarded budget 0.5, no rise guard"] = GuardedBudgetRule(0.5, early_prob=0.95, rising_eps=None)
    for fraction in (0.5, 0.6, 0.7, 0.8, 0.9):
        rules[f"fixed {fraction:g}"] = FixedFraction(fraction)
    rules["full run"] = FixedFraction(1.0)
    for patience in (0.1, 0.2, 0.3):
        for window in (0.05, 0.1):
            rules[f"patience {patience:g} window {window:g}"] = Patience(patience, window)
    rules["median pruning"] = MedianPruning()
    return rules


def dominance(front: pd.DataFrame) -> pd.DataFrame:
    """For each fixed-fraction and patience rule: the Bayesian rules that save at least as many
    steps at no more mean reward given up.
    """
    bayes = front[front["kind"] == "bayes"]
    rows = []
    for row in front[front["kind"].isin(["fixed_fraction", "patience"])].itertuples(index=False):
        if row.rule == "full run":
            continue
        better = bayes[
            (bayes["steps_saved_mean"] >= row.steps_saved_mean)
            & (bayes["given_up_mean"] <= row.given_up_mean)
        ]
        rows.append(
            {
                "baseline rule": row.rule,
                "saved": row.steps_saved_mean,
                "given up": row.given_up_mean,
                "dominated by": ", ".join(better["rule"]) if len(better) else "none",
            }
        )
    return pd.DataFrame(rows)


def plot_frontiers(end_front: pd.DataFrame, best_front: pd.DataFrame, path: Path, title: str) -> None:
    """Draw the stopping frontier against the run's end (left, the headline) and against its best
    smoothed point (right) to ``path``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5.6))
    plot_frontier(
        end_front,
        axes[0],
        "against the run's own end",
        target=(END_TARGET_SAVED, END_TARGET_GIVEN_UP),
        floor_label=None,
    )
    plot_frontier(
        best_front,
        axes[1],
        "against the run's best smoothed point",
        target=(BEST_POINT_TARGET_SAVED, END_TARGET_GIVEN_UP),
        floor_label="running every run to its end gives up {floor:.1%}",
    )
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def plot_frontier(
    front: pd.DataFrame,
    ax,
    measure: str,
    target: tuple[float, float],
    floor_label: str | None,
) -> None:
    """Draw one stopping frontier (steps saved against reward given up by ``measure``) on ``ax``,
    the target's region (>= ``target[0]`` saved at <= ``target[1]`` given up) shaded.
    """
    colours = {"bayes": "C0", "fixed_fraction": "C1", "patience": "C2", "median_pruning": "C3"}
    labels = {
        "bayes": "bayesgrpo rule (plateau, guarded budget)",
        "fixed_fraction": "fixed fraction",
        "patience": "patience",
        "median_pruning": "median pruning",
    }
    from matplotlib.patches import Rectangle

    bottom = min(0.0, float(front["given_up_mean"].min()) * 1.2 - 0.005)
    top = max(0.05, float(front["given_up_mean"].max()) * 1.15)
    saved, given_up = target
    ax.add_patch(
        Rectangle(
            (saved, bottom),
            1.0 - saved,
            given_up - bottom,
            facecolor="0.8",
            edgecolor="0.4",
            lw=0.8,
            zorder=0,
        )
    )
    ax.annotate(
        f"target: >= {saved:.0%} saved at <= {given_up:.0%} given up",
        ((1.0 + saved) / 2, given_up),
        xytext=(0.55, 0.05 - bottom / (top - bottom)),
        textcoords="axes fraction",
        fontsize=8,
        color="0.3",
        arrowprops={"arrowstyle": "-", "color": "0.5"},
    )
    if bottom < 0:
        ax.axhline(0.0, color="0.6", linewidth=0.6, zorder=0)
    full = front[front["rule"] == "full run"]
    if len(full) and floor_label is not None:
        floor = float(full["given_up_mean"].iloc[0])
        ax.axhline(floor, color="0.5", linestyle="--", linewidth=0.8, zorder=0)
        ax.text(
            0.99,
            floor,
            floor_label.format(floor=floor),
            fontsize=7,
            color="0.35",
            ha="right",
            va="bottom",
            transform=ax.get_yaxis_transform(),
        )
    for kind, part in front.groupby("kind"):
        colour = colours.get(kind, "k")
        ax.plot(
            part["steps_saved_mean"],
            part["given_up_mean"],
            "o",
            color=colour,
            label=labels.get(kind, kind),
            alpha=0.85,
            markersize=5,
        )
        if kind == "bayes":
            # the rules no other plateau rule beats on both axes, joined: the plateau rule's frontier
            efficient = part.sort_values("steps_saved_mean")
            efficient = efficient[
                [
                    not (
                        (part["steps_saved_mean"] >= r.steps_saved_mean)
                        & (part["given_up_mean"] < r.given_up_mean)
                    ).any()
                    for r in efficient.itertuples(index=False)
                ]
            ]
            ax.plot(
                efficient["steps_saved_mean"],
                efficient["given_up_mean"],
                "-",
                color=colour,
                linewidth=1,
                alpha=0.7,
            )
            shown = efficient
        else:
            shown = part[part["rule"] != "full run"]
        for row in shown.itertuples(index=False):
            text = row.rule.replace("plateau eps=", "").replace(" p=", "/").replace("patience ", "pat. ")
            ax.annotate(
                text.replace(" window ", " w "),
                (row.steps_saved_mean, row.given_up_mean),
                fontsize=6,
                xytext=(3, -8 if kind == "bayes" else 4),
                textcoords="offset points",
                color=colour,
            )
    ax.set_xlabel("mean share of steps saved")
    ax.set_ylabel(f"mean reward given up {measure}\n(share of the run's reward range)")
    ax.set_xlim(-0.02, 1.0)
    ax.set_ylim(bottom, top)
    ax.text(
        0.01,
        0.01,
        "plateau labels: eps/prob; the 90th percentiles are in backtest_stopping.md",
        fontsize=6,
        color="0.4",
        transform=ax.transAxes,
    )
    ax.set_title(measure, fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=4, frameon=False)


def main(argv: list[str] | None = None) -> None:
    """Run the forecast and stopping backtests and write their results."""
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO, format="%(asctime)s %(name)s: %(message)s"
    )
    logging.getLogger("bayesgrpo.model").setLevel(logging.ERROR)  # fit warnings are in the fit table
    warnings.simplefilter("ignore")

    from bayesgrpo.evaluate.backtest import forecast_backtest, frontier, stopping_backtest
    from bayesgrpo.model.datasets import load_bundled

    command = "python benchmarks/backtest.py" + "".join(
        " " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )
    engine = (
        "serial"
        if args.workers is None and args.address is None
        else (f"Ray ({args.address or f'{args.workers} local workers'})")
    )
    machine = f"{machine_line()}; per-run work {engine}"
    table = load_bundled(warn=False)
    if args.runs is not None and args.runs < len(table):
        table = table.select(pick_runs(table, args.runs, args.seed))
    args.output_dir.mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    need_populations = (not args.skip_stopping) or ("bayesgrpo" in args.methods and not args.skip_forecast)
    populations, fits = populations_for(table, args) if need_populations else (None, pd.DataFrame())
    # the fits' own times, loaded from a cache or not (the wall time here is the load's)
    fit_seconds = float(fits["seconds"].sum()) if len(fits) else time.perf_counter() - start
    if args.split == "loso":
        from _loso import FIT

        settings = (
            f"{len(table)} runs; populations: leave one source out (each run predicted by a population "
            "fitted without any run of its notebook, recipe or repository: `benchmarks/_loso.py`), "
            f"curve {DEFAULT_CURVE}, {FIT['chains']} chains x {FIT['draws']} draws (every {FIT['thin']}th "
            f"iteration) + {FIT['tune']} tuning "
            f"steps, default sampler; each run's stated range given; {args.forecast_draws} predictive "
            "draws per forecast."
        )
    else:
        settings = (
            f"{len(table)} runs; populations: {args.folds}-fold by run (stratified by source), curve "
            f"{args.curve}, {args.chains} chains x {args.draws} draws (thin {DEFAULT_THIN}) + {args.draws} "
            f"tuning steps, default sampler; {args.forecast_draws} predictive draws per forecast."
        )

    if not args.skip_forecast:
        start = time.perf_counter()
        options = (
            {"domhan_ensemble": {"n_steps": args.domhan_steps}} if "domhan_ensemble" in args.methods else {}
        )
        frame = forecast_backtest(
            table,
            populations,
            cuts=args.cuts,
            methods=args.methods,
            baseline_options=options,
            n_draws=args.forecast_draws,
            random_seed=args.seed,
            workers=args.workers,
            address=args.address,
        )
        seconds = time.perf_counter() - start
        frame.to_csv(args.output_dir / "backtest_forecast_runs.csv", index=False)
        summary = forecast_summary(frame)
        wins = win_counts(frame)
        from live_backtest import range_kinds

        by_range, target_verdicts = calibration_targets(frame, range_kinds(table))
        lines = [
            "# Forecast backtest on the bundled real runs",
            "",
            f"Command: `{command}`  ",
            f"Machine: {machine}. Population fits {fit_seconds:.0f} s (their own times, cached or not); "
            f"forecasts and scores {seconds:.0f} s.  ",
            f"Settings: {settings} Domhan ensemble: {args.domhan_steps} emcee steps.",
            "",
            (
                "Each run is cut at a share of its step span; every method sees only the points up to the "
                "cut and forecasts every later logged point, as draws of the logged reward (noise "
                "included). bayesgrpo conditions the prefix on a population fitted without the run (live "
                "update, no refit). CRPS, interval widths and the final-reward error are in units of the "
                "run's full logged reward range (max - min of all its points); the final reward is the mean "
                "of the run's last 5% of points; LPD is per held-out point (Gaussian KDE of the draws), in "
                "nats, of the reward over that range. Lower is better for CRPS, error and width; higher for "
                "LPD; coverage should match 50% / 90%. `not_ok`: forecasts that fell back to persistence "
                "(baselines) or whose live update had Pareto k > 0.7 (bayesgrpo). Raw rows: "
                "`backtest_forecast_runs.csv`."
            ),
            "",
            "## Against the quality bars (DESIGN.md section 6)",
            "",
            *forecast_verdict(summary),
            "",
            "## Against the calibration issue's targets, with and without a stated range",
            "",
            (
                "`stated` / `unstated`: whether the run's metadata states a reward range (given to every "
                "method here). Coverage: mean over runs; CRPS: median over runs; final-reward error: mean "
                "over runs."
            ),
            "",
            *target_verdicts,
            "",
            markdown_table(by_range),
            "",
            "## Scores per cut and method",
            "",
            markdown_table(summary),
            "",
            "## Runs where bayesgrpo scores better than each baseline",
            "",
            markdown_table(wins) if len(wins) else "(bayesgrpo not run)",
            "",
        ]
        if len(fits):
            lines += ["## Population fits", "", markdown_table(fits), ""]
        (args.output_dir / "backtest_forecast.md").write_text("\n".join(lines))
        print("\n".join(lines))

    if not args.skip_stopping:
        start = time.perf_counter()
        rules = stopping_rules()
        stops = stopping_backtest(
            table,
            populations,
            rules,
            check_every_fraction=args.check_every,
            smoothing_fraction=args.smoothing,
            n_draws=args.forecast_draws,
            random_seed=args.seed,
            workers=args.workers,
            address=args.address,
        )
        seconds = time.perf_counter() - start
        stops.to_csv(args.output_dir / "backtest_stopping_runs.csv", index=False)
        end_front = frontier(against_end(stops))
        end_dominated = dominance(end_front)
        front = frontier(stops)
        target, dominance_verdict = target_lines(front, dominance(front), saved=BEST_POINT_TARGET_SAVED)
        floor = float(front.loc[front["rule"] == "full run", "given_up_mean"].iloc[0])
        cv_stops = stops.assign(reward_given_up=given_up_with_reference(table, stops, "cv"))
        cv_front = frontier(cv_stops)
        cv_target, cv_dominance = target_lines(cv_front, dominance(cv_front), saved=BEST_POINT_TARGET_SAVED)
        cv_floor = float(cv_front.loc[cv_front["rule"] == "full run", "given_up_mean"].iloc[0])
        kinds = by_kind_of_run(table, stops)
        plot_frontiers(
            end_front,
            front,
            args.output_dir / "stopping_frontier.png",
            f"Stopping rules on {len(table)} real runs (checks every {args.check_every:g} of a run)",
        )
        lines = [
            "# Stopping backtest on the bundled real runs",
            "",
            f"Command: `{command}`  ",
            f"Machine: {machine}. Population fits {fit_seconds:.0f} s (their own times, cached or not); "
            f"stopping backtest {seconds:.0f} s.  ",
            f"Settings: {settings}",
            "",
            (
                "Every rule runs on every run as it would live. The bayesgrpo rule `PlateauRule(eps, prob, "
                "relative=True)` (stop when P(gain to the run's last step < eps) >= prob) is asked every "
                f"{args.check_every:g} of the run's step span, from a live update of the points logged so "
                "far on a population that never saw the run; its eps is a share of the reward bounds the "
                "live update uses (metadata bounds where known; else the run's whole range estimated from "
                "the prefix's range the way the population's runs relate the two at the same progress, "
                "widened by half of itself each side, as the population's runs were). Fixed fraction: stop "
                "at that share of the run's last logged step. Patience: Keras-style on a trailing mean "
                "(patience and window as shares of the run's points). Median pruning: Optuna's MedianPruner "
                "against the other runs of the same source (5 startup runs, 10% warmup), a run with fewer "
                "peers is never pruned. Steps saved: (last step - stop step) / last step. Reward given up "
                "against the run's end (the headline): smoothed reward at the run's last point - smoothed "
                "reward at the stop, / the run's reward range (negative: the stop kept more than running "
                "on); smoothed = centred rolling mean over "
                f"{args.smoothing:.0%} of the run's points. Against the best point (the second view): the "
                "best smoothed reward of the whole run - the smoothed reward at the stop, floored at 0; even "
                "`full run` (never stop) gives some up there, on runs that peak and fall or through noise "
                "left after smoothing (its noise floor). Raw rows: `backtest_stopping_runs.csv`; figure: "
                "`stopping_frontier.png` (left: against the end; right: against the best point)."
            ),
            "",
            "## Against the target (reward given up against the run's own end)",
            "",
            *end_target_lines(table, stops),
            "",
            "## Against the stop-decision issue's bar (a fixed budget beaten, the dip at the stop)",
            "",
            (
                "A posterior rule should dominate `fixed 0.5` and `fixed 0.6` against the run's end, save "
                f">= {BUDGET_TARGET_SAVED:.0%} of the steps at <= {BUDGET_TARGET_GIVEN_UP:.0%} of the range "
                "given up, and stop outside the run's dips: its mean dip at the stop (the smoothed reward "
                "there minus the mean logged reward over the 10% of the run around it, a share of the "
                f"range; `dip_mean` below) within {DIP_TARGET:.0%} either way. Fixed budgets' dips are the "
                "noise of where they fall; `full run`'s is that of the run's last points."
            ),
            "",
            *budget_lines(
                stops,
                run_kinds(table),
                {"own range": "runs without a stated range", "stated range": "runs with a stated range"},
            ),
            "",
            "## Frontier against the run's end",
            "",
            "`given_up_*`: against the run's own end (negative: the stop kept more than running on).",
            "",
            markdown_table(end_front.drop(columns="vs_end_mean")),
            "",
            "## Dominance against the run's end",
            "",
            markdown_table(end_dominated),
            "",
            "## Second view: against the run's best smoothed point",
            "",
            (
                f"The noise floor: running every run to its end gives up {floor:.3f} of the range against "
                f"its best smoothed point ({args.smoothing:.0%} window) and {cv_floor:.3f} with each run's "
                "cross-validated window; a rule's number here is read against it."
            ),
            "",
            (
                f"- >= {BEST_POINT_TARGET_SAVED:.0%} of steps saved at mean reward given up <= "
                f"{END_TARGET_GIVEN_UP:.0%} of the range (the earlier bar): {target}."
            ),
            (
                "- fixed-fraction and patience rules dominated by a bayesgrpo rule (at least as many steps "
                f"saved at no more mean reward given up): {dominance_verdict}."
            ),
            (
                "- The same stops with the reference smoothed over each run's cross-validated window (wide "
                "for a noisy flat run, narrow for a clean rise; see the sensitivity table): the bar is "
                f"{cv_target}; dominated: {cv_dominance}."
            ),
            "",
            markdown_table(front),
            "",
            "### Dominance against the best point",
            "",
            markdown_table(dominance(front)),
            "",
            "### Sensitivity to the smoothing window of the reference",
            "",
            (
                "Mean reward given up by the same stops when the reference is smoothed over 5% (the table "
                "above), 10% or 20% of each run's points, or over each run's cross-validated window (`cv`: "
                "the odd window whose mean best predicts each point from its neighbours, left out; wide for "
                "a noisy flat run, 3% of the points for the clean verl runs). With a wider window less of "
                "the noise of single logged rewards is left in the best smoothed point, so `full run`'s "
                "floor falls; what is left is runs that peak and then fall, which no rule that waits for a "
                "plateau avoids."
            ),
            "",
            markdown_table(smoothing_sensitivity(table, stops)),
            "",
            "## By kind of run",
            "",
            (
                "Runs with a stated reward range ("
                + ", ".join(f"{n} {k}" for k, n in sorted(kinds.attrs["runs"].items(), reverse=True))
                + " runs) are long verl runs logged every step; runs without one are short, noisy notebook "
                "runs, normalised by their own range. `reward_vs_end`: given up against the run's end; "
                f"`reward_given_up`: against its best smoothed point ({args.smoothing:.0%} window); `dip`: "
                "the mean dip at the stop."
            ),
            "",
            markdown_table(kinds),
            "",
        ]
        if not args.skip_calibration:
            lines += calibration_section(table, populations, args)
        (args.output_dir / "backtest_stopping.md").write_text("\n".join(lines))
        print("\n".join(lines))


if __name__ == "__main__":
    main()
