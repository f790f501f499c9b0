"""Write notebooks/03_when_to_stop.ipynb.

    python notebooks/_build/make_03.py --execute          # run with full settings: the committed file
    python notebooks/_build/make_03.py --execute --fast   # try it with BAYESGRPO_NOTEBOOK_FAST=1 (do not commit)
    python notebooks/_build/make_03.py                    # the notebook without outputs
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _nb import main

CELLS = [
    ("md", """
        # When to stop a GRPO run: steps saved against reward given up

        A GRPO run costs GPU-hours for every step, and many runs spend their second half on a
        plateau. Stopping there saves those hours; stopping too early gives up reward the run would
        still have made. What do practitioners do today? They stop at a fixed share of the planned
        steps, or keep a *patience* counter on a smoothed reward (stop after so many logged points
        without a new best), or, with many runs of one recipe, prune a run whose reward falls below
        the median of the others at the same step (Optuna's median pruner). bayesgrpo's rule asks the
        forecast instead: *is the gain over the rest of the run below `eps` of the reward range with
        probability at least `prob`?* (`PlateauRule`). This notebook measures what that saves and what
        it gives up, first live on four runs the population never saw, then over all 60 bundled runs
        from the committed backtest, and ends with the rule's knobs.

        Set `BAYESGRPO_NOTEBOOK_FAST=1` to run it with few draws (CI does); the committed outputs
        come from full settings.

        **Read this first: the rule and the numbers here are older than the package's default.**
        This notebook studies `PlateauRule(eps=0.01, prob=0.9)`, which `bayesgrpo stop`, `watch`,
        the TRL callback and the verl hook asked until 2026-11-27. They now ask
        `bayesgrpo.questions.stopping.default_rule()`, `GuardedBudgetRule(0.5)`: stop at half the
        planned steps unless a gain of 2% of the reward range is still more than 70% likely, and
        before that only on a sure plateau. Its outputs were executed before the live update was
        tempered (`LiveForecaster(likelihood_weight=0.5)`, 2026-11-28), and its all-runs numbers
        are of the 5-fold-by-run split, where a held-out run has siblings of its own source in the
        population. The measured comparison of the current default with the plateau rules, fixed
        budgets and patience, under leave one source out and for runs with and without a stated
        range, is in `benchmarks/results/loso/backtest_stopping.md`, `default_rule.md` and the
        README's stopping section. The knobs and the reading of a probability below still hold.
    """),
    ("code", """
        import logging
        import os
        import warnings
        from pathlib import Path

        import matplotlib.pyplot as plt
        import numpy as np
        import pandas as pd

        import bayesgrpo
        from bayesgrpo.evaluate.backtest import (
            FixedFraction,
            Patience,
            frontier,
            held_out_populations,
            planned_horizon,
            run_points,
            stopping_backtest,
        )
        from bayesgrpo.questions.history import stop_history
        from bayesgrpo.questions.live import LiveForecaster
        from bayesgrpo.interfaces.plotting import plot_fan, plot_stop_probability
        from bayesgrpo.questions.stopping import BudgetRule, PlateauRule
        from bayesgrpo.logs.table import RunsTable

        FAST = os.environ.get("BAYESGRPO_NOTEBOOK_FAST") == "1"
        DRAWS = 60 if FAST else 500  # population fit: draws and tuning steps per chain
        LIVE_DRAWS = 300 if FAST else 1000  # draws of each live update
        RESULTS = next(p / "benchmarks" / "results" for p in (Path.cwd(), *Path.cwd().parents)
                       if (p / "benchmarks" / "results").is_dir())
        warnings.simplefilter("ignore")  # the fit's convergence numbers are printed below instead
        for name in ("bayesgrpo", "pymc", "arviz", "numpyro"):
            logging.getLogger(name).setLevel(logging.ERROR)
        plt.rcParams.update({"figure.dpi": 85, "font.size": 8})
        pd.set_option("display.precision", 3)

        table = bayesgrpo.load_bundled(warn=False)
        HELD_OUT = {  # run id -> short label: two verl runs, two TRL/Unsloth notebook runs
            "verl_asyncRA_gsm8k_qwen2_7b_base": "verl Qwen2-7B gsm8k",
            "verl_pr3389_dp_2_gpu_20251111_061134": "verl Qwen2.5-0.5B gsm8k",
            "nb_unslothai_notebooks_HuggingFace_Course_Mistral_v0_3_7B_GRPO_c1a161c_n250": "TRL Mistral-7B",
            "nb_unslothai_notebooks_Kaggle_Phi_4_GRPO_a29c3e1_n100": "TRL Phi-4",
        }
        PLATEAU = "plateau eps=0.01 p=0.9"
        table.summary().set_index("run_id").loc[
            list(HELD_OUT), ["family", "size_b", "algorithm", "n_points", "last_step", "reward_min", "reward_max"]
        ].rename(index=HELD_OUT)
    """),
    ("md", """
        ## A live replay on runs the population never saw

        The population is fitted on the other 56 runs (`held_out_populations` with one group). Each
        held-out run is then replayed as if it were training now: every 5% of its steps the live
        update (`LiveForecaster`, no refit) conditions the population on the points logged so far,
        and the plateau rule (`eps` = 1% of the reward range, `prob` = 0.9: the CLI's default until `GuardedBudgetRule(0.5)`
        replaced it, see the end) says
        stop or continue. `stopping_backtest` runs it beside the rules in use today on the same
        runs: a fixed 80% of the steps, and patience (stop after 10% of the run's points without a
        new best of a trailing mean over 5% of them). What a stop *gives up* is measured on a centred
        rolling mean of the logged reward (5% of the run's points): the best of it over the whole
        run minus its value at the stop, as a share of the run's reward range; *vs end* is the same
        against the run's own last smoothed value (negative: stopping kept more than running on).
    """),
    ("code", """
        populations = held_out_populations(
            table, {"held out": list(HELD_OUT)}, {"draws": DRAWS, "tune": DRAWS, "chains": 2}, random_seed=0
        )
        population = populations[next(iter(HELD_OUT))]
        fit = population.fit_summary()
        assert not set(HELD_OUT) & set(population.data.run_ids)
        print(f"population of {fit['n_runs']} runs (the {len(HELD_OUT)} above held out), {DRAWS} draws per chain, "
              f"{fit['seconds']:.0f} s: max r_hat {fit['max_r_hat']:.3f}, min bulk ESS {fit['min_ess_bulk']:.0f}, "
              f"{fit['divergences']} divergences")
    """),
    ("code", """
        live = LiveForecaster(population, n_draws=LIVE_DRAWS, random_seed=0)  # one forecaster: same draws below
        RULES = {
            PLATEAU: PlateauRule(eps=0.01, prob=0.9, relative=True),
            "fixed 0.8": FixedFraction(0.8),
            "patience 0.1 window 0.05": Patience(patience=0.1, window=0.05),
        }
        replay = stopping_backtest(table.select(list(HELD_OUT)), {run_id: live for run_id in HELD_OUT}, RULES,
                                   check_every_fraction=0.05)
        replay.assign(run=replay["run_id"].map(HELD_OUT))[
            ["run", "rule", "stop_step", "last_step", "steps_saved", "reward_given_up", "reward_vs_end", "probability"]
        ]
    """),
    ("md", """
        Left: what the plateau rule said at each check, `P(gain to the end < 1% of the range)`, with
        the run's most probable phase beneath (slow start, rapid improvement, plateau; opacity = its
        probability). Right: the forecast the rule had in hand when it stopped (or at its last check
        if it never did), against everything the run logged afterwards, with the steps at which the
        fixed-80% and patience rules stop.
    """),
    ("code", """
        def check_steps(run_id: str, every: float = 0.05) -> np.ndarray:
            \"\"\"The steps the replay asked the rule at: the last logged point before each 5% of the step span.\"\"\"
            steps = run_points(table, run_id)["step"].to_numpy(dtype=float)
            grid = steps[0] + np.arange(1, round(1 / every)) * every * (steps[-1] - steps[0])
            index = np.searchsorted(steps, grid, side="right") - 1
            return np.unique(steps[index[(index >= 1) & (index < len(steps) - 1)]])


        stops = replay.set_index(["run_id", "rule"])["stop_step"]
        histories = {}
        fig, axes = plt.subplots(len(HELD_OUT), 2, figsize=(11, 2.8 * len(HELD_OUT)), width_ratios=[1.2, 1])
        for (run_id, label), (ax_p, ax_f) in zip(HELD_OUT.items(), axes):
            run = table.select([run_id])
            history = stop_history(live, run, steps=check_steps(run_id), rule=RULES[PLATEAU])
            histories[run_id] = history
            plot_stop_probability(history, threshold=RULES[PLATEAU].prob, ax=ax_p)
            ax_p.set_title(f"{label}: plateau rule (eps 1% of the range, p 0.9)", fontsize=8)
            stop = stops[run_id, PLATEAU]
            prefix = run.points[run.points["step"] <= stop].reset_index(drop=True)
            update = live.update(RunsTable(points=prefix, runs=run.runs, report=run.report), horizon=planned_horizon(run))
            stopped = bool(replay.set_index(["run_id", "rule"]).loc[(run_id, PLATEAU), "stopped"])
            plot_fan(update.curve_draws, observed=run, step_now=stop, ax=ax_f,
                     title=f"{label}: forecast at step {stop:.0f}" + ("" if stopped else " (never stopped)"))
            for rule, colour in (("fixed 0.8", "C1"), ("patience 0.1 window 0.05", "C2")):
                ax_f.axvline(stops[run_id, rule], color=colour, linestyle="--", linewidth=1,
                             label=f"{rule}: step {stops[run_id, rule]:.0f}")
            ax_f.legend(fontsize=6, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
        fig.tight_layout()
    """),
    ("code", """
        for run_id, label in HELD_OUT.items():
            history = histories[run_id]
            first = history.loc[history["decision"] == "stop", "step"]
            rows = replay[replay["run_id"] == run_id].set_index("rule")
            # the history and the replay ask the same forecaster at the same steps: the same first stop
            assert (first.iloc[0] if len(first) else rows.loc[PLATEAU, "last_step"]) == rows.loc[PLATEAU, "stop_step"]
            print(f"{label} ({rows['last_step'].iloc[0]:.0f} steps):")
            for rule, r in rows.iterrows():
                print(f"  {rule:26s} stops at step {r.stop_step:4.0f}: saves {r.steps_saved:4.0%} of the steps, "
                      f"gives up {r.reward_given_up:5.1%} of the range vs the best ({r.reward_vs_end:+6.1%} vs the end)")
        print("\\nmean over these four runs:")
        frontier(replay)[["rule", "steps_saved_mean", "given_up_mean", "vs_end_mean", "share_stopped"]]
    """),
    ("md", """
        How to read it. The 7B verl run is what the rule is for: it rises within its first few
        steps and then creeps up slowly. The rule waits while the forecast still expects the creep to
        add more than 1% of the range by the end, and stops at step 47 of 105: 55% of the steps
        saved for 1.2% of the range given up, where a fixed fraction runs on to step 84 and patience,
        waiting for the noise to stop setting new bests, to step 97. The 0.5B verl run makes one slow
        S-shaped rise and then keeps climbing slowly to its last step. The forecast expects that
        climb, so the rule waits through it and stops at step 104 of 116, later than the fixed 80%
        (step 93). Even so the stop gives up 6.6% of the range: the climb went on past what the
        forecast at the stop expected (its fan lies under most of the later points). The curve
        family's slow term stands for a climb that slows down; a run that keeps climbing at the same
        pace beats it. On the notebook runs the logged reward is noisy and spiky (Phi-4), so the best
        point of even a smoothed reward is partly noise: Phi-4's stop at step 40 "gives up" 36.7%
        of the range against it while losing 3.0% against the run's own end. The *vs end* column
        tells the two apart. That stop rests on one check: the probability jumps to 0.91 at step 40
        and falls below 0.2 at the next. On Mistral-7B the rule waits out the rise and stops at step
        175, and the run ends a little lower than it was there (-0.5% vs the end); patience stops at
        step 26, before the rise, and gives up 24.8%. Over the four runs the plateau rule saves 39%
        of the steps and gives up 13.2% of the range. Patience saves more, 51%, and gives up less,
        12.4%: on these four runs it beats the plateau rule on both means, on the reward given up
        because of Phi-4 alone (36.7% for the plateau rule, 10.3% for patience). Fixed 80% saves 20%
        and gives up 8.9%. Four runs are anecdotes: the numbers that decide come next.

        ## The measured frontier over all 60 runs

        `benchmarks/backtest.py` (results in `benchmarks/results/backtest_stopping.md` and, one row
        per run and rule, `backtest_stopping_runs.csv`) ran every rule on every bundled run in the
        same way, each from a population fitted without it (5-fold by run, the default curve family
        `two_timescale`, 500 draws per chain): the plateau rule on a grid of `eps` and `prob`, fixed
        fractions 0.5 to 0.9, patience on a grid, and median pruning against the other runs of the
        same source. `frontier` summarises it per rule; `on_frontier` marks the rules no other rule
        beats on both means.
    """),
    ("code", """
        stopping = pd.read_csv(RESULTS / "backtest_stopping_runs.csv")
        front = frontier(stopping)
        front[["rule", "kind", "n_runs", "steps_saved_mean", "given_up_mean", "given_up_p90", "vs_end_mean",
               "share_stopped", "on_frontier"]]
    """),
    ("code", """
        def dominance(front: pd.DataFrame, measure: str = "given_up_mean") -> pd.Series:
            \"\"\"For each baseline: the plateau rules (as eps/p) that save as many steps on average at no more
            ``measure``.\"\"\"
            bayes = front[front["kind"] == "bayes"]
            baselines = front[(front["kind"] != "bayes") & (front["rule"] != "full run")]
            short = bayes["rule"].str.replace("plateau eps=", "").str.replace(" p=", "/")
            return pd.Series({
                row.rule: ", ".join(short[(bayes["steps_saved_mean"] >= row.steps_saved_mean)
                                          & (bayes[measure] <= getattr(row, measure))]) or "none"
                for row in baselines.itertuples(index=False)
            }, name=f"dominated by plateau rules eps/p (on {measure})")


        bayes = front[front["kind"] == "bayes"]
        target = bayes[(bayes["steps_saved_mean"] >= 0.4) & (bayes["given_up_mean"] <= 0.01)]
        print(f"target (>= 40% of steps saved at <= 1% of the range given up, mean over runs): met by "
              f"{len(target)} of {len(bayes)} bayesgrpo rules")
        for row in bayes[bayes["steps_saved_mean"] >= 0.4].nsmallest(3, "given_up_mean").itertuples(index=False):
            print(f"  closest: {row.rule}: {row.steps_saved_mean:.1%} saved, {row.given_up_mean:.1%} given up "
                  f"({row.vs_end_mean:+.1%} vs the end)")
        full = front.set_index("rule").loc["full run"]
        print(f"running every run to its end gives up {full.given_up_mean:.1%} of the range on average "
              f"(90th percentile {full.given_up_p90:.1%}) by the same measure")
        pd.concat([dominance(front), dominance(front, "vs_end_mean")], axis=1)
    """),
    ("code", """
        def draw_frontier(front: pd.DataFrame, measure: str, ax, title: str) -> None:
            \"\"\"Mean steps saved against mean reward given up (``measure``), one marker per rule.\"\"\"
            ax.axhspan(-1.0, 0.01, xmin=0.42 / 1.02, color="0.88", zorder=0)
            ax.text(0.98, 0.012, "target", ha="right", va="bottom", fontsize=7, color="0.35")
            ax.axhline(0.0, color="0.6", linewidth=0.5)
            bayes = front[front["kind"] == "bayes"]
            settings = bayes["rule"].str.extract(r"eps=([0-9.]+) p=([0-9.]+)").astype(float)
            for k, (eps, part) in enumerate(bayes.assign(eps=settings[0], prob=settings[1]).groupby("eps")):
                part = part.sort_values("prob")
                colour = plt.cm.Blues(0.55 + 0.2 * k)
                ax.plot(part["steps_saved_mean"], part[measure], "-o", color=colour, markersize=6, markeredgecolor="k",
                        markeredgewidth=0.6, zorder=4, label=f"bayesgrpo plateau rule, eps {eps:g}")
                ax.annotate(f"eps {eps:g}", (part["steps_saved_mean"].iloc[0], part[measure].iloc[0]),
                            xytext=(5, -2), textcoords="offset points", fontsize=6.5, color=colour)
            fixed = front[front["kind"] == "fixed_fraction"].sort_values("steps_saved_mean")
            ax.plot(fixed["steps_saved_mean"], fixed[measure], "-s", color="C1", markersize=4, linewidth=0.8,
                    label="fixed fraction (0.9 ... 0.5; full run at 0)")
            for row in front[front["kind"].isin(["patience", "median_pruning"])].itertuples(index=False):
                colour = "C2" if row.kind == "patience" else "C3"
                ax.plot(row.steps_saved_mean, getattr(row, measure), "^", color=colour, markersize=5)
                ax.annotate(row.rule.replace("patience ", "").replace(" window ", "/"),
                            (row.steps_saved_mean, getattr(row, measure)), xytext=(3, 2), textcoords="offset points",
                            fontsize=6, color=colour)
            ax.plot([], [], "^", color="C2", label="patience (share of points / window)")
            ax.plot([], [], "^", color="C3", label="median pruning")
            values = front[measure]
            ax.set_ylim(min(values.min(), 0.0) - 0.02, values.max() + 0.03)
            ax.set_xlim(-0.02, 1.0)
            ax.set_xlabel("mean share of steps saved")
            ax.set_title(title, fontsize=9)


        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        draw_frontier(front, "given_up_mean", axes[0], "reward given up vs the run's best smoothed reward")
        draw_frontier(front, "vs_end_mean", axes[1], "reward given up vs the run's own end")
        axes[0].set_ylabel("mean over the 60 runs, share of the reward range")
        fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=7, frameon=False)
        fig.tight_layout(rect=(0, 0.1, 1, 1))
    """),
    ("md", """
        What it shows, plainly. The issue's target is at least 40% of the steps saved with at most
        1% of the reward range given up on average, while dominating the fixed-fraction and patience
        rules. By the first measure it is **not met**: the printout above says by how far. The
        plateau rules dominate most of the rules in use today, not all. On both measures some
        plateau rule saves at least as many steps and gives up no more than each of these: fixed
        0.5, 0.7 and 0.8, every patience setting but the one with 30% of the points and a 5% window,
        and median pruning (the dominance table). Three baselines are not dominated. Fixed 0.6 saves
        40% of the steps for 14.3% of the range given up; the plateau rule with eps 0.01 and p 0.8
        saves a little more (41%) and gives up a little more (14.5%), and the CLI's old default (eps
        0.01, p 0.9) saves 31% for 14.6%. Patience with 30% of the points and a 5% window (20% for
        13.8%) and fixed 0.9 (10% for 12.6%, the least of any rule) are the other two. The plateau
        rules hold the eager end of the frontier alone: eps 0.03 with p 0.8 saves the most of any
        rule, 60% of the steps, for 21.4% given up.

        Why 1% is out of reach by the first measure: "given up" compares the stop with the *best*
        point of the run's smoothed reward. On a noisy run the best smoothed point is partly noise,
        so running to the end also "gives up" a sizeable share of the range: 14.6% on average (the
        `full run` row). A rule goes below that floor only by stopping runs that later fall back, and
        none goes far below it (13.9% at best for a plateau rule, 12.6% for fixed 0.9). The default
        plateau rule gives up as much as running to the end (14.6%) and saves 31% of the steps. The
        second measure, against the run's own end, has no such floor. By it the plateau rules with
        eps 0.01 give up between -0.7% and 0.0% of the range on average: what running on would have
        kept. The eager ones give up more (eps 0.03 with p 0.8: +6.8%). By this measure the target's
        40%-at-1% **is met**: eps 0.02 with p 0.9 saves 44.0% of the steps at +0.7%, eps 0.01 with
        p 0.8 saves 40.8% at -0.1%. Fixed 0.6 (39.9% at -0.2%) is still not dominated. With strict
        leave-one-run-out populations (`backtest_loo_check.md`) only the second holds (41% at
        +0.8%; eps 0.02 gives +2.4%): a stop moves with the population it is asked of, by a point
        or two on these means.
        The noise floor comes from the notebook runs:
    """),
    ("code", """
        stopping["logs"] = np.where(stopping["run_id"].str.startswith("nb_"), "TRL/Unsloth notebooks", "verl")
        KEY_RULES = ["plateau eps=0.01 p=0.9", "plateau eps=0.005 p=0.95", "fixed 0.5", "fixed 0.8",
                     "patience 0.1 window 0.05", "patience 0.2 window 0.05", "median pruning", "full run"]
        by_logs = {logs: frontier(part) for logs, part in stopping.groupby("logs")}
        pd.concat({logs: f.set_index("rule").loc[KEY_RULES, ["n_runs", "steps_saved_mean", "given_up_mean", "vs_end_mean",
                                                              "on_frontier"]]
                   for logs, f in by_logs.items()}, names=["logs"])
    """),
    ("code", """
        for logs, f in by_logs.items():
            dominated = dominance(f)
            dominated = dominated[dominated != "none"]
            full = f.set_index("rule").loc["full run"]
            print(f"{logs} ({int(full.n_runs)} runs): running to the end gives up {full.given_up_mean:.1%} vs the best; "
                  f"baselines dominated by a plateau rule: {', '.join(dominated.index) or 'none'}")
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, (logs, f) in zip(axes, by_logs.items()):
            draw_frontier(f, "given_up_mean", ax, f"{logs}: given up vs the run's best")
        axes[0].set_ylabel("mean share of the reward range")
        fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=7, frameon=False)
        fig.tight_layout(rect=(0, 0.1, 1, 1))
    """),
    ("md", """
        On the verl runs the logs are clean, rewards lie in a stated [0, 1] range and there is little
        noise. Running to the end gives up only 2.9% against the best, and the plateau rules stay
        near that: eps 0.01 with p 0.9 saves 29% of the steps and gives up 3.5% of the range (+0.6%
        vs the end), on the frontier. Fixed 0.5 gives up 14.9% to save 50%. There the plateau rules
        dominate fixed 0.5 to 0.7, the eager patience settings and median pruning. They do not
        dominate fixed 0.8, which saves 20% and gives up 2.5%, or fixed 0.9. Patience with 20% of
        the points and a 5% window never stops a verl run (0.000 saved). The +0.6% is reward the
        runs still made after the stop, as the 0.5B run did above.

        On the notebook runs, running to the end "gives up" 22.4% of the range, and the plateau
        rules give up about as much: eps 0.01 with p 0.9 saves 32% of the steps and gives up 22.0%
        (-0.3% vs the end), eps 0.005 with p 0.95 gives up 23.4%, more than running to the end. Here
        bayesgrpo loses to the plainest rule: fixed 0.5 saves 50% of the steps and gives up 21.1%
        (-1.2% vs the end), better than the old default plateau rule on all three means, and it is on the
        frontier. The plateau rules dominate only fixed 0.8, patience with 30% of the points and a
        10% window, and median pruning. The eager patience setting, 75% saved for 31.3% given up, is
        on the frontier too. So: use the rule to stop runs that have clearly flattened, read its
        probability as a forecast rather than a guarantee, and look at the fan chart before stopping
        a run that might rise again. On noisy runs without a stated reward range it does no better
        than stopping at a fixed share of the steps. That is why `bayesgrpo stop`, `watch`, the
        TRL callback and the verl hook now decide with `GuardedBudgetRule(0.5)` unless given another
        rule: a fixed budget the posterior may move, which saves 6.5-21.5 points more of the steps than
        the old default on every stopping benchmark (`benchmarks/results/default_rule.md`).
    """),
    ("md", """
        ## Is the rule's probability honest?

        When the rule says `P(gain < eps) = 0.95`, does the run then gain less than `eps` 95% of the
        time? The backtest kept, at every check of every run (every 5% of its steps, from a
        population that never saw it), the live update's probability and what the run did next:
        the gain of its smoothed reward from the check to its last step, smoothed over the run's
        cross-validated window (the window whose mean best predicts each logged point from its
        neighbours; wide on a noisy flat run, narrow on a clean rise), in the rule's unit. Two
        probabilities are scored. The rule's is about the *curve*, the reward without its noise.
        The outcome is read on logged rewards, which keep some noise even smoothed, so a run on its
        plateau can still show a gain. The *predictive* probability is the model's probability of
        that outcome itself: the later points drawn with their noise and smoothed the same way.
        It is the fair test of the model; the rule's probability says how often a stop's promise
        held on the logged reward.
    """),
    ("code", """
        from bayesgrpo.evaluate.backtest import calibration_table

        checks = pd.read_csv(RESULTS / "backtest_calibration_runs.csv")
        reliability = {column: calibration_table(checks, column=column)
                       for column in ("probability", "predictive_probability")}
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
        for ax, (column, title) in zip(axes, [("probability", "the rule's P(curve gain < eps)"),
                                              ("predictive_probability", "predictive P(smoothed logged gain < eps)")]):
            ax.plot([0, 1], [0, 1], color="0.6", linewidth=0.8, linestyle="--")
            for eps, part in reliability[column].groupby("eps"):
                ax.plot(part["stated_mean"], part["observed_share"], "o-", label=f"eps {eps:g}", markersize=4)
                for row in part.itertuples():
                    ax.annotate(str(row.checks), (row.stated_mean, row.observed_share), fontsize=6,
                                xytext=(3, -8), textcoords="offset points", color="0.4")
            ax.set_title(title, fontsize=9)
            ax.set_xlabel("stated probability (bin mean)")
        axes[0].set_ylabel("share of checks where the run gained < eps")
        axes[0].legend(fontsize=8, loc="upper left")
        fig.suptitle(f"{checks['run_id'].nunique()} runs, {len(checks) // checks['eps'].nunique()} checks "
                     "(labels: checks per bin)", fontsize=9)
        fig.tight_layout()
        for column, table_ in reliability.items():
            high = checks[checks[column] >= 0.9]
            for eps, part in high.groupby("eps"):
                print(f"{column:22s} eps {eps:g}: {len(part):3d} checks at P >= 0.9 (mean {part[column].mean():.3f}); "
                      f"the run then gained < eps at {part['below'].mean():.1%} of them")
        reliability["probability"]
    """),
    ("md", """
        The two panels tell different stories, and both matter. The model is honest about what
        it can see: its predictive probability comes true about as often as it says (of the checks
        where it said at least 0.9, 90% and 95% came true for eps 0.01 and 0.02; every bin lies
        within 0.1 of the diagonal). The rule's probability promises more than
        the logged reward delivers: at checks where it said at least 0.9 (0.98 on average), the run
        then gained less than eps 79% (eps 0.01) and 88% (eps 0.02) of the time. Part of that gap is
        the noise the smoothed outcome keeps, which the rule's probability leaves out by design (it
        asks whether the *curve* will still rise); part is runs that rise again after a real
        plateau, which no curve fitted to the points so far foresees. Read `P = 0.95` from the rule
        as "the curve is flat", and expect about one stop in five with eps 0.01 (one in eight with
        eps 0.02) to have left more than eps on the table in the logged reward.

        ## The knobs

        `PlateauRule(eps, prob, relative=True)`: `eps` is the gain that counts as nothing, as a
        share of the run's reward range; `prob` is how sure the forecast must be that the rest of
        the run gains less. Smaller `eps` and larger `prob` stop later. `BudgetRule(cost_per_step,
        value_per_unit_reward)` puts a price on both sides instead: it stops when no later step has
        a positive expected net value, `value_per_unit_reward x gain - cost_per_step x steps`. Here
        the cost of a step is 1 (one step of compute) and the value of one unit of reward (the whole
        [0, 1] range of a verl reward) is counted in steps of compute: 300 means the full range is
        worth 300 steps, so continuing pays while each further 100 steps are expected to add a third
        of the range. The same held-out run, replayed with each setting:
    """),
    ("code", """
        KNOB_RUN = "verl_pr3389_dp_2_gpu_20251111_061134"
        knobs = {f"plateau eps={eps:g} p={prob:g}": PlateauRule(eps, prob, relative=True)
                 for eps in (0.005, 0.01, 0.02, 0.05) for prob in (0.8, 0.9, 0.95)}
        knobs |= {f"budget: range worth {value:g} steps": BudgetRule(cost_per_step=1.0, value_per_unit_reward=value)
                  for value in (100, 300, 1000, 3000, 10000)}
        knob_replay = stopping_backtest(table.select([KNOB_RUN]), {KNOB_RUN: live}, knobs, check_every_fraction=0.05)
        print(HELD_OUT[KNOB_RUN])
        knob_replay[["rule", "stop_step", "steps_saved", "reward_given_up", "reward_vs_end", "probability"]]
    """),
    ("md", """
        On this run `eps` decides where the rule stops and `prob` hardly does. The probability of a
        plateau climbs over the last third of the run instead of jumping (second row of the replay
        figure, left), so a smaller gain threshold waits longer: step 47 at eps 0.05, step 110 at
        eps 0.005. Raising `prob` from 0.8 to 0.95 delays the stop by one check at most. The budget
        rule prices the expected gain, so its stop moves later as a point of reward becomes worth
        more: step 12 when the range is worth 100 steps, 47 at 300, 64 at 1000, and no stop at 3000
        or 10000. What each says, in its own words, at the same moment of that run (30% of its steps):
    """),
    ("code", """
        run = table.select([KNOB_RUN])
        points = run_points(table, KNOB_RUN)
        now = float(points["step"].iloc[np.searchsorted(points["step"], 0.3 * points["step"].iloc[-1], side="right") - 1])
        prefix = run.points[run.points["step"] <= now].reset_index(drop=True)
        update = live.update(RunsTable(points=prefix, runs=run.runs, report=run.report), horizon=planned_horizon(run))
        for rule in (PlateauRule(0.01, 0.9, relative=True), PlateauRule(0.005, 0.95, relative=True),
                     BudgetRule(1.0, 300.0), BudgetRule(1.0, 3000.0)):
            decision = rule.decide(update.curve_draws, now, horizon_step=float(points["step"].iloc[-1]))[0]
            print(f"step {now:.0f}, {rule}: {decision.decision.upper()}\\n    {decision.reason}")
    """),
    ("md", """
        Take-away. `eps` and `prob` slide the plateau rule along the frontier above. On the run
        replayed here `eps` moves the stop by more than half of the run and `prob` by one check at
        most. `BudgetRule` asks the same question in money: if you can say what a step costs and
        what a point of reward is worth, it picks the stop, and its reason line says what continuing
        is expected to buy. Neither can see a rise the logged points do not yet show, or a climb that
        goes on longer than the forecast expects.
    """),
]

if __name__ == "__main__":
    main(CELLS, "03_when_to_stop.ipynb")
