"""Pruning replayed corpus studies: RewardCurvePruner's frontier against every Optuna pruner.

A study is a corpus source (``benchmarks/corpus/``) with ``--min-runs`` runs or more of one reward
key, from a source the shipped population never saw (no bundled run comes from it): its runs are
its trials, replayed through a real Optuna study in ``--orders`` random orders. Trial k reports run
k's reward at each logged point (step = the point's index), checks ``trial.should_prune()``, and if
it runs to the end returns its final reward (the mean of its last 10% of logged rewards). Every
pruner sees the same studies in the same orders:

- Optuna's Median, Percentile, SuccessiveHalving, Hyperband, Wilcoxon and Patient-around-Median
  pruners, each at its defaults and at two other settings (:func:`optuna_settings`);
- bayesgrpo's ``RewardCurvePruner`` at its defaults (the shipped population, two startup trials,
  warm-up 10% and a check every 5% of each trial's horizon) with the objective's final mean stated
  (``final_points``), over a sweep of ``min_prob_beat_best``;
- no pruning, and an oracle that knows the running trial's final value (not the trials to come).

Measured per study and order: the steps spent (reports made) as a share of all the study's steps,
and the regret: the best final reward of the study's runs minus the best among the trials that
finished, in units of the study's reward range (stated, else observed). A setting's figure is the
mean over studies (each study equal), for the source folds 0-4 and for the sealed fold apart, with
a 90% interval from a bootstrap over studies. A pruner setting is *covered* when some
``RewardCurvePruner`` setting spends fewer steps at no more mean regret; the recommended threshold
is the one chosen on folds 0-4 (the one covering most Optuna settings there, the fewest steps
among ties) and scored once on the sealed fold. The pruner's own time per ``should_prune`` call
(median, slowest) and per trial is timed on one order of each study without any cache.

Usage::

    python benchmarks/optuna_pruning.py             # ~25 studies x 10 orders x 33 settings
    python benchmarks/optuna_pruning.py --orders 2  # quicker

Resumable: each study's rows are kept in ``benchmarks/_scratch/optuna_pruning/``, Optuna's under a
hash of their settings and bayesgrpo's under one that adds the package code they depend on (a change
to the pruner re-runs only its own rows). Within a study the live updates are memoised by (trial,
prefix, span of the finished trials), so the threshold sweep costs one live update per distinct
question. Writes ``benchmarks/results/optuna_pruning.md``,
``optuna_pruning_runs.csv`` and ``optuna_pruning.png``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _corpus import BUILT, code_hash, fold_group, interval  # noqa: E402
from _markdown import command_line, machine_line, markdown_table, write_result  # noqa: E402

logger = logging.getLogger("optuna_pruning")
SCRATCH = HERE / "_scratch" / "optuna_pruning"
RESULTS = HERE / "results"
FINAL_SHARE = 0.1
#: RewardCurvePruner's thresholds swept (``min_prob_beat_best``).
THRESHOLDS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3)
#: The package code bayesgrpo's rows depend on (a change re-runs them).
PRUNER_CODE = ("model", "questions", "integrations/optuna.py")


def final_reward(rewards: np.ndarray) -> float:
    """A run's final reward: the mean of its last 10% of logged rewards (at least one)."""
    n = max(1, int(np.ceil(FINAL_SHARE * len(rewards))))
    return float(np.mean(rewards[-n:]))


def studies(built: Path, min_runs: int) -> list[dict[str, Any]]:
    """The corpus's studies: runs of one source and reward key, from sources no bundled run is from."""
    from bayesgrpo.evaluate.corpus import load_built, read_manifest

    corpus = load_built(built)
    manifest = read_manifest(HERE / "corpus" / "manifest.csv")
    bundled = set(manifest.loc[manifest["bundled_file"] != "", "source"])
    runs = corpus.runs[~corpus.runs["source"].isin(bundled)].copy()
    runs["reward_key"] = runs["reward_key"].fillna("")
    out = []
    for (source, key), group in runs.groupby(["source", "reward_key"], sort=True):
        if len(group) < min_runs:
            continue
        curves = [corpus.run(r)["reward"].to_numpy(dtype=float) for r in group["run_id"]]
        curves = [c[np.isfinite(c)] for c in curves]
        low, high = group["reward_min"], group["reward_max"]
        stated = low.notna().all() and high.notna().all() and low.nunique() == 1 and high.nunique() == 1
        rewards = np.concatenate(curves)
        out.append(
            {
                "study": f"{source} [{key}]" if (runs["source"] == source).sum() > len(group) else source,
                "source": source,
                "group": str(fold_group(group["fold"].iloc[:1])[0]),
                "curves": curves,
                "metadata": {"reward_min": float(low.iloc[0]), "reward_max": float(high.iloc[0])}
                if stated
                else {},
                "true_best": max(final_reward(c) for c in curves),
                "reward_range": float(high.iloc[0] - low.iloc[0]) if stated else float(np.ptp(rewards)),
                "horizon": int(np.median([len(c) for c in curves])),
            }
        )
    return out


def optuna_settings(horizon: int) -> dict[str, Callable[[], Any]]:
    """Each Optuna pruner at its defaults and at two other settings (warm-up in steps of a median trial)."""
    from optuna.pruners import (
        HyperbandPruner,
        MedianPruner,
        NopPruner,
        PatientPruner,
        PercentilePruner,
        SuccessiveHalvingPruner,
        WilcoxonPruner,
    )

    w10, w25 = max(1, round(0.1 * horizon)), max(1, round(0.25 * horizon))
    return {
        "none": NopPruner,
        "median (defaults)": MedianPruner,
        "median startup 2, warm-up 10%": lambda: MedianPruner(2, w10),
        "median startup 2, warm-up 25%": lambda: MedianPruner(2, w25),
        "percentile 25 (defaults)": lambda: PercentilePruner(25.0),
        "percentile 10, startup 2, warm-up 10%": lambda: PercentilePruner(10.0, 2, w10),
        "percentile 40, startup 2, warm-up 10%": lambda: PercentilePruner(40.0, 2, w10),
        "successive halving (defaults)": SuccessiveHalvingPruner,
        "successive halving min 10%, factor 2": lambda: SuccessiveHalvingPruner(w10, 2),
        "successive halving min 25%, factor 3": lambda: SuccessiveHalvingPruner(w25, 3),
        "hyperband (defaults)": HyperbandPruner,
        "hyperband min 10%, factor 2": lambda: HyperbandPruner(w10, horizon, 2),
        "hyperband min 25%, factor 3": lambda: HyperbandPruner(w25, horizon, 3),
        "wilcoxon (defaults)": WilcoxonPruner,
        "wilcoxon p 0.05, start 10%": lambda: WilcoxonPruner(p_threshold=0.05, n_startup_steps=w10),
        "wilcoxon p 0.2, start 10%": lambda: WilcoxonPruner(p_threshold=0.2, n_startup_steps=w10),
        "patient median, patience 3 (defaults)": lambda: PatientPruner(MedianPruner(), patience=3),
        "patient median, patience 1, startup 2": lambda: PatientPruner(MedianPruner(2, w10), patience=1),
        "patient median, patience 10, startup 2": lambda: PatientPruner(MedianPruner(2, w10), patience=10),
    }


def oracle_pruner(warmup: int) -> Any:
    """Knows each trial's final value (user attribute ``final``); at the warm-up's end it prunes
    exactly the trials that will not beat the best finished one (after two startup trials).
    """
    import optuna

    class OraclePruner(optuna.pruners.BasePruner):
        def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
            if trial.last_step is None or trial.last_step < warmup:
                return False
            finished = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            return len(finished) >= 2 and trial.user_attrs["final"] < max(t.value for t in finished)

    return OraclePruner()


class MemoForecaster:
    """A ``LiveForecaster`` whose updates are kept by (prefix, horizon, reach): one live update per
    distinct question however many thresholds and orders ask it. ``timings`` keeps the cost of each
    update actually computed.
    """

    def __init__(self, forecaster: Any) -> None:
        self.forecaster = forecaster
        self.pareto_k_limit = forecaster.pareto_k_limit
        self.memo: dict[tuple[Any, ...], Any] = {}

    def update(self, table: Any, *, horizon: int, reach: Any, mcmc_fallback: bool = True) -> Any:
        """``LiveForecaster.update``, computed once per distinct question."""
        points = table.points
        key = (
            hashlib.sha1(
                points["step"].to_numpy().tobytes() + points["reward"].to_numpy().tobytes()
            ).hexdigest(),
            horizon,
            reach,
            mcmc_fallback,
        )
        if key not in self.memo:
            self.memo[key] = self.forecaster.update(
                table, horizon=horizon, reach=reach, mcmc_fallback=mcmc_fallback
            )
        return self.memo[key]


def curve_pruner(study: dict[str, Any], threshold: float, forecaster: Any | None) -> Any:
    """The RewardCurvePruner at the benchmark's settings; ``forecaster`` (a memo) shared, if given."""
    from bayesgrpo.integrations.optuna import RewardCurvePruner

    horizon = study["horizon"]
    pruner = RewardCurvePruner(
        horizon=lambda trial: int(trial.user_attrs["horizon"]),
        min_prob_beat_best=threshold,
        final_points=max(1, int(np.ceil(FINAL_SHARE * horizon))),  # the objective's final mean
        metadata=study["metadata"],
        random_seed=0,
    )
    if forecaster is not None:
        pruner._forecaster = forecaster  # the memo stands in for the forecaster the pruner would build
    return pruner


def replay(
    study: dict[str, Any], order: list[int], pruner: Any, timed: list[tuple[int, float]] | None = None
) -> dict[str, Any]:
    """One study with one pruner: steps spent and regret (``timed``: (trial, seconds) of each
    ``should_prune`` call).
    """
    import optuna

    curves: list[np.ndarray] = study["curves"]
    spent: list[int] = []

    def objective(trial: Any) -> float:
        rewards = curves[order[trial.number]]
        trial.set_user_attr("horizon", len(rewards))
        trial.set_user_attr("final", final_reward(rewards))  # read by the oracle only
        for step, reward in enumerate(rewards, start=1):
            trial.report(float(reward), step)
            start = time.perf_counter()
            prune = trial.should_prune()
            if timed is not None:
                timed.append((trial.number, time.perf_counter() - start))
            if prune:
                spent.append(step)
                raise optuna.TrialPruned()
        spent.append(len(rewards))
        return final_reward(rewards)

    optuna_study = optuna.create_study(direction="maximize", pruner=pruner)
    optuna_study.optimize(objective, n_trials=len(order))
    finished = [t.value for t in optuna_study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    best = max(finished) if finished else -np.inf
    return {
        "steps": int(sum(spent)),
        "all_steps": int(sum(len(c) for c in curves)),
        "regret": float((study["true_best"] - best) / study["reward_range"]),
    }


def trial_order(study: dict[str, Any], seed: int) -> list[int]:
    """The order a study's runs are replayed in as trials, seeded: the same for every setting."""
    return [int(i) for i in np.random.default_rng(seed).permutation(len(study["curves"]))]


def settings_key(args: argparse.Namespace, code: str | None) -> str:
    """What a study's rows were measured with: Optuna's (``code`` None) or bayesgrpo's."""
    import optuna

    key: dict[str, Any] = {"orders": args.orders, "optuna": optuna.__version__}
    if code is not None:
        key |= {"thresholds": THRESHOLDS, "code": code}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def replay_settings(
    study: dict[str, Any], settings: dict[str, Callable[[], Any]], orders: int
) -> pd.DataFrame:
    """Each setting on one study in each of ``orders`` trial orders."""
    rows = []
    for seed in range(orders):
        order = trial_order(study, seed)
        for setting, make in settings.items():
            rows.append(
                {"study": study["study"], "order": seed, "setting": setting, **replay(study, order, make())}
            )
    return pd.DataFrame(rows)


def cached(path: Path, measure: Callable[[], pd.DataFrame], all_steps: int) -> pd.DataFrame:
    """``measure()``'s rows, kept at ``path``; read from there when present and of a study with
    ``all_steps`` steps (a source whose runs changed in the corpus is measured again).
    """
    if path.exists():
        frame = pd.read_csv(path)
        if (frame["all_steps"] == all_steps).all():
            return frame
    frame = measure()
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return frame


def run_study(study: dict[str, Any], args: argparse.Namespace, keys: tuple[str, str]) -> pd.DataFrame:
    """Every setting on one study in every order: Optuna's rows and bayesgrpo's, each cached."""
    import optuna

    warnings.simplefilter("ignore")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    name = hashlib.sha256(study["study"].encode()).hexdigest()[:10]
    settings: dict[str, Callable[[], Any]] = dict(optuna_settings(study["horizon"]))
    settings["oracle"] = lambda: oracle_pruner(max(1, round(0.1 * study["horizon"])))
    all_steps = sum(len(c) for c in study["curves"])
    theirs = cached(
        SCRATCH / f"{name}_{keys[0]}.csv", lambda: replay_settings(study, settings, args.orders), all_steps
    )
    ours = cached(SCRATCH / f"{name}_{keys[1]}.csv", lambda: replay_ours(study, args.orders), all_steps)
    return pd.concat([theirs, ours], ignore_index=True)


def replay_ours(study: dict[str, Any], orders: int) -> pd.DataFrame:
    """The threshold sweep on one study (live updates memoised), with the pruner's own time per
    ``should_prune`` call timed on one order without the memo.
    """
    from bayesgrpo.integrations.optuna import PRUNER_LIKELIHOOD_WEIGHT
    from bayesgrpo.model.datasets import bundled_population
    from bayesgrpo.questions.live import LiveForecaster

    memo = MemoForecaster(
        LiveForecaster(bundled_population(), random_seed=0, likelihood_weight=PRUNER_LIKELIHOOD_WEIGHT)
    )
    settings = {f"bayesgrpo p{t:g}": lambda t=t: curve_pruner(study, t, memo) for t in THRESHOLDS}
    frame = replay_settings(study, settings, orders)
    timed: list[tuple[int, float]] = []  # one order, uncached: the pruner's own time per call
    replay(study, trial_order(study, 0), curve_pruner(study, 0.05, None), timed)
    calls = pd.DataFrame(timed, columns=["trial", "seconds"])
    frame["call_median_ms"] = 1e3 * calls["seconds"].median()
    frame["call_slowest_ms"] = 1e3 * calls["seconds"].max()
    frame["slowest_trial_s"] = calls.groupby("trial")["seconds"].sum().max()
    return frame


def study_means(rows: pd.DataFrame) -> pd.DataFrame:
    """Per study and setting: the share of the study's steps spent and the mean regret over orders."""
    means = rows.groupby(["group", "study", "setting"], sort=False).agg(
        steps=("steps", "sum"), all_steps=("all_steps", "sum"), regret=("regret", "mean")
    )
    means["share"] = means["steps"] / means["all_steps"]
    return means.reset_index()


def bootstrap(values: np.ndarray, n_boot: int, seed: int = 0) -> np.ndarray:
    """Means over studies (axis 0) of ``n_boot`` resamples of whole studies."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(values), size=(n_boot, len(values)))
    return values[picks].mean(axis=1)


def frontier(means: pd.DataFrame, n_boot: int) -> pd.DataFrame:
    """Each setting's mean share of steps and mean regret over studies (90% intervals over studies)."""
    out = []
    for setting, rows in means.groupby("setting", sort=False):
        values = rows[["share", "regret"]].to_numpy()
        boots = bootstrap(values, n_boot)
        low, high = np.quantile(boots, [0.05, 0.95], axis=0)
        estimate = values.mean(axis=0)
        out.append(
            {
                "setting": setting,
                "studies": len(rows),
                "share of steps": interval((estimate[0], low[0], high[0])),
                "mean regret": interval((estimate[1], low[1], high[1]), 3),
                "share": estimate[0],
                "regret": estimate[1],
            }
        )
    return pd.DataFrame(out)


def is_ours(setting: str) -> bool:
    """Whether a setting is bayesgrpo's pruner."""
    return setting.startswith("bayesgrpo")


def covered(table: pd.DataFrame) -> dict[str, list[str]]:
    """For each Optuna setting: the bayesgrpo settings with fewer steps at no more mean regret."""
    ours = table[table["setting"].map(is_ours)]
    theirs = table[~table["setting"].map(is_ours) & (table["setting"] != "oracle")]
    return {
        row.setting: ours.loc[
            (ours["share"] < row.share) & (ours["regret"] <= row.regret + 1e-12), "setting"
        ].tolist()
        for row in theirs.itertuples()
    }


def recommend(table: pd.DataFrame) -> str:
    """The bayesgrpo setting covering the most Optuna settings, the fewest steps among ties."""
    cover = covered(table)
    ours = table[table["setting"].map(is_ours)].copy()
    ours["covers"] = ours["setting"].map(lambda s: sum(s in found for found in cover.values()))
    return str(ours.sort_values(["covers", "share"], ascending=[False, True])["setting"].iloc[0])


def paired(means: pd.DataFrame, ours: str, n_boot: int) -> pd.DataFrame:
    """The recommended setting against each Optuna setting, paired over studies: its share of steps
    and its mean regret minus theirs, with 90% intervals from a bootstrap over studies.
    """
    wide = means.pivot(index="study", columns="setting", values=["share", "regret"])
    out = []
    for setting in [s for s in means["setting"].unique() if not is_ours(s) and s != "oracle"]:
        diff = np.column_stack(
            [wide["share"][ours] - wide["share"][setting], wide["regret"][ours] - wide["regret"][setting]]
        )
        low, high = np.quantile(bootstrap(diff, n_boot), [0.05, 0.95], axis=0)
        estimate = diff.mean(axis=0)
        fewer, no_worse = estimate[0] < 0, estimate[1] <= 1e-12
        out.append(
            {
                "Optuna setting": setting,
                "share of steps, ours minus theirs": interval((estimate[0], low[0], high[0])),
                "mean regret, ours minus theirs": interval((estimate[1], low[1], high[1]), 3),
                "ahead": "yes" if fewer and no_worse else "no",
            }
        )
    return pd.DataFrame(out)


def plot(tables: dict[str, pd.DataFrame], path: Path) -> None:
    """Steps against mean regret, one panel per fold group: Optuna's settings as points, bayesgrpo's
    threshold sweep as a line.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tables), figsize=(6 * len(tables), 4.6), sharey=True, squeeze=False)
    families = ["median", "percentile", "successive", "hyperband", "wilcoxon", "patient", "none", "oracle"]
    markers = dict(zip(families, "os^vDPXx", strict=True))
    for axis, (group, table) in zip(axes[0], tables.items(), strict=True):
        for family, marker in markers.items():
            rows = table[table["setting"].str.startswith(family)]
            axis.scatter(rows["regret"], rows["share"], marker=marker, label=family, color="0.45")
        rows = table[table["setting"].map(is_ours)]
        axis.plot(rows["regret"], rows["share"], "o-", color="C0", label="RewardCurvePruner, p swept")
        axis.set(
            title=f"{group} ({table['studies'].max()} studies)", xlabel="mean regret (share of the range)"
        )
        axis.set_xscale("symlog", linthresh=1e-3)
    axes[0][0].set_ylabel("share of the steps spent")
    axes[0][-1].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> None:
    """Replay every study with every setting (resumably, ``--jobs`` studies at once) and write the results."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--built", type=Path, default=BUILT)
    parser.add_argument("--orders", type=int, default=10, help="random trial orders per study")
    parser.add_argument("--min-runs", type=int, default=4, help="fewest runs of one source and key")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--boot", type=int, default=2000)
    parser.add_argument("--only", nargs="+", default=None, help="studies whose name holds one of these")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    import multiprocessing

    import optuna

    import bayesgrpo.integrations.optuna  # noqa: F401  (imported before the workers fork)

    start = time.perf_counter()
    keys = (settings_key(args, None), settings_key(args, code_hash(PRUNER_CODE)))
    all_studies = studies(args.built, args.min_runs)
    if args.only:
        all_studies = [s for s in all_studies if any(part in s["study"] for part in args.only)]
    frames = []
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = {pool.submit(run_study, study, args, keys): study for study in all_studies}
        for future, study in futures.items():
            frames.append(future.result().assign(group=study["group"]))
            logger.info("%s: done", study["study"])
    rows = pd.concat(frames, ignore_index=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    rows.to_csv(RESULTS / "optuna_pruning_runs.csv", index=False)
    means = study_means(rows)
    groups = [g for g in ("folds 0-4", "sealed") if (means["group"] == g).any()]
    tables = {group: frontier(means[means["group"] == group], args.boot) for group in groups}
    chosen = recommend(tables["folds 0-4"])
    plot(tables, RESULTS / "optuna_pruning.png")
    timing = rows[rows["setting"].map(is_ours)].groupby("study").first()
    sealed_cover = covered(tables["sealed"]) if "sealed" in tables else {}
    uncovered = [s for s, found in sealed_cover.items() if not found]
    shown = ["setting", "studies", "share of steps", "mean regret"]
    n_sealed = sum(s["group"] == "sealed" for s in all_studies)
    seconds = time.perf_counter() - start
    lines = [
        "# Pruning replayed corpus studies: RewardCurvePruner against every Optuna pruner",
        "",
        f"`{command_line('optuna_pruning.py', argv)}` ({seconds:.0f} s; {machine_line()}; "
        f"Optuna {optuna.__version__})",
        "",
        f"{len(all_studies)} studies (a corpus source with {args.min_runs}+ runs of one reward key, from "
        f"a source the shipped population never saw), {n_sealed} of them in the sealed fold, each "
        f"replayed in {args.orders} trial orders. A setting's figures are means over studies (each "
        "study equal) with 90% intervals from a bootstrap over studies; regret is in units of the "
        "study's reward range. bayesgrpo's pruner: at its defaults (shipped population, 2 startup "
        "trials, warm-up 10% and a check every 5% of each trial's horizon) with the objective's final "
        "mean stated (`final_points`) and `min_prob_beat_best` = p. "
        "Figure: `optuna_pruning.png`.",
        "",
        f"**Recommended (chosen on folds 0-4): `{chosen}`.** On the sealed fold, "
        + (
            "there are no studies."
            if not sealed_cover
            else "every Optuna setting has a bayesgrpo setting with fewer steps at no more mean regret."
            if not uncovered
            else f"{len(uncovered)} of {len(sealed_cover)} Optuna settings have no bayesgrpo setting "
            "with fewer steps at no more mean regret: " + ", ".join(f"`{s}`" for s in uncovered) + "."
        ),
        "",
        "The pruner's own time (one order of each study, no cache): median "
        f"{timing['call_median_ms'].median():.2f} ms a `should_prune` call, slowest call "
        f"{timing['call_slowest_ms'].max():.0f} ms, slowest trial "
        f"{timing['slowest_trial_s'].max():.2f} s in all.",
        "",
    ]
    for group, table in tables.items():
        cover = covered(table)
        names = {s: ", ".join(x.removeprefix("bayesgrpo ") for x in found) for s, found in cover.items()}
        table = table.assign(**{"covered by": table["setting"].map(names).fillna("")})
        n_studies = table["studies"].max()
        lines += [
            f"## {group}",
            "",
            f"The recommended setting against each Optuna setting, paired over the {n_studies} studies:",
            "",
            markdown_table(paired(means[means["group"] == group], chosen, args.boot)),
            "",
            "Every setting (`covered by`: the bayesgrpo settings with fewer steps at no more mean regret):",
            "",
            markdown_table(table[[*shown, "covered by"]]),
            "",
        ]
    write_result(RESULTS / "optuna_pruning.md", lines)


if __name__ == "__main__":
    main()
