"""Write notebooks/04_cross_model_transfer.ipynb.

    python notebooks/_build/make_04.py --execute          # run with full settings: the committed file
    python notebooks/_build/make_04.py --execute --fast   # try it with BAYESGRPO_NOTEBOOK_FAST=1 (do not commit)
    python notebooks/_build/make_04.py                    # the notebook without outputs
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _nb import main

CELLS = [
    ("md", """
        # Cross-model transfer: the curve of a run you have not trained yet

        You are about to launch a GRPO run at a model size you have never trained on this recipe.
        Before the first step, what will its reward curve look like, and how much sharper does the
        forecast get once its first 5% or 10% of steps are logged? bayesgrpo's population places a new
        run by its metadata (family, size, task, samples per step, the reward's range) as it places
        a fitted run, and conditions it on the reward the model had before training, or on its first
        points, when there are any (`bayesgrpo.questions.transfer.predict_new_run`). This notebook holds out
        every run of one model size, predicts those runs from a population that never saw that size,
        scores the predictions, then asks what happens for a family the population has never seen,
        what the committed evaluation over all runs says, and what the population says about model
        size.

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
        from bayesgrpo.model.datasets import bundled_population
        from bayesgrpo.evaluate.backtest import cut_points, planned_horizon, run_points
        from bayesgrpo.evaluate.transfer_eval import (
            improvement_over,
            known_reward_bounds,
            population_mean_metadata,
            size_groups,
            size_out_populations,
            transfer_scores,
            transfer_summary,
            zero_shot_metadata,
        )
        from bayesgrpo.interfaces.plotting import plot_scaling, plot_transfer
        from bayesgrpo.questions.shrinkage import scaling_table
        from bayesgrpo.logs.table import RunsTable
        from bayesgrpo.questions.transfer import predict_new_run

        FAST = os.environ.get("BAYESGRPO_NOTEBOOK_FAST") == "1"
        DRAWS = 60 if FAST else 500  # population fit: draws and tuning steps per chain
        PREDICTIVE_DRAWS = 300 if FAST else 1000  # draws of each prediction
        RESULTS = next(p / "benchmarks" / "results" for p in (Path.cwd(), *Path.cwd().parents)
                       if (p / "benchmarks" / "results").is_dir())
        warnings.simplefilter("ignore")  # the fit's convergence numbers are printed below instead
        for name in ("bayesgrpo", "pymc", "arviz", "numpyro"):
            logging.getLogger(name).setLevel(logging.ERROR)
        plt.rcParams.update({"figure.dpi": 85, "font.size": 8})
        pd.set_option("display.precision", 3)

        table = bayesgrpo.load_bundled(warn=False)
        runs = table.runs.set_index("run_id")
        groups = size_groups(table)  # sizes with at least 2 runs
        pd.DataFrame({
            "runs": {size: len(ids) for size, ids in groups.items()},
            "with a stated reward range": {
                size: sum(known_reward_bounds(runs.loc[r].to_dict()) is not None for r in ids) for size, ids in groups.items()
            },
            **{column: {size: ", ".join(sorted({str(v) if pd.notna(v) else "unknown" for v in runs.loc[ids, column]}))
                        for size, ids in groups.items()}
               for column in ("family", "algorithm", "task")},
        }).rename_axis("size_b (B parameters)")
    """),
    ("md", """
        A zero-shot prediction needs the reward's range (`reward_min`, `reward_max`: 0 and 1 for an
        accuracy reward); only the verl runs state it. The range matters beyond that: where a run
        starts and ends (the levels `r0`, `r1`) gets its size, family and task effects from the runs
        on a stated range alone, since a run on its own logged range has levels on a scale of its
        own; the timing (`tau`, `k`) learns from every run. 7B has the most runs on a stated range
        after 0.5B, so every 7B run is held out, and the population is fitted on the rest
        (`size_out_populations`, the split of the committed evaluation). For the timing, 7B sits
        between sizes the population keeps (4B and 8B); for the levels it does not: the largest
        size left on a stated range is 3B, so the population extrapolates from 0.5B, 2B and 3B.
    """),
    ("code", """
        SIZE = 7.0
        held = groups[SIZE]
        populations = size_out_populations(table, {"draws": DRAWS, "tune": DRAWS, "chains": 2}, random_seed=0, sizes=[SIZE])
        population = populations[held[0]]
        fit = population.fit_summary()
        seen = pd.to_numeric(runs.loc[list(population.data.run_ids), "size_b"], errors="coerce")
        assert SIZE not in set(seen)
        print(f"population of {fit['n_runs']} runs without the {len(held)} runs of {SIZE:g}B, {DRAWS} draws per chain, "
              f"{fit['seconds']:.0f} s: max r_hat {fit['max_r_hat']:.3f}, min bulk ESS {fit['min_ess_bulk']:.0f}, "
              f"{fit['divergences']} divergences")
        print("sizes it saw:", ", ".join(f"{s:g}B" for s in sorted(seen.dropna().unique())),
              f"(and {int(seen.isna().sum())} runs of unknown size)")
    """),
    ("md", """
        ## Three held-out runs, before and just after they start

        For each run, five predictions of its curve (band: 5 to 95% of the expected reward, without
        logging noise; dots: what the run logged): a run with the run's reward range and horizon
        but no other metadata, its size and family any of those the population's runs had
        (*population mean*, the reference), the
        zero-shot prediction from its metadata, the same given the reward the model had before
        training (`initial_reward`, here the run's first logged reward: a validation score at step 0
        serves as well), and the prediction updated by its points in the first 5% and 10% of its
        steps (dotted line). The third run, a TRL notebook, states no reward range:
        it gets no zero-shot prediction, only the updates from its first points.
    """),
    ("code", """
        SHOWN = {
            "verl_asyncRA_gsm8k_qwen2_7b_base": "verl Qwen2-7B gsm8k",
            "verl_gpg_qwen2-7b_math": "verl Qwen2-7B math (GPG)",
            "nb_unslothai_notebooks_HuggingFace_Course_Mistral_v0_3_7B_GRPO_24dd807_n250": "TRL Mistral-7B",
        }


        def predictions(run_id: str) -> dict[str, tuple[object, float | None]]:
            \"\"\"Method -> (prediction, end of the prefix it saw) for one held-out run.\"\"\"
            run = table.select([run_id])
            metadata = run.runs.iloc[0].to_dict()
            horizon = planned_horizon(run)
            kwargs = {"horizon": horizon, "n_draws": PREDICTIVE_DRAWS, "random_seed": 0}
            out = {}
            if known_reward_bounds(metadata) is not None:
                out["population mean"] = (predict_new_run(population, population_mean_metadata(metadata), **kwargs), None)
                out["zero-shot"] = (predict_new_run(population, zero_shot_metadata(metadata), **kwargs), None)
                first_reward = float(run_points(table, run_id)["reward"].iloc[0])
                out["zero-shot + initial reward"] = (
                    predict_new_run(population, zero_shot_metadata(metadata, initial_reward=first_reward), **kwargs), None)
            for fraction in (0.05, 0.1):
                cut = cut_points(run_points(table, run_id), fraction)
                first = RunsTable(points=run.points[run.points["step"] <= cut.step].reset_index(drop=True),
                                  runs=run.runs, report=run.report)
                out[f"after {fraction:.0%} ({len(cut.observed)} points)"] = (
                    predict_new_run(population, metadata, first_points=first, **kwargs), cut.step)
            return out


        COLUMNS = 5
        fig, axes = plt.subplots(len(SHOWN), COLUMNS, figsize=(15, 2.6 * len(SHOWN)), sharey="row")
        for (run_id, label), row in zip(SHOWN.items(), axes):
            made = predictions(run_id)
            for k, (ax, (method, (prediction, cut))) in enumerate(zip(row[COLUMNS - len(made):], made.items())):
                plot_transfer({run_id: prediction}, table.select([run_id]), ax=ax)
                ax.yaxis.set_tick_params(labelleft=k == 0 or ax is row[0])
                ax.get_legend().remove()
                if cut is not None:
                    ax.axvline(cut, color="0.3", linestyle=":", linewidth=1)
                ax.set_title(f"{label}: {method}", fontsize=8)
            for ax in row[: COLUMNS - len(made)]:
                ax.text(0.5, 0.5, "no reward range stated:\\nno zero-shot prediction", ha="center", va="center",
                        transform=ax.transAxes, fontsize=8, color="0.4")
                ax.set_axis_off()
        fig.tight_layout()
    """),
    ("md", """
        The population-mean curve is wide and centred far below these two verl runs, which climb
        most of the way to the top of the scale within a few steps: without a size, a run on a
        stated range is placed among the population's runs on one, most of them 0.5B runs that end
        near 0.5. The zero-shot prediction from
        their metadata starts higher (near 0.6), ends near where they end, and holds both inside its
        band, but its mean takes tens of steps over a rise the runs make in a few. Given the initial
        reward it gets worse: the start is pinned at the runs' low first reward (0.25 for the gsm8k
        run), the population reads a start that low as a run that climbs slowly, and the gsm8k run
        sits at the top of the band throughout. A handful of logged points move the prediction onto
        the run. After 5% of its steps the GPG run's update levels off a little below the run's slow
        late climb; after 10% it follows it. The noisy notebook run is harder: both
        updates expect it to climb, but less than it does, and their bands hold only the lower part
        of its later points.

        ## Scores over every 7B run

        `transfer_scores` makes the same predictions for every held-out run and scores them against
        its logged rewards (draws of a logged point: the curve plus one point's noise). CRPS is in
        units of the run's logged reward range (lower is better); `cover90` is the share of logged
        points inside the 90% interval. Windows: `whole_curve` is every point but the first, for the
        zero-shot methods; `after_5pct` / `after_10pct` are the points after the prefix, where every
        method is compared on the same points, including `run_alone_*`: the prefix fitted alone by
        least squares of a saturating exponential with a residual bootstrap, no population.
        `zero_shot_initial` is the zero-shot prediction given the run's first logged reward.
    """),
    ("code", """
        scores = transfer_scores(table.select(held), populations, split=f"{SIZE:g}B held out",
                                 n_draws=PREDICTIVE_DRAWS, random_seed=0)
        transfer_summary(scores)[["window", "method", "runs", "crps_median", "crps_mean", "final_err_mean",
                                  "cover50_mean", "cover90_mean", "not_ok"]]
    """),
    ("code", """
        gains = improvement_over(scores)  # against the population-mean curve
        alone = pd.concat([improvement_over(scores, baseline=f"run_alone_{p}") for p in ("5pct", "10pct")])
        alone = alone[alone["method"] == alone["window"]]  # the update after p against the prefix fitted alone
        for method in ("zero_shot", "zero_shot_initial"):
            zero = gains[(gains["window"] == "whole_curve") & (gains["method"] == method)].iloc[0]
            print(f"{method} vs the population-mean curve, whole curve: CRPS {zero.crps_mean_gain:+.1%} on the mean "
                  f"({zero.crps_median_gain:+.1%} on the median), lower on {zero.crps_wins} runs")
        for row in alone.itertuples(index=False):
            print(f"{row.method} (the population updated by the prefix) vs the prefix fitted alone: "
                  f"CRPS {row.crps_mean_gain:+.1%} on the mean, lower on {row.crps_wins} runs")
        pd.concat([gains, alone.assign(method=alone["method"] + " vs run alone")])[
            ["window", "method", "runs", "crps_mean_gain", "crps_median_gain", "final_err_mean_gain", "crps_wins"]]
    """),
    ("md", """
        ## A family the population has never seen

        The population learns a family effect per family, and how much families differ (the
        between-family spread, `*_family_sd`). A run of a family it has seen gets that family's
        effect; a run of a *new* family gets a fresh draw from the spread, so its interval is
        wider; a run whose family is not given at all is placed at the average family. The family
        effects on the levels learn from the runs on a stated range alone, and only when those come
        from at least 3 families; here they come from two (Qwen and Gemma), so the family moves
        only the timing (NaN below). The same held-out 7B Qwen run, three ways:
    """),
    ("code", """
        RUN = "verl_asyncRA_gsm8k_qwen2_7b_base"
        run = table.select([RUN])
        metadata = zero_shot_metadata(run.runs.iloc[0].to_dict())
        kwargs = {"horizon": planned_horizon(run), "n_draws": PREDICTIVE_DRAWS, "random_seed": 0}
        variants = {
            f"known family ({metadata['family']})": metadata,
            "family not given (average family)": {k: v for k, v in metadata.items() if k != "family"},
            "new family (never seen)": {**metadata, "family": "a family never seen"},
        }
        made = {name: predict_new_run(population, meta, **kwargs) for name, meta in variants.items()}
        widths = pd.DataFrame({
            name: {"final mean": p.table["mean"].iloc[-1], "final q05": p.table["q05"].iloc[-1],
                   "final q95": p.table["q95"].iloc[-1], "final 90% width": p.table["q95"].iloc[-1] - p.table["q05"].iloc[-1],
                   "mean 90% width over the curve": (p.table["q95"] - p.table["q05"]).mean()}
            for name, p in made.items()
        }).T
        posterior = population.idata.posterior
        spread = pd.DataFrame({
            param: {"between families": float(posterior[name].median()) if name in posterior else np.nan,
                    "between runs of a family (sd)": float(posterior[f"{param}_sd"].median())}
            for param in ("r0", "r1", "tau", "k")
            # the levels' family effects come from runs on a stated reward range only (level_family)
            for name in [f"{param}_level_family_sd" if f"{param}_level_family_sd" in posterior else f"{param}_family_sd"]
        })
        display(widths)
        print("posterior medians of the spreads on the model's scales (logit for the start r0 and the level r1, "
              "log for the time tau and the shape k); NaN: no family effect in this population")
        spread
    """),
    ("code", """
        fig, (ax, ax_w) = plt.subplots(1, 2, figsize=(13, 3.4), width_ratios=[1.4, 1])
        plot_transfer({name: made[name] for name in list(made)[::2]}, ax=ax)  # known and new family
        logged = run_points(table, RUN)
        ax.plot(logged["step"], logged["reward"], ".", color="k", markersize=2.5, alpha=0.7)
        ax.set_title(f"{SHOWN[RUN]}, zero-shot as a known and as a new family (black dots: logged)", fontsize=8)
        for (name, prediction), colour in zip(made.items(), ("C0", "0.5", "C1")):  # the left panel's colours
            ax_w.plot(prediction.table["step"], prediction.table["q95"] - prediction.table["q05"], color=colour, label=name)
        ax_w.set_ylim(0.0, 1.1 * max(float((p.table["q95"] - p.table["q05"]).max()) for p in made.values()))
        ax_w.set_xlabel("step")
        ax_w.set_ylabel("width of the 90% interval (reward)")
        ax_w.legend(fontsize=7, frameon=False)
        ax_w.set_title("how wide the prediction is, three ways", fontsize=8)
        fig.tight_layout()
    """),
    ("md", """
        A family not given widens the interval a little, in the middle of the curve where the
        timing shows (mean 90% width 0.339 known, 0.375 not given); a new family widens it more, and
        to the end (0.428; at the end 0.217 against 0.163 known and 0.160 not given): a family the
        population never saw gets the between-family spread of every parameter it has one for. The
        time `tau` varies much more between runs of a family than between families (0.991 against
        0.277 on the log scale), so not knowing the family adds little to what is already unknown
        about any single run; the shape `k` varies more between families (0.916 against 0.280). All three intervals hold where this run went, near their top edge:
        the run jumps to 0.95 within a few steps, their means take tens of steps to get there.

        ## What the committed evaluation says over all runs

        `benchmarks/transfer_eval.py` (results in `benchmarks/results/transfer_eval.md` and, one row
        per run, window and method, `transfer_eval_runs.csv`) ran the same scores over all 60 runs in
        three splits: `kfold_by_run` (5-fold by run: other runs of the same size and recipe stay in
        the population), `leave_one_size_out` (every size held out in turn, as above) and
        `leave_one_family_out` (every family held out in turn: each of its runs is a new family to
        its population). The summary is recomputed here from the CSV with the same functions.
    """),
    ("code", """
        committed = pd.read_csv(RESULTS / "transfer_eval_runs.csv")
        committed_gains = improvement_over(committed)
        for split in ("kfold_by_run", "leave_one_size_out", "leave_one_family_out"):
            for method in ("zero_shot", "zero_shot_initial"):
                row = committed_gains[(committed_gains["split"] == split) & (committed_gains["window"] == "whole_curve")
                                      & (committed_gains["method"] == method)].iloc[0]
                print(f"{split}: {method} whole-curve CRPS {row.crps_mean_gain:+.1%} vs the population-mean curve on "
                      f"the mean ({row.crps_median_gain:+.1%} on the median), lower on {row.crps_wins} runs")
        committed_gains[committed_gains["window"].isin(["whole_curve", "after_10pct"])][
            ["split", "window", "method", "runs", "crps_mean_gain", "crps_median_gain", "final_err_mean_gain", "crps_wins"]]
    """),
    ("code", """
        summary = transfer_summary(committed)
        shown = summary[(summary["window"] == "whole_curve") | summary["method"].str.startswith(("after", "run_alone"))]
        for split in ("kfold_by_run", "leave_one_size_out", "leave_one_family_out"):
            for method in ("zero_shot", "zero_shot_initial"):
                row = summary[(summary["split"] == split) & (summary["window"] == "whole_curve")
                              & (summary["method"] == method)].iloc[0]
                print(f"{split}: {method} intervals hold {row.cover50_mean:.1%} of the logged points at 50% "
                      f"and {row.cover90_mean:.1%} at 90%")
        shown[["split", "window", "method", "runs", "crps_median", "crps_mean", "cover50_mean", "cover90_mean"]]
    """),
    ("code", """
        loso = committed[committed["split"] == "leave_one_size_out"]
        per_size = {}
        for size, part in loso.groupby("size_b"):
            gains_here = improvement_over(part)
            gain = gains_here[(gains_here["window"] == "whole_curve") & (gains_here["method"] == "zero_shot")]
            gain_initial = gains_here[(gains_here["window"] == "whole_curve")
                                      & (gains_here["method"] == "zero_shot_initial")]
            after = improvement_over(part, baseline="run_alone_10pct")
            after = after[(after["window"] == "after_10pct") & (after["method"] == "after_10pct")]
            per_size[f"{size:g}B"] = {
                "runs": part["run_id"].nunique(),
                "zero-shot vs population mean: CRPS gain": gain["crps_mean_gain"].iloc[0] if len(gain) else np.nan,
                "zero-shot wins": gain["crps_wins"].iloc[0] if len(gain) else "",
                "+ initial reward: CRPS gain": gain_initial["crps_mean_gain"].iloc[0] if len(gain_initial) else np.nan,
                "after 10% vs run alone: CRPS gain": after["crps_mean_gain"].iloc[0],
                "after 10% wins": after["crps_wins"].iloc[0],
            }
        pd.DataFrame.from_dict(per_size, orient="index").rename_axis("size held out")
    """),
    ("md", """
        Where it is weak, plainly:

        - **The reference is a run of unknown size and family.** The population-mean curve places a
          run whose size, family and task are not given among the population's runs (its size any
          of theirs): on the stated-range runs that is mostly 0.5B, so it sits low, and every
          prediction that knows the run's size beats it by a wide margin. The numbers below say how
          much the metadata buys over knowing nothing but the range, not how close a prediction
          comes to the run.
        - **Zero-shot across sizes.** With other runs of the same size and recipe in the population
          (k-fold), the zero-shot curve beats the population-mean curve by 64.6% in CRPS on the mean
          (67.6% on the median), lower on 22 of 24 runs; with the whole size held out, by 56.7% on
          the mean (62.2% on the median), lower on all 24. Per size (table above) 7B gains the most
          (87.7%); 0.5B gains 34.9%, 3B 64.1%, the single 2B run with a stated range 21.7%. The
          levels' size effect is learnt from few recipes and is tangled with them: every 0.5B run is
          a PPO run on gsm8k, and the model has no covariate that names a recipe.
        - **A family held out: zero-shot is no better than knowing nothing.** With every run of its
          family held out, the zero-shot curve scores as the population-mean curve (-0.2% on the
          mean, lower on 13 of 24 runs), and given the initial reward it is worse on the median run
          (-25.5%). Of the 24 runs on a stated range 23 are Qwen runs: with Qwen held out, the
          population learns where runs on a stated range start and end from one Gemma run, and a Qwen
          run's metadata has nothing to move.
        - **The initial reward helps the small sizes and hurts 7B.** Given the run's first logged
          reward, zero-shot gains 72.4% on the mean over the population-mean curve in k-fold and
          70.9% with the size held out, more than without it at 0.5B (73.6% against 34.9%), 2B (46.2%
          against 21.7%) and 3B (93.1% against 64.1%), less at 7B (58.3% against 87.7%; here 55.8% against 87.8%: the
          plain zero-shot curve's CRPS is 0.056, given the initial reward 0.215). The 7B runs start
          low and jump to the top within a few steps; the population reads a start that low as a
          run that climbs slowly (first figure).
        - **Intervals are off with a size or family held out.** In k-fold the zero-shot 90%
          intervals hold 96.6% of the logged points and the 50% intervals 45.4%. With the size held
          out they hold 85.3% and 26.3%, with the family held out 92.0% and 30.3%: wide and off
          centre; given the initial reward they are sharper and hold only 63.8% (size out) and
          73.0% (family out) at 90%. On the 7B runs above the zero-shot band holds 99.6% at 90% but
          14.0% at 50%: wide bands centred below the runs' fast rise. Live updates from a
          population that never saw the size hold 86.1% and 81.8% of the later points in their 90%
          intervals after 5% and 10% of the steps (83.2% after 10% in k-fold).
        - **Only runs with a stated reward range get a zero-shot prediction, and only they teach the
          population about levels** (the verl runs, 24 of 60; the size table at the top counts
          them). The notebook runs report rewards on their own scales, which the population cannot
          know: they inform the timing, not how size, family or task move where a run starts and
          ends. With only Qwen and Gemma on a stated range, the levels get no family effect at all.
        - **A few logged points fix most of it.** After 10% of the steps the live update beats the
          population-mean curve by 82.6% on the mean in k-fold and 73.7% with the size held out,
          lower on 23 of 24 runs in both (with the family held out: 48.5%, 15 of 24). Against the
          prefix fitted alone it wins on the mean at every size but 2B (-26.4%, 0 of 2 runs), at
          0.5B by 24.2% (8 of 10 runs). On the 7B runs here it beats the fit alone by 12.3% on the
          mean after 5% (lower on 6 of 13 runs) and by 23.5% after 10% (11 of 13; committed: 24.1%,
          12 of 13); after 5% the fit alone is still as good on the median run (-3.6%) and better
          on the final reward (-53.3%). The population is most useful as a prior for a run that has
          started; as an oracle for one that has not, it is as good as the runs behind it are close
          to the new one.

        ## What the population says about model size

        `plot_scaling` draws each run's posterior of a parameter against its model size, with the
        population's curve for the average family and task. `r1` is the level the run reaches by its
        planned end, on the normalised [0, 1] reward scale; only the runs on a stated reward range
        are drawn, as only they inform the levels. Left: the population shipped with bayesgrpo (all
        60 runs); right: the population above, which never saw a 7B run (the dashed line marks 7B).
    """),
    ("code", """
        shipped = bundled_population()
        fig, axes = plt.subplots(1, 2, figsize=(13, 3.8))
        plot_scaling(shipped, param="r1", ax=axes[0])
        plot_scaling(population, param="r1", ax=axes[1])
        axes[1].axvline(SIZE, color="0.3", linestyle="--", linewidth=1)
        for ax in axes:
            ax.set_ylim(0.0, 1.05)  # r1 lives on the normalised [0, 1] scale: every run in view
        axes[0].set_title("all 60 runs (shipped population)\\n" + axes[0].get_title(), fontsize=8)
        axes[1].set_title(f"without the {SIZE:g}B runs\\n" + axes[1].get_title(), fontsize=8)
        fig.tight_layout()
    """),
    ("code", """
        scaling = {"all runs": scaling_table(shipped, "r1"), f"without {SIZE:g}B": scaling_table(population, "r1")}
        display(pd.concat({name: s.slopes.set_index("name") for name, s in scaling.items()}, names=["population"]))
        line = scaling[f"without {SIZE:g}B"].line
        at = {c: float(np.interp(np.log(SIZE), np.log(line["size_b"]), line[c])) for c in ("median", "lower", "upper")}
        shown_runs = scaling["all runs"].runs.set_index("run_id")  # runs on a stated reward range
        truth = shown_runs.loc[[r for r in held if r in shown_runs.index], "median"]
        print(f"the population without {SIZE:g}B puts the average run's r1 at {SIZE:g}B at {at['median']:.2f} "
              f"(90% {at['lower']:.2f} to {at['upper']:.2f}); the {len(truth)} {SIZE:g}B runs on a stated range, their own "
              f"r1 (shipped population): median {truth.median():.2f}, from {truth.min():.2f} to {truth.max():.2f}")
    """),
    ("md", """
        How to read it. With all runs, the size slope of `r1` (on the model's logit scale) is
        clearly positive: 1.341, 90% from 0.997 to 1.692. Without the 7B runs its interval straddles
        zero (-0.710 to 0.837): the runs from 0.5B to 3B do not pin down how the level a run reaches
        depends on size. The curve still climbs, through the start: the size slope of `r0` is steep
        (2.512) and a run's level follows its start, so the average run at 7B is put at 0.95 (90%
        0.89 to 0.98), just below the 7B runs' own median of 0.98 (printout): that is why zero-shot
        does well on 7B. Two things limit what this says. The sizes are tangled with recipes: the
        runs drawn come from a few recipes (every 0.5B run is a Qwen PPO run on gsm8k; the 3B and 7B
        runs are Qwen runs that reach the top of the scale), and no covariate tells the model which
        runs share a recipe, so part of the size curve may be a recipe effect. And beyond the
        largest size drawn (7B on the left, 3B on the right) the curve is extrapolation: the 8B and
        20B runs state no range and have no say in it. The grey band is the uncertainty of the
        *average* run's level, not the spread of runs: one new run of a given size is far less
        predictable than the band suggests, which is what the interval widths and scores above
        measure.
    """),
]

if __name__ == "__main__":
    main(CELLS, "04_cross_model_transfer.ipynb")
