"""Pruning replayed studies: bayesgrpo's RewardCurvePruner against Optuna's own pruners.

Each source of the bundled runs with at least ``--min-runs`` runs (one verl recipe, one notebook
with its editions: runs of one task, with different settings) becomes a study; its runs are its
trials, replayed in a random order (``--orders`` seeds): trial k reports run k's reward at every
logged step, checks ``trial.should_prune()``, and if it runs to the end returns its final reward
(the mean of its last 10% of logged rewards). Every pruner sees the same studies in the same
orders: no pruning (``NopPruner``), ``MedianPruner``, ``PercentilePruner`` (25th), ``HyperbandPruner``,
``WilcoxonPruner`` and bayesgrpo's ``RewardCurvePruner``, whose population never saw the study's
source (the leave-one-source-out populations of ``benchmarks/_loso.py``); ``bayesgrpo_study`` is
the same pruner with a population fitted on the study's own finished trials once four have
finished (``fit_after=4``); ``bayesgrpo_own_range`` the same pruner with ``study_reach=False`` (a trial
without a stated range read on its own values alone, not on the span of the finished trials).
Two oracles bound what a pruner that never risks the best trial could do: ``oracle`` knows the
running trial's final value (not the trials still to come) and prunes it at the end of the warm-up
exactly when it will not beat the best finished trial (after the same startup trials). Without
knowing the trials to come, a trial that would beat every finished one may be the study's best, so
a pruner that is never to lose the best must let it finish: ``oracle`` spends the fewest steps such
a pruner can at these settings. ``oracle_no_startup`` does the same from the second trial on (as
Hyperband and Wilcoxon, which have no startup setting).

Measured per study and order: the steps spent (reports made), and the regret: the best final
reward among the trials that finished, below the best final reward of all the study's runs, in
units of the study's reward range. The target (issue 19): fewer total steps than every other
pruner at no worse best-found final reward.

Usage::

    python benchmarks/optuna_pruning.py              # 5 studies x 10 orders x 7 pruners
    python benchmarks/optuna_pruning.py --orders 2   # quicker

Resumable: each (study, order, pruner) result is appended to
``benchmarks/_scratch/optuna_pruning_rows.csv`` and skipped when found there with the same settings
(and, for bayesgrpo's pruners, the same code of the package's model, questions and evaluate
layers and of its Optuna integration).
Writes ``benchmarks/results/optuna_pruning.md`` and ``optuna_pruning_runs.csv``; with
``--likelihood-weight W`` (the pruner's live update tempered by ``W`` instead of its default),
``optuna_pruning_w<W>.md`` and ``optuna_pruning_w<W>_runs.csv``.
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
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _loso import loso_populations
from _markdown import machine_line, markdown_table
from live_backtest import code_hash

RESULTS = HERE / "results"
ROWS = HERE / "_scratch" / "optuna_pruning_rows.csv"
FINAL_SHARE = 0.1
PRUNERS = (
    "none",
    "median",
    "percentile25",
    "hyperband",
    "wilcoxon",
    "bayesgrpo",
    "bayesgrpo_study",
    "bayesgrpo_own_range",
    "oracle",
    "oracle_no_startup",
)
#: Not pruners a user can have: they know each trial's final value (what is reachable at all).
ORACLES = ("oracle", "oracle_no_startup")

logger = logging.getLogger("optuna_pruning")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=10, help="random trial orders per study")
    parser.add_argument("--min-runs", type=int, default=4, help="sources with fewer runs are no study")
    parser.add_argument("--startup", type=int, default=2, help="n_startup_trials of every pruner")
    parser.add_argument("--warmup", type=float, default=0.1, help="warm-up, share of the trial's steps")
    parser.add_argument("--interval", type=float, default=0.05, help="check every this share of the steps")
    parser.add_argument("--min-prob", type=float, default=0.05, help="RewardCurvePruner's min_prob_beat_best")
    parser.add_argument(
        "--likelihood-weight",
        type=float,
        default=None,
        help="RewardCurvePruner's likelihood_weight (default: the pruner's own)",
    )
    parser.add_argument("--pruners", nargs="+", default=list(PRUNERS), choices=PRUNERS)
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    parser.add_argument("--rows", type=Path, default=ROWS, help="resumable rows (append-only CSV)")
    return parser.parse_args(argv)


def final_reward(rewards: np.ndarray) -> float:
    """A run's final reward: the mean of its last 10% of logged rewards (at least one)."""
    n = max(1, int(np.ceil(FINAL_SHARE * len(rewards))))
    return float(np.mean(rewards[-n:]))


def oracle_pruner(n_startup_trials: int, n_warmup_steps: int) -> Any:
    """A pruner that knows each trial's final value (user attribute ``final``): at the end of the
    warm-up it prunes exactly the trials that will not beat the best finished one.
    """
    import optuna

    class OraclePruner(optuna.pruners.BasePruner):
        def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
            step = trial.last_step
            if step is None or step < n_warmup_steps:
                return False
            finished = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if len(finished) < max(1, n_startup_trials):
                return False
            return bool(trial.user_attrs["final"] < max(t.value for t in finished))

    return OraclePruner()


def make_pruner(name: str, horizon: int, args: argparse.Namespace, study: dict[str, Any]) -> Any:
    """One pruner, with the shared settings scaled to the study's trial length."""
    import optuna

    from bayesgrpo.integrations.optuna import RewardCurvePruner

    warmup = max(1, int(round(args.warmup * horizon)))
    interval = max(1, int(round(args.interval * horizon)))
    if name in ORACLES:
        return oracle_pruner(args.startup if name == "oracle" else 0, warmup)
    if name == "none":
        return optuna.pruners.NopPruner()
    if name == "median":
        return optuna.pruners.MedianPruner(args.startup, warmup, interval)
    if name == "percentile25":
        return optuna.pruners.PercentilePruner(25.0, args.startup, warmup, interval)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=warmup, max_resource=horizon)
    if name == "wilcoxon":
        return optuna.pruners.WilcoxonPruner(p_threshold=0.1, n_startup_steps=warmup)
    weight = {} if args.likelihood_weight is None else {"likelihood_weight": args.likelihood_weight}
    return RewardCurvePruner(
        **weight,
        horizon=lambda trial: int(trial.user_attrs["horizon"]),
        population=study["population"],
        min_prob_beat_best=args.min_prob,
        final_points=max(1, int(np.ceil(FINAL_SHARE * horizon))),  # the objective's final mean
        n_startup_trials=args.startup,
        n_warmup_steps=warmup,
        interval_steps=interval,
        metadata=study["metadata"],
        # bayesgrpo_study: from 4 finished trials on, a population fitted on them (the study's task)
        fit_after=4 if name == "bayesgrpo_study" else None,
        # bayesgrpo_own_range: a trial without a stated range read on its own values alone
        study_reach=name != "bayesgrpo_own_range",
        random_seed=0,
    )


def replay(study: dict[str, Any], order: list[int], pruner: Any) -> dict[str, Any]:
    """One study run with one pruner: steps spent and the best final reward found."""
    import optuna

    curves: list[np.ndarray] = study["curves"]
    spent: list[int] = []

    def objective(trial: Any) -> float:
        rewards = curves[order[trial.number]]
        trial.set_user_attr("horizon", len(rewards))
        trial.set_user_attr("final", final_reward(rewards))  # read by the oracles only
        for step, reward in enumerate(rewards, start=1):
            trial.report(float(reward), step)
            if trial.should_prune():
                spent.append(step)
                raise optuna.TrialPruned()
        spent.append(len(rewards))
        return final_reward(rewards)

    optuna_study = optuna.create_study(direction="maximize", pruner=pruner)
    start = time.perf_counter()
    optuna_study.optimize(objective, n_trials=len(order))
    seconds = time.perf_counter() - start
    finished = [t.value for t in optuna_study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    best = max(finished) if finished else -np.inf
    return {
        "steps": int(sum(spent)),
        "all_steps": int(sum(len(c) for c in curves)),
        "pruned": sum(t.state == optuna.trial.TrialState.PRUNED for t in optuna_study.trials),
        "best_found": best,
        "regret": (study["true_best"] - best) / study["reward_range"],
        "found_best": bool(best >= study["true_best"] - 1e-12),
        "seconds": seconds,
    }


def studies(min_runs: int) -> list[dict[str, Any]]:
    """The sources with ``min_runs`` runs or more, as studies, each with its held-out population."""
    from bayesgrpo.evaluate.backtest import source_groups
    from bayesgrpo.model.datasets import load_bundled

    table = load_bundled(warn=False)
    populations = loso_populations(table)
    out = []
    for source, run_ids in source_groups(table).items():
        if len(run_ids) < min_runs:
            continue
        curves = [table.run(r)["reward"].to_numpy(dtype=float) for r in run_ids]
        curves = [c[np.isfinite(c)] for c in curves]
        runs = table.runs.set_index("run_id").loc[run_ids]
        low, high = runs["reward_min"].iloc[0], runs["reward_max"].iloc[0]
        stated = pd.notna(low) and pd.notna(high)
        rewards = np.concatenate(curves)
        out.append(
            {
                "source": source,
                "run_ids": run_ids,
                "curves": curves,
                "population": populations[run_ids[0]],
                "metadata": {"reward_min": float(low), "reward_max": float(high)} if stated else {},
                "true_best": max(final_reward(c) for c in curves),
                "reward_range": float(high - low) if stated else float(rewards.max() - rewards.min()),
                "horizon": int(np.median([len(c) for c in curves])),
            }
        )
    return out


def row_settings(pruner: str, settings: dict[str, Any], code: str) -> str:
    """What a row was measured with: the settings, and for bayesgrpo's pruners the code of the
    live update too (a change to it re-runs them; Optuna's pruners and the oracles do not
    depend on it).
    """
    return json.dumps(
        {**settings, "code": code} if pruner.startswith("bayesgrpo") else settings, sort_keys=True
    )


def done_rows(path: Path, settings: dict[str, Any], code: str) -> pd.DataFrame:
    """The rows already measured with these settings (and code, for bayesgrpo's pruners)."""
    if not path.exists():
        return pd.DataFrame()
    rows = pd.read_csv(path)
    return rows[rows["settings"] == rows["pruner"].map(lambda name: row_settings(name, settings, code))]


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """Per pruner: steps (total, share of no pruning), regret, how often the best was found."""
    grouped = rows.groupby("pruner", sort=False)
    summary = grouped.agg(
        studies=("source", "nunique"),
        replays=("order", "size"),
        steps=("steps", "sum"),
        all_steps=("all_steps", "sum"),
        pruned_trials=("pruned", "sum"),
        mean_regret=("regret", "mean"),
        max_regret=("regret", "max"),
        found_best=("found_best", "mean"),
        seconds=("seconds", "sum"),
    ).reset_index()
    summary["steps_share"] = summary["steps"] / summary["all_steps"]
    return summary[
        ["pruner", "studies", "replays", "steps", "steps_share", "pruned_trials", "mean_regret", "max_regret",
         "found_best", "seconds"]
    ]  # fmt: skip


def verdict(summary: pd.DataFrame) -> list[str]:
    """The target: fewer steps than every other pruner at no worse mean regret."""
    ours = summary.set_index("pruner").loc["bayesgrpo"]
    lines = []
    for name, row in summary.set_index("pruner").iterrows():
        if name == "bayesgrpo" or name in ORACLES:
            continue
        fewer = ours["steps"] < row["steps"]
        no_worse = ours["mean_regret"] <= row["mean_regret"] + 1e-12
        lines.append(
            f"- against {name}: {int(ours['steps'])} vs {int(row['steps'])} steps "
            f"({'fewer' if fewer else 'not fewer'}), mean regret {ours['mean_regret']:.4f} vs "
            f"{row['mean_regret']:.4f} ({'no worse' if no_worse else 'worse'}): "
            f"**{'beaten' if fewer and no_worse else 'not beaten'}**"
        )
    return lines


def reachable(summary: pd.DataFrame) -> list[str]:
    """What the oracles say of the target: the fewest steps at no regret, against each pruner."""
    table = summary.set_index("pruner")
    lines = []
    for oracle in ORACLES:
        if oracle not in table.index:
            continue
        row = table.loc[oracle]
        under = [
            name
            for name, other in table.iterrows()
            if name not in ORACLES and name != "bayesgrpo" and row["steps"] >= other["steps"]
        ]
        lines.append(
            f"- `{oracle}`: {int(row['steps'])} steps ({row['steps_share']:.1%} of no pruning) at mean "
            f"regret {row['mean_regret']:.4f}; "
            + (
                "a pruner that knew each trial's final value and never risked the best would still spend "
                "at least as many steps as " + ", ".join(f"`{n}`" for n in under)
                if under
                else "fewer steps than every pruner"
            )
            + "."
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    """Replay the studies with every pruner, resumably, and write the results."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    warnings.simplefilter("ignore")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    command = "python benchmarks/optuna_pruning.py" + "".join(
        " " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )
    settings = {k: v for k, v in vars(args).items() if k in ("startup", "warmup", "interval", "min_prob")}
    if args.likelihood_weight is not None:
        settings["likelihood_weight"] = args.likelihood_weight
    name = "optuna_pruning" + ("" if args.likelihood_weight is None else f"_w{args.likelihood_weight:g}")
    pruner_code = (HERE.parent / "bayesgrpo" / "integrations" / "optuna.py").read_bytes()
    code = code_hash() + hashlib.sha256(pruner_code).hexdigest()[:8]
    done = done_rows(args.rows, settings, code)
    measured = set() if done.empty else set(zip(done["source"], done["order"], done["pruner"], strict=True))
    all_studies = studies(args.min_runs)
    args.rows.parent.mkdir(parents=True, exist_ok=True)
    for study in all_studies:
        for order_seed in range(args.orders):
            order = list(np.random.default_rng(order_seed).permutation(len(study["curves"])))
            for pruner_name in args.pruners:
                if (study["source"], order_seed, pruner_name) in measured:
                    continue
                result = replay(study, order, make_pruner(pruner_name, study["horizon"], args, study))
                row = {
                    "source": study["source"],
                    "order": order_seed,
                    "pruner": pruner_name,
                    **result,
                    "settings": row_settings(pruner_name, settings, code),
                }
                pd.DataFrame([row]).to_csv(args.rows, mode="a", header=not args.rows.exists(), index=False)
                logger.info("%s, order %d, %s: %s", study["source"], order_seed, pruner_name, result)
    rows = done_rows(args.rows, settings, code)
    rows = rows[rows["pruner"].isin(args.pruners) & (rows["order"] < args.orders)]
    rows = rows[rows["source"].isin([s["source"] for s in all_studies])]
    summary = summarise(rows)
    per_study = (
        rows.groupby(["source", "pruner"], sort=False)
        .agg(steps=("steps", "sum"), all_steps=("all_steps", "sum"), mean_regret=("regret", "mean"))
        .reset_index()
    )
    args.output_dir.mkdir(parents=True, exist_ok=True)
    rows.drop(columns="settings").to_csv(args.output_dir / f"{name}_runs.csv", index=False)
    machine = machine_line()
    description = ", ".join(
        f"{s['source']} ({len(s['curves'])} runs of {s['horizon']} steps)" for s in all_studies
    )
    lines = [
        "# Pruning replayed studies: RewardCurvePruner against Optuna's pruners",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine}; Optuna {optuna.__version__}.  ",
        f"Settings: {json.dumps(settings)}; every pruner waits {args.startup} finished trials (Hyperband "
        "and Wilcoxon have no such setting) and the warm-up share of each study's median trial length.",
        "",
        f"Studies (one per source with {args.min_runs} runs or more): {description}. Each replayed in "
        f"{args.orders} random trial orders. A trial's value is its run's final reward (mean of its last "
        "10% of logged rewards); regret = the study's best final reward minus the best among the trials "
        "that finished, in units of the study's reward range (stated, else observed). bayesgrpo's "
        "population never saw the study's source (leave one source out, `benchmarks/_loso.py`).",
        "",
        "## Against the target (fewer steps than every other pruner, at no worse regret)",
        "",
        *verdict(summary),
        "",
        "## What any pruner could reach (the oracles)",
        "",
        "An oracle knows the running trial's final value, not the trials still to come; it prunes at the "
        "end of the warm-up exactly the trials that will not beat the best finished trial. A trial that "
        "would beat every finished one may be the study's best, so a pruner that is never to lose the "
        "best (regret 0, which matching `none` asks for) must let it finish: the oracle spends the "
        "fewest steps such a pruner can at these settings.",
        "",
        *reachable(summary),
        "",
        "## Per pruner",
        "",
        markdown_table(summary),
        "",
        "## Per study",
        "",
        markdown_table(per_study),
        "",
    ]
    (args.output_dir / f"{name}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
