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
        steps (the seed paper's answer is about 80% of an epoch), or keep a *patience* counter on a
        smoothed reward (stop after so many logged points without a new best), or, with many runs
        of one recipe, prune a run whose reward falls below the median of the others at the same
        step (Optuna's median pruner). bayesgrpo's default rule, `default_rule()`, which
        `bayesgrpo stop`, `watch`, the TRL callback and the verl hook use unless told otherwise, is
        a fixed budget too: `FixedBudgetRule(0.65)` stops every run at 65% of its planned steps, and
        reports beside its decision what the posterior says of the rest of the run (`P(gain < 1%)`
        of the reward range to the horizon, and the expected remaining gain with its interval), so
        that you can overrule it where the forecast disagrees. It is a fixed budget because on the
        held-out source folds of a public corpus of runs (`benchmarks/results/defaults.md`) no
        posterior rule saved more steps than both `fixed 0.5` and `fixed 0.6` at no more reward
        given up, and 65% saved the most steps at no more than 1% of the range given up.
        The posterior rules are there by name. `GuardedBudgetRule(0.5)` is a budget the posterior
        may move: it stops at half the planned steps unless a gain of 2% of the reward range is
        still more than 70% likely, and before that only on a sure plateau (`P(gain < 1%) >= 0.9`);
        neither while the run's own logged reward still rises over its latest tenth of steps.
        `PlateauRule(eps, prob)` asks the plateau question alone: is the gain over the rest of the
        run below `eps` of the range with probability at least `prob`?

        This notebook measures what the rules save and what they give up: first live on four runs
        whose *sources* the population never saw (a user's run is a new source: another notebook,
        another recipe), then over all 60 bundled runs from the committed leave-one-source-out
        backtest, apart for runs with and without a stated reward range; then how often the
        probabilities come true, and the knobs. What a stop gives up is measured against the run's
        own end: the smoothed reward at its last point minus at the stop, as a share of the run's
        logged reward range (negative: the stop kept more than running on would have). Against the
        run's best smoothed point is a second view, with a noise floor (below).

        Set `BAYESGRPO_NOTEBOOK_FAST=1` to run it with few draws (CI does); the committed outputs
        come from full settings.
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
            source_group,
            stopping_backtest,
        )
        from bayesgrpo.evaluate.backtest.stopping import check_indices
        from bayesgrpo.interfaces.plotting import plot_fan
        from bayesgrpo.logs.table import RunsTable
        from bayesgrpo.questions.history import stop_history
        from bayesgrpo.questions.live import LiveForecaster, stated_reward_range
        from bayesgrpo.questions.stopping import (
            BudgetRule,
            FixedBudgetRule,
            GuardedBudgetRule,
            PlateauRule,
            default_rule,
        )

        FAST = os.environ.get("BAYESGRPO_NOTEBOOK_FAST") == "1"
        # the population fit: as the shipped population and the backtests' were fitted, fewer draws when FAST
        FIT = {"draws": 60, "tune": 60, "chains": 2} if FAST else {"draws": 500, "thin": 8, "tune": 1000, "chains": 2}
        LIVE_DRAWS = 300 if FAST else 1000  # draws of each live update
        RESULTS = next(p / "benchmarks" / "results" for p in (Path.cwd(), *Path.cwd().parents)
                       if (p / "benchmarks" / "results").is_dir())
        warnings.simplefilter("ignore")  # the fit's convergence numbers are printed below instead
        for name in ("bayesgrpo", "pymc", "arviz", "numpyro"):
            logging.getLogger(name).setLevel(logging.ERROR)
        plt.rcParams.update({"figure.dpi": 85, "font.size": 8})
        pd.set_option("display.precision", 3)

        table = bayesgrpo.load_bundled(warn=False)
        HELD_OUT = {  # run id -> short label: two verl runs (a stated 0..1 range), two TRL/Unsloth notebook runs (none)
            "verl_gpg_qwen2-7b_math_megatron": "verl Qwen2-7B math",
            "verl_pr3389_dp_2_gpu_20251111_061134": "verl Qwen2.5-0.5B gsm8k",
            "nb_unslothai_notebooks_HuggingFace_Course_Mistral_v0_3_7B_GRPO_c1a161c_n250": "TRL Mistral-7B",
            "nb_unslothai_notebooks_Kaggle_Phi_4_GRPO_a29c3e1_n100": "TRL Phi-4",
        }
        meta = table.runs.set_index("run_id")
        source_of = {run_id: source_group(row) for run_id, row in zip(table.runs["run_id"], table.runs.to_dict("records"))}
        SOURCES = {source_of[run_id] for run_id in HELD_OUT}
        HELD_SOURCES = [run_id for run_id in table.run_ids if source_of[run_id] in SOURCES]  # every run of their sources
        print(f"held out: {len(HELD_SOURCES)} runs of {len(SOURCES)} sources; the population keeps "
              f"{len(table.run_ids) - len(HELD_SOURCES)} runs of {len(set(source_of.values()) - SOURCES)} other sources")
        table.summary().set_index("run_id").loc[
            list(HELD_OUT), ["family", "size_b", "algorithm", "n_points", "last_step", "reward_min", "reward_max"]
        ].rename(index=HELD_OUT).assign(source=[source_of[r] for r in HELD_OUT])
    """),
    ("md", """
        ## A live replay on runs whose source the population never saw

        Every run of the four runs' sources is held out (12 runs: the other run of the verl GPG
        data, the other six runs of the verl pull request, the other Mistral notebook run) and the
        population is fitted on the 48 runs of the 20 other sources, with the shipped population's
        sampler settings. Each of the four runs is then replayed as if it were training now: every
        5% of its steps the live update (`LiveForecaster`, no refit, its shipped settings)
        conditions the population on the points logged so far, and each rule says stop
        or continue. `stopping_backtest` runs bayesgrpo's rules beside those in use today on the
        same runs: a fixed 50% and 80% of the steps, and patience (stop after 10% of the run's
        points without a new best of a trailing mean over 5% of them). `reward_vs_end` is the
        headline measure above; `reward_given_up` is against the run's best smoothed point.
    """),
    ("code", """
        populations = held_out_populations(table, {"held-out sources": HELD_SOURCES}, FIT, random_seed=0)
        population = populations[next(iter(HELD_OUT))]
        fit = population.fit_summary()
        assert not SOURCES & {source_of[r] for r in population.data.run_ids}  # no run of a held-out source
        print(f"population of {fit['n_runs']} runs, {FIT['draws']} draws per chain, {fit['seconds']:.0f} s: "
              f"max r_hat {fit['max_r_hat']:.3f}, min bulk ESS {fit['min_ess_bulk']:.0f}, {fit['divergences']} divergences")
    """),
    ("code", """
        live = LiveForecaster(population, n_draws=LIVE_DRAWS, random_seed=0)  # one forecaster: the same draws below
        DEFAULT = "default: fixed budget 0.65"
        GUARDED = "guarded budget 0.5"
        PLATEAU = "plateau eps=0.01 p=0.9"
        RULES = {
            DEFAULT: default_rule(),
            GUARDED: GuardedBudgetRule(0.5),
            PLATEAU: PlateauRule(eps=0.01, prob=0.9, relative=True),
            "fixed 0.5": FixedFraction(0.5),
            "fixed 0.8": FixedFraction(0.8),
            "patience 0.1 window 0.05": Patience(patience=0.1, window=0.05),
        }
        print(default_rule())
        replay = stopping_backtest(table.select(list(HELD_OUT)), {run_id: live for run_id in HELD_OUT}, RULES,
                                   check_every_fraction=0.05)
        replay.assign(run=replay["run_id"].map(HELD_OUT))[
            ["run", "rule", "stop_step", "last_step", "steps_saved", "reward_vs_end", "reward_given_up", "probability"]
        ]
    """),
    ("md", """
        Left: the posterior's `P(gain to the end < 1% of the range)` at each check, the probability
        the default rule reports beside its decision (it does not decide by it). The grey line is
        its budget, 65% of the run; the black line is where it stopped. Right: the forecast it had
        in hand when it stopped, with its 50% and 90% predictive bands (of a logged reward, noise
        included), against everything the run logged afterwards, and where the guarded budget, the
        plateau rule, fixed 80% and patience stop.
    """),
    ("code", """
        def check_steps(run_id: str, every: float = 0.05) -> np.ndarray:
            \"\"\"The steps the replay asked the rules at (``stopping_backtest``'s own checks).\"\"\"
            points = run_points(table, run_id)
            return points["step"].to_numpy(dtype=float)[check_indices(points, every)]


        def draw_history(history: pd.DataFrame, rule: FixedBudgetRule, ax) -> None:
            \"\"\"The posterior's probability the default rule reports at each check, and its budget.\"\"\"
            horizon = float(history["horizon_step"].max())
            budget = rule.fraction * horizon
            ax.plot(history["step"], history["p_stop"], "o-", color="k", markersize=3,
                    label=f"P(gain < {rule.eps:.0%}), reported beside the decision")
            ax.axhline(0.9, color="C0", linestyle="--", linewidth=1, label="0.9: a sure plateau to PlateauRule(0.01, 0.9)")
            ax.axvline(budget, color="0.6", linewidth=0.8, label=f"the budget: {rule.fraction:.0%} of the run")
            stops = history.loc[history["decision"] == "stop", "step"]
            if len(stops):
                ax.axvline(stops.iloc[0], color="k", linewidth=1.2)
            ax.set_ylim(-0.05, 1.05)
            ax.set_xlim(0, horizon)
            ax.set_xlabel("step")
            ax.set_ylabel("the posterior's probability")
            ax.legend(fontsize=6, frameon=False, loc="center left")


        stops = replay.set_index(["run_id", "rule"])["stop_step"]
        stopped = replay.set_index(["run_id", "rule"])["stopped"]
        histories = {}
        fig, axes = plt.subplots(len(HELD_OUT), 2, figsize=(11, 2.8 * len(HELD_OUT)), width_ratios=[1.1, 1])
        for (run_id, label), (ax_p, ax_f) in zip(HELD_OUT.items(), axes):
            run = table.select([run_id])
            history = stop_history(live, run, steps=check_steps(run_id), rule=RULES[DEFAULT])
            histories[run_id] = history
            draw_history(history, RULES[DEFAULT], ax_p)
            ax_p.set_title(f"{label}: the default rule at each check", fontsize=8)
            stop = stops[run_id, DEFAULT]
            prefix = run.points[run.points["step"] <= stop].reset_index(drop=True)
            update = live.update(RunsTable(points=prefix, runs=run.runs, report=run.report), horizon=planned_horizon(run))
            plot_fan(update.curve_draws, observed=run, step_now=stop, ax=ax_f,
                     title=f"{label}: forecast at step {stop:.0f}" + ("" if stopped[run_id, DEFAULT] else " (never stopped)"))
            for rule, colour in ((GUARDED, "C3"), (PLATEAU, "C0"), ("fixed 0.8", "C1"), ("patience 0.1 window 0.05", "C2")):
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
            assert (first.iloc[0] if len(first) else rows.loc[DEFAULT, "last_step"]) == rows.loc[DEFAULT, "stop_step"]
            print(f"{label} ({rows['last_step'].iloc[0]:.0f} steps):")
            for rule, r in rows.iterrows():
                print(f"  {rule:28s} stops at step {r.stop_step:4.0f}: saves {r.steps_saved:4.0%} of the steps, "
                      f"gives up {r.reward_vs_end:+6.1%} of the range vs the end ({r.reward_given_up:5.1%} vs the best)")
        print("\\nmean over these four runs, against the run's end:")
        frontier(replay.assign(reward_given_up=replay["reward_vs_end"]))[["rule", "steps_saved_mean", "given_up_mean"]]
    """),
    ("md", """
        How to read it. The verl Qwen2-7B run rises within its first ten steps and then creeps up.
        The default stops at its budget, step 73, where the posterior beside it agrees (`P(gain <
        1%) = 1.00`): 30% of the steps saved for 0.6% of the range given up against the end. The
        guarded budget stops at its own budget (step 53, 1.2% given up), the plateau rule at step
        58 (0.9%); fixed 80% gives up 0.1%; patience, waiting for the creep to stop setting new
        bests, runs to step 103.

        The verl Qwen2.5-0.5B run makes one slow S-shaped rise and then keeps climbing slowly to its
        last step. The default stops at step 81, the first check past 65% of the run, and gives up
        13.4% of the range. The posterior beside that stop says the curve is still rising (`P(gain
        < 1%) = 0.00`): this is what the information is for, and a reader of it lets the run go on.
        The guarded budget, which goes on past its budget while a 2% gain is more than 70% likely,
        stops at the same step (`P(gain < 2%) = 0.53`); fixed 50% gives up 21.6%, while fixed 80%
        (step 93, 6.7%) and the plateau rule (step 104, 6.6%) give up half as much. The climb went
        on past what the forecast at step 81 expected (its fan lies under most of the later
        points): the curve family's slow term stands for a climb that slows down, and a run that
        keeps climbing at the same pace beats it.

        On the notebook runs the logged reward is noisy (Mistral-7B) and spiky (Phi-4). On
        Mistral-7B the posterior's probability stays below 0.6 until past the middle of the run and
        is above 0.9 from step 150 on; the default stops at step 175 of 250 and the run ends a
        little lower than it was there (-0.5% against the end); the guarded budget and fixed 50%
        stop at step 125 (-1.6%). Patience stops at step 26, before the rise, and gives up 16.0%.
        On Phi-4 the default stops at step 65 (`P = 0.78`) and gives up 0.3% against the end,
        where the guarded budget and fixed 50%, at step 50, kept 11.2% of the range more than the
        run's end: the best smoothed point of a spiky run is partly noise, so the default's stop
        "gives up" 34.0% against the best. Over the four runs the default saves 31.4% of the steps
        at +3.4% of the range against the end, most of it on the 0.5B run; the guarded budget saves
        44.9% at +0.5%, fixed 50% 49.9% at +2.5%, patience 49.5% at +1.7%, the plateau rule 31.3%
        at +1.7%, fixed 80% 20.0% at -1.8%. Four runs are anecdotes: the numbers that decide come
        next.

        ## The measured frontier over all 60 runs, each from a population without its source

        `benchmarks/backtest.py --split loso` (results in `benchmarks/results/loso/backtest_stopping.md`,
        one row per run and rule in `loso/backtest_stopping_runs.csv`) ran every rule on every bundled
        run in the same way, each run from a population fitted without any run of its source (24
        populations, the shipped settings, each run's stated range given where its metadata has one):
        the plateau rule on a grid of `eps` and `prob`, the guarded budget at 0.5 and 0.6 (and at
        0.5 without its rise guard or with its opt-in flat stop), fixed fractions 0.5 to 0.9 (the
        default's 0.65 lies between 0.6 and 0.7), patience on a grid, and median pruning against the
        other runs of the same source. `frontier` summarises it per rule, here against the run's
        end; `on_frontier` marks the rules no other rule beats on both means.
    """),
    ("code", """
        stopping = pd.read_csv(RESULTS / "loso" / "backtest_stopping_runs.csv")
        stated = {run_id: stated_reward_range(row) is not None for run_id, row in meta.iterrows()}
        stopping["range"] = np.where(stopping["run_id"].map(stated), "stated range", "no stated range")
        vs_end = stopping.assign(reward_given_up=stopping["reward_vs_end"])  # the headline: against the run's end
        front = frontier(vs_end)
        front[["rule", "kind", "n_runs", "steps_saved_mean", "given_up_mean", "given_up_p90", "share_stopped",
               "on_frontier"]].rename(columns={"given_up_mean": "vs_end_mean", "given_up_p90": "vs_end_p90"})
    """),
    ("code", """
        def dominated_by(front: pd.DataFrame) -> pd.Series:
            \"\"\"For each fixed-fraction and patience rule: the bayesgrpo rules that save as many steps on average
            at no more reward given up.\"\"\"
            bayes = front[front["kind"] == "bayes"]
            baselines = front[front["kind"].isin(["fixed_fraction", "patience"]) & (front["rule"] != "full run")]
            return pd.Series({
                row.rule: ", ".join(bayes["rule"][(bayes["steps_saved_mean"] >= row.steps_saved_mean)
                                                  & (bayes["given_up_mean"] <= row.given_up_mean)]) or "none"
                for row in baselines.itertuples(index=False)
            }, name="dominated by")


        def bar(front: pd.DataFrame, saved: float = 0.5, given_up: float = 0.01) -> str:
            \"\"\"Which bayesgrpo rules save at least ``saved`` of the steps at no more than ``given_up``.\"\"\"
            bayes = front[front["kind"] == "bayes"]
            met = bayes[(bayes["steps_saved_mean"] >= saved) & (bayes["given_up_mean"] <= given_up)]
            return ", ".join(met["rule"]) or "no rule"


        print(f">= 50% of steps saved at <= 1% of the range given up against the end, all 60 runs: {bar(front)}")
        dominated_by(front).to_frame()
    """),
    ("code", """
        def draw_frontier(front: pd.DataFrame, ax, title: str) -> None:
            \"\"\"Mean steps saved against mean reward given up, one marker per rule.\"\"\"
            ax.axhspan(-1.0, 0.01, xmin=0.52 / 1.02, color="0.88", zorder=0)
            ax.text(0.98, 0.012, ">= 50% at <= 1%", ha="right", va="bottom", fontsize=7, color="0.35")
            ax.axhline(0.0, color="0.6", linewidth=0.5)
            plateau = front[front["rule"].str.startswith("plateau")]
            settings = plateau["rule"].str.extract(r"eps=([0-9.]+) p=([0-9.]+)").astype(float)
            for k, (eps, part) in enumerate(plateau.assign(eps=settings[0], prob=settings[1]).groupby("eps")):
                part = part.sort_values("prob")
                colour = plt.cm.Blues(0.45 + 0.17 * k)
                ax.plot(part["steps_saved_mean"], part["given_up_mean"], "-o", color=colour, markersize=4,
                        label=f"plateau rule, eps {eps:g} (p 0.8 ... 0.95)")
            guarded = front[front["rule"].str.startswith("guarded")]
            ax.plot(guarded["steps_saved_mean"], guarded["given_up_mean"], "*", color="C3", markersize=12,
                    markeredgecolor="k", markeredgewidth=0.6, zorder=5, label="guarded budget 0.5, 0.6 and variants")
            fixed = front[front["kind"] == "fixed_fraction"].sort_values("steps_saved_mean")
            ax.plot(fixed["steps_saved_mean"], fixed["given_up_mean"], "-s", color="C1", markersize=4, linewidth=0.8,
                    label="fixed fraction (0.9 ... 0.5; full run at 0)")
            for row in front[front["kind"].isin(["patience", "median_pruning"])].itertuples(index=False):
                colour = "C2" if row.kind == "patience" else "C4"
                ax.plot(row.steps_saved_mean, row.given_up_mean, "^", color=colour, markersize=5)
            ax.plot([], [], "^", color="C2", label="patience")
            ax.plot([], [], "^", color="C4", label="median pruning")
            values = front["given_up_mean"]
            ax.set_ylim(min(values.min(), 0.0) - 0.02, values.max() + 0.03)
            ax.set_xlim(-0.02, 1.0)
            ax.set_xlabel("mean share of steps saved")
            ax.set_title(title, fontsize=9)


        fig, axes = plt.subplots(1, 3, figsize=(13, 4))
        draw_frontier(front, axes[0], f"all {stopping['run_id'].nunique()} runs")
        by_range = {}
        for ax, (kind, part) in zip(axes[1:], stopping.groupby("range")):
            by_range[kind] = frontier(part.assign(reward_given_up=part["reward_vs_end"]))
            draw_frontier(by_range[kind], ax, f"{part['run_id'].nunique()} runs, {kind}")
        axes[0].set_ylabel("mean reward given up against the run's end\\n(share of its logged range)")
        fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=7, frameon=False)
        fig.tight_layout(rect=(0, 0.12, 1, 1))
        KEY_RULES = ["guarded budget 0.5", "guarded budget 0.6", "plateau eps=0.01 p=0.9", "plateau eps=0.02 p=0.9",
                     "fixed 0.5", "fixed 0.6", "fixed 0.8", "patience 0.1 window 0.05", "full run"]
        pd.concat({kind: f.set_index("rule").loc[KEY_RULES, ["n_runs", "steps_saved_mean", "given_up_mean", "on_frontier"]]
                   for kind, f in by_range.items()}, axis=1).rename(columns={"given_up_mean": "vs_end_mean"})
    """),
    ("code", """
        for kind, f in by_range.items():
            dominated = dominated_by(f)
            print(f"{kind}: >= 50% at <= 1%: {bar(f)}; fixed and patience rules no bayesgrpo rule dominates: "
                  f"{', '.join(dominated[dominated == 'none'].index) or 'none'}")
        best = stopping.assign(reward_given_up=stopping["reward_given_up"])  # the second view: against the best point
        best_front = frontier(best).set_index("rule")
        print(f"\\nagainst the run's best smoothed point, running every run to its end gives up "
              f"{best_front.loc['full run', 'given_up_mean']:.1%} of the range on average (the noise floor of that view); "
              f"guarded budget 0.5 {best_front.loc['guarded budget 0.5', 'given_up_mean']:.1%}, "
              f"fixed 0.5 {best_front.loc['fixed 0.5', 'given_up_mean']:.1%}")
    """),
    ("md", """
        What it shows, plainly. Over all 60 runs the guarded budget 0.5 saves 50.2% of the steps at
        +0.4% of the range given up against the run's end, on the frontier, and is the one rule
        that meets the bar the calibration issue sets (at least 50% saved at no more than 1% given
        up, mean over runs). It dominates fixed 0.5 (49.9% at +4.1%) and fixed 0.7 (29.7% at
        +0.5%), but no bayesgrpo rule dominates fixed 0.6 (39.9% at -0.2%); the default's 0.65 lies
        between those two fixed budgets.

        The two kinds of run behave differently, and the average hides it:

        - **Without a stated range** (36 short, noisy TRL/Unsloth notebook runs) the guarded budget
          saves 52.8% at -1.9% and dominates fixed 0.5 (50.0% at -1.2%). Fixed 0.6 (39.9% at
          -4.5%) is not dominated, nor are three of the eager patience settings.
        - **With a stated range** (24 long verl runs, clean logs) no rule meets the bar. These runs
          keep climbing after their middle: fixed 0.5 gives up 12.0%, fixed 0.6 6.2%, fixed 0.8
          -0.4%. The guarded budget goes past its budget on many of them and gives up 3.8% at 46.3%
          saved, under a third of what fixed 0.5 gives up, but fixed 0.8 and 0.9 and the patient
          patience settings are not dominated there. The forecast expects the late climb to end
          sooner than it does, as on the 0.5B run above.

        Why, then, is the default a fixed budget? These 60 runs are the ones the posterior rules
        were designed on. On a public corpus's runs from 73 sources none of them comes from, held
        out fold by fold (`benchmarks/results/defaults.md`), no posterior rule dominated both
        `fixed 0.5` and `fixed 0.6`: without a stated range the guarded budget 0.5 gave up more than
        fixed 0.5, and with one it saved fewer steps than fixed 0.65 and gave up more.

        Against the run's best smoothed point (the second view) running every run to its end gives
        up 14.6% of the range on average: on a noisy run the best smoothed point is partly noise.
        That is the floor of this view; the guarded budget gives up 15.0%, fixed 0.5 18.7%. Every
        number here is of one seed of the live update.

        ## Is the rule's probability honest?

        When the forecast says `P(gain < eps) = 0.95`, does the run then gain less than `eps` 95%
        of the time? The backtest kept, at every check of every run (every 5% of its steps, from a
        population that never saw its source), the live update's probability and what the run did
        next: the gain of its smoothed reward from the check to its last step, smoothed over the
        run's cross-validated window (the window whose mean best predicts each logged point from
        its neighbours; wide on a noisy flat run, narrow on a clean rise), in the rule's unit. Two
        probabilities are scored. The rules' is about the *curve*, the reward without its noise.
        The outcome is read on logged rewards, which keep some noise even smoothed, so a run on its
        plateau can still show a gain. The *predictive* probability is the model's probability of
        that outcome itself: the later points drawn with their noise and smoothed the same way. It
        is the fair test of the model; the rules' probability says how often a stop's promise held
        on the logged reward.
    """),
    ("code", """
        from bayesgrpo.evaluate.backtest import calibration_table

        checks = pd.read_csv(RESULTS / "loso" / "backtest_calibration_runs.csv")
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
        fig.suptitle(f"{checks['run_id'].nunique()} runs, {len(checks) // checks['eps'].nunique()} checks, "
                     "each from a population without the run's source (labels: checks per bin)", fontsize=9)
        fig.tight_layout()
        for column in reliability:
            for eps, part in checks[checks[column] >= 0.9].groupby("eps"):
                print(f"{column:22s} eps {eps:g}: {len(part):3d} checks at P >= 0.9 (mean {part[column].mean():.3f}); "
                      f"the run then gained < eps at {part['below'].mean():.1%} of them")
        reliability["probability"]
    """),
    ("md", """
        The model is nearly honest about what it can see: of the checks where its predictive
        probability was at least 0.9, 93.8% (eps 1%) and 95.1% (eps 2%) came true. The rules'
        probability promises more than the logged reward delivers, most in the middle: checks at
        0.5-0.8 came true 35-42% of the time, at 0.8-0.9 48-54%. At checks where it said at least
        0.9 (0.97-0.98 on average) the run then gained less than eps 76.1% (eps 1%) and 85.0% (eps
        2%) of the time; the calibration issue asks for 85%, met at eps 2%. Part of the gap is the
        noise the smoothed outcome keeps, which the curve's probability leaves out by design; part
        is runs that rise again after a real plateau or climb longer than any curve fitted to the
        points so far foresees. Read `P = 0.95` as "the curve is flat", and expect about one stop
        in four with eps 1% (one in seven with eps 2%) to have left more than eps on the table in
        the logged reward. The default reports this probability beside its decision and does not
        decide by it. `GuardedBudgetRule` leans on the better-calibrated end: its early stop needs
        `P(gain < 1%) >= 0.9`, and not while the run's logged reward still rises; past its budget a
        probability of 0.3 only decides whether to go on.

        ## The knobs

        `FixedBudgetRule(fraction=0.65, eps=0.01)`, the default: `fraction` is the share of the
        planned steps it stops at; `eps` only sets which `P(gain < eps)` it reports.
        `GuardedBudgetRule(fraction, eps=0.02, prob=0.3, early_eps=0.01, early_prob=0.9,
        rising_eps=0.01)`: `fraction` is the budget, a share of the planned steps; past it the run
        goes on while `P(gain < eps) < prob` (with 0.3, while a gain of `eps` is more than 70%
        likely; a larger `prob` goes on longer); before it the run stops only where `P(gain <
        early_eps) >= early_prob` (`early_prob=None`: never); and no stop, early or at the budget,
        while the run's logged reward rose by more than `rising_eps` of the range over its latest
        tenth of steps, at the one-sided 95% bound of its least-squares rise (`rising_eps=None`:
        never held). `PlateauRule(eps, prob)`: smaller `eps` and larger
        `prob` stop later. `BudgetRule(cost_per_step, value_per_unit_reward)` puts a price on both
        sides: it stops when no later step has a positive expected net value,
        `value_per_unit_reward x gain - cost_per_step x steps`, here with a step costing 1 and the
        whole reward range (the [0, 1] of a verl reward) worth 100 to 3000 steps of compute. Two
        of the held-out runs replayed with each setting: the Mistral-7B run, flat after its rise,
        and the 0.5B verl run, still climbing at its end.
    """),
    ("code", """
        KNOB_RUNS = ["verl_pr3389_dp_2_gpu_20251111_061134", "nb_unslothai_notebooks_HuggingFace_Course_Mistral_v0_3_7B_GRPO_c1a161c_n250"]
        knobs = {f"fixed budget {f:g}": FixedBudgetRule(f) for f in (0.5, 0.65, 0.8)}
        knobs |= {f"guarded budget {f:g}, guard {q:g}": GuardedBudgetRule(f, prob=q)
                 for f in (0.4, 0.5, 0.6, 0.8) for q in (0.3, 0.5)}
        knobs |= {"guarded budget 0.5, no early stop": GuardedBudgetRule(0.5, early_prob=None),
                  "guarded budget 0.5, early at 0.95": GuardedBudgetRule(0.5, early_prob=0.95),
                  "guarded budget 0.5, no rise guard": GuardedBudgetRule(0.5, rising_eps=None),
                  "guarded budget 0.5, flat stop 0.02": GuardedBudgetRule(0.5, flat_eps=0.02)}
        knobs |= {f"plateau eps={eps:g} p={prob:g}": PlateauRule(eps, prob, relative=True)
                  for eps in (0.01, 0.02, 0.05) for prob in (0.8, 0.95)}
        knobs |= {f"budget: range worth {value:g} steps": BudgetRule(cost_per_step=1.0, value_per_unit_reward=value)
                  for value in (100, 300, 1000, 3000)}
        knob_replay = stopping_backtest(table.select(KNOB_RUNS), {run_id: live for run_id in KNOB_RUNS}, knobs,
                                        check_every_fraction=0.05)
        knob_replay.assign(run=knob_replay["run_id"].map(HELD_OUT)).pivot_table(
            index="rule", columns="run", values=["stop_step", "steps_saved", "reward_vs_end"], sort=False
        )
    """),
    ("md", """
        The fixed budget stops where it is told, whatever the run does: at step 125, 175 or 200 on
        the flat run (each keeping 0.5-2.2% of the range more than the run's end) and at 58, 81 or
        93 on the climbing run (+21.6%, +13.4%, +6.7%). On the flat run the guarded rule's budget
        decides too: it stops at its budget whatever its guard (step 100, 125 or 150 for 0.4, 0.5
        or 0.6, each keeping 1.2-1.7% of the range more than the run's end), and with a budget of
        0.8 a sure plateau stops it earlier, at step 150. On the climbing run the guard decides:
        budgets 0.4 to 0.6 all go past their budget and stop at step 81 with either guard
        (+13.4%); only the budget 0.8 runs to step 93 (+6.7%). The early-stop setting (none, 0.9,
        0.95), the rise guard and the opt-in flat stop change nothing on either. The plateau rule's
        `eps` moves its stop by more than `prob` does; eps 5% with p 0.8 stops the flat run at step
        38, before its rise had ended (+17.1%). The budget rule's stop moves later as the range is
        worth more: on the climbing run step 12 when it is worth 100 steps, 47 at 300, 64 at 1000,
        never at 3000. What each says, in its own words, at 30% and 60% of the climbing run:
    """),
    ("code", """
        KNOB_RUN = KNOB_RUNS[0]
        run = table.select([KNOB_RUN])
        points = run_points(table, KNOB_RUN)
        horizon = float(points["step"].iloc[-1])
        for share in (0.3, 0.6):
            now = float(points["step"].iloc[np.searchsorted(points["step"], share * horizon, side="right") - 1])
            prefix = run.points[run.points["step"] <= now].reset_index(drop=True)
            update = live.update(RunsTable(points=prefix, runs=run.runs, report=run.report), horizon=planned_horizon(run))
            for rule in (default_rule(), GuardedBudgetRule(0.5), PlateauRule(0.01, 0.9, relative=True), BudgetRule(1.0, 300.0)):
                decision = rule.decide(update.curve_draws, now)[0]
                print(f"step {now:.0f} of {horizon:.0f}, {rule}:\\n    {decision.decision.upper()}: {decision.reason}")
    """),
    ("md", """
        Take-away. `default_rule()` stops every run at 65% of its planned steps and says, beside
        the decision, what the posterior thinks of the rest of the run: `P(gain < 1%)` and the
        expected remaining gain. It is a fixed budget because on runs from sources the package
        never saw no posterior rule beat the fixed budgets it was compared with
        (`benchmarks/results/defaults.md`); on the 60 bundled runs above the guarded budget looks
        better, and that difference is why a default is chosen on held-out sources. Use the
        information: where the posterior says the curve is still rising at the budget (the 0.5B run
        above, `P = 0.00`), let the run go on, or ask a rule that does. `GuardedBudgetRule(0.5)`
        goes on past its budget while a gain of 2% is still likely, and stops before it only on a
        sure plateau; `FixedBudgetRule(0.8)` is a later budget for runs that keep climbing (on the
        verl runs with a stated range a fixed 80% gave up -0.4% at 19.9% of the steps saved).
        `PlateauRule` answers the plateau question at your `eps` and probability; `BudgetRule`
        answers in money if you can price a step and a point of reward. None of them sees a rise the
        logged points do not yet show.

        If you would rather stop a run that has gone flat than wait for a late rise,
        `GuardedBudgetRule(0.5, flat_eps=0.02)` (`bayesgrpo stop --rule guarded-budget --flat-stop
        0.02`) also stops, from 20% of the run on, where the logged reward rose less than 2% of the
        range over the run's latest fifth, at the rise's one-sided 95% upper bound (never while the
        rise guard holds the run). On these 60 runs it saves 53.5% at +2.6%.
    """),
]

if __name__ == "__main__":
    main(CELLS, "03_when_to_stop.ipynb")
