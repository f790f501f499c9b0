"""Write notebooks/05_from_your_logs.ipynb.

    python notebooks/_build/make_05.py --execute          # run with full settings: the committed file (about a minute)
    python notebooks/_build/make_05.py --execute --fast   # try it with BAYESGRPO_NOTEBOOK_FAST=1 (do not commit)
    python notebooks/_build/make_05.py                    # the notebook without outputs
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _nb import main

CELLS = [
    ("md", """
        # From your logs: TensorBoard, verl, TRL, W&B and notebook tables in; answers out

        Your reward curves sit wherever your training stack writes them: TensorBoard event files,
        verl's console or its file logger, a `trainer_state.json`, the console of a TRL trainer, a
        W&B panel export, the progress table of a Colab notebook. `bayesgrpo.load_runs` reads all of
        them into one table and says, record by record, what it kept, repaired and dropped. From
        that table the same questions get the same answers, whatever wrote the logs: where will
        each run end, should it stop now, is something wrong with it.

        To have real logs in every format, this notebook takes seven of the real runs bundled with
        bayesgrpo and writes each out as its stack would (`bayesgrpo.logs.writers`), into a temporary
        folder. Point the same calls at your own folder.

        Set `BAYESGRPO_NOTEBOOK_FAST=1` for a quick run (CI does); the committed outputs come from
        full settings. Only the HTML report's history figures and the number of seeds compared in
        section 4 differ between the two.
    """),
    ("code", """
        import json
        import os
        import re
        import tempfile
        import time
        import warnings
        from pathlib import Path

        import matplotlib.pyplot as plt
        import numpy as np
        import pandas as pd
        import yaml

        import bayesgrpo
        from bayesgrpo.interfaces.cli import main as bayesgrpo_cli
        from bayesgrpo.model.datasets import bundled_population
        from bayesgrpo.questions.diagnostics import diagnose
        from bayesgrpo.interfaces.html_report import write_report
        from bayesgrpo.questions.live import LiveForecaster
        from bayesgrpo.model.laplace import LiveUpdateWarning
        from bayesgrpo.interfaces.plotting import plot_fan
        from bayesgrpo.logs.readers import detect_format
        from bayesgrpo.questions.stopping import default_rule
        from bayesgrpo.logs.writers.notebook import write_notebook
        from bayesgrpo.logs.writers.tensorboard import write_tensorboard
        from bayesgrpo.logs.writers.trl import write_trainer_state, write_trl_console
        from bayesgrpo.logs.writers.verl import CANONICAL_TO_VERL, write_verl_console, write_verl_jsonl
        from bayesgrpo.logs.writers.wandb import write_wandb_csv

        FAST = os.environ.get("BAYESGRPO_NOTEBOOK_FAST") == "1"
        HISTORY_POINTS = 3 if FAST else 8  # cuts of each run's stop-probability history in the HTML report
        SEEDS = range(1, 4) if FAST else range(1, 11)  # seeds of the live update compared in section 4
        plt.rcParams.update({"figure.dpi": 72, "font.size": 8})
        pd.set_option("display.precision", 3)
        pd.set_option("display.max_colwidth", 120)

        bundled = bayesgrpo.load_bundled(warn=False)
        RUNS = {  # the name your run would have -> (bundled run, the stack that wrote it)
            "qwen2-7b-grpo": ("verl_asyncRA_gsm8k_qwen2_7b_base", "TensorBoard (verl)"),
            "gemma2-2b-ppo": ("verldata_ppo_gemma-2-2b-it-ppo-bsz512_4-prompt1024-resp-512-0.640", "verl console"),
            "qwen2-7b-gpg": ("verl_gpg_qwen2-7b_math", "verl file logger (JSONL)"),
            "mistral-7b-grpo": ("nb_unslothai_notebooks_HuggingFace_Course_Mistral_v0_3_7B_GRPO_c1a161c_n250",
                                "TRL trainer_state.json"),
            "phi4-grpo": ("nb_unslothai_notebooks_Kaggle_Phi_4_GRPO_a29c3e1_n100", "TRL console"),
            "llama31-8b-grpo": ("nb_unslothai_notebooks_Llama3_1_8B_GRPO_91f52fa_n250", "W&B panel export (CSV)"),
            "gemma4-e2b-sudoku": ("nb_unslothai_notebooks_Gemma4_E2B_Reinforcement_Learning_Sudoku_Game_d5e51b2_n60",
                                  "notebook progress table"),
        }
        WORK = Path(tempfile.mkdtemp(prefix="bayesgrpo_05_"))
        pd.DataFrame([(name, stack, bundled_id) for name, (bundled_id, stack) in RUNS.items()],
                     columns=["run", "written as", "bundled run"]).set_index("run")
    """),
    ("md", """
        ## 1. Logs as your stack writes them

        | written as | where it comes from |
        |---|---|
        | TensorBoard | verl `trainer.logger=['tensorboard']`, transformers `report_to="tensorboard"`: `events.out.tfevents.*` files, one folder per run |
        | verl console | verl `trainer.logger=['console']`: what the terminal shows (Ray prefix, the resolved config, one `step:N - name:value - ...` line per step), saved with `... 2>&1 \\| tee train.log` |
        | verl file logger | verl `trainer.logger=['file']`: one `{"step": N, "data": {...}}` line per step in `$VERL_FILE_LOGGER_PATH` (default `<project>/<experiment>.jsonl`) |
        | TRL `trainer_state.json` | every transformers/TRL trainer, in each `checkpoint-N/` and the output folder |
        | TRL console | the dicts a TRL trainer prints, `{'loss': ..., 'reward': ...}`, between progress bars |
        | W&B panel export | "Export panel data" (CSV) of a line plot on wandb.ai |
        | notebook | a saved `.ipynb` whose training cell shows the transformers progress table (Colab, Kaggle, Unsloth) |

        `write_logs` writes every run in its format; the same function writes the runs in progress of
        section 4, cut at 60% of their steps.
    """),
    ("code", """
        def points_of(name: str, fraction: float = 1.0) -> pd.DataFrame:
            \"\"\"The bundled run's logged metrics (canonical names, e.g. ``reward``, ``kl``), up to a share of its steps.\"\"\"
            points = bundled.run(RUNS[name][0]).drop(columns=["run_id"]).dropna(axis=1, how="all")
            return points[points["step"] <= fraction * points["step"].max()]


        VERL_CONFIG = {  # the part of the resolved config verl prints that bayesgrpo reads (as the original log states it)
            "actor_rollout_ref": {"model": {"path": "google/gemma-2-2b-it"}},
            "algorithm": {"adv_estimator": "gae"},
            "data": {"train_batch_size": 512},
        }


        def write_logs(folder: Path, fraction: float = 1.0) -> dict[str, Path]:
            \"\"\"Each run written as its stack writes it, into ``folder``.\"\"\"
            (folder / "mistral-7b-grpo").mkdir(parents=True, exist_ok=True)  # a trainer's output folder
            p = {name: points_of(name, fraction) for name in RUNS}
            return {
                # verl logs its own metric names (critic/score/mean...); the writers map canonical names to them
                "qwen2-7b-grpo": write_tensorboard(folder / "qwen2-7b-grpo", p["qwen2-7b-grpo"].rename(columns=CANONICAL_TO_VERL)),
                "gemma2-2b-ppo": write_verl_console(folder / "gemma2-2b-ppo.log", p["gemma2-2b-ppo"], config=VERL_CONFIG,
                                                    total_training_steps=210),
                "qwen2-7b-gpg": write_verl_jsonl(folder / "qwen2-7b-gpg.jsonl", p["qwen2-7b-gpg"]),
                "mistral-7b-grpo": write_trainer_state(folder / "mistral-7b-grpo" / "trainer_state.json",
                                                       p["mistral-7b-grpo"], max_steps=250),
                "phi4-grpo": write_trl_console(folder / "phi4-grpo.log", p["phi4-grpo"], max_steps=100, progress=True),
                "llama31-8b-grpo": write_wandb_csv(folder / "llama31-8b-grpo.csv", {"llama31-8b-grpo": p["llama31-8b-grpo"].rename(
                    columns={c: f"train/{c}" for c in p["llama31-8b-grpo"].columns if c != "step"})}),
                "gemma4-e2b-sudoku": write_notebook(folder / "gemma4-e2b-sudoku.ipynb", p["gemma4-e2b-sudoku"], banner=None),
            }


        LOGS = WORK / "logs"
        files = write_logs(LOGS)
        rows = []
        for name, path in files.items():
            file = next(path.iterdir()) if path.is_dir() else path  # a TensorBoard run is a folder
            rows.append({"run": name, "file": file.relative_to(WORK).as_posix(), "detected format": detect_format(file),
                         "kB": file.stat().st_size / 1024})
        pd.DataFrame(rows).set_index("run")
    """),
    ("md", """
        What three of them look like (first lines, cut at 150 characters):
    """),
    ("code", """
        def first_line(path: Path, starts: str) -> str:
            with open(path, encoding="utf-8", newline="") as handle:  # newline="": keep carriage returns as written
                line = next(line for line in handle.read().split("\\n") if starts in line)
            return line if len(line) <= 150 else line[:147] + "..."


        print(first_line(files["qwen2-7b-gpg"], '"critic/score/mean"'))
        print(repr(first_line(files["gemma2-2b-ppo"], "step:")))  # repr: Ray's colour codes are part of the line
        print(repr(first_line(files["phi4-grpo"], "{'reward'")))  # repr: tqdm's progress bar redraws too
    """),
    ("md", """
        ## 2. Read them back, with what you know about the runs

        One call reads the folder; each file's format is detected from its name and first bytes.
        Logs state some metadata themselves (verl's printed config: model, group size, batch; a
        trainer state: `max_steps`), and you state the rest in a dict keyed by run name (or a CSV or
        YAML file): the model family and size in billions of parameters place a run in the
        population, the task too where you know it, and the reward range where you know it. verl's
        GSM8K reward is 0 or 1, so its range is [0, 1]; the notebook runs sum several reward
        functions and their range is left out, so bayesgrpo takes the observed range, widened, and
        the population gives such runs their own level and noise means (where a run sits on its own
        range says little about how good it is). Here `total_steps` (the horizon of every forecast)
        is where each run actually ended, so that section 4 can check its forecasts; the Gemma-2 log
        plans 210 steps but its run stopped at 105.
        What you state wins over what a log states, and each override is noted in the read report.
    """),
    ("code", """
        manifest = bundled.runs.set_index("run_id")
        META = {}
        for name, (bundled_id, _) in RUNS.items():
            row = manifest.loc[bundled_id]
            meta = {"family": row["family"], "size_b": float(row["size_b"]), "total_steps": int(points_of(name)["step"].max())}
            if pd.notna(row["task"]):
                meta["task"] = row["task"]
            if pd.notna(row["reward_min"]):  # stated by the manifest for the verl runs only
                meta["reward_min"], meta["reward_max"] = float(row["reward_min"]), float(row["reward_max"])
            META[name] = meta

        table = bayesgrpo.load_runs(LOGS, metadata=META)
        stated = bayesgrpo.load_runs(files["gemma2-2b-ppo"], warn=False).runs.loc[0, "total_steps"]
        print(f"total_steps the gemma2-2b-ppo log states: {stated:g}; stated here: {META['gemma2-2b-ppo']['total_steps']}")
        summary = table.summary().set_index("run_id")[["n_points", "first_step", "last_step", "n_metrics"]]
        runs = table.runs.set_index("run_id")[["format", "reward_key", "family", "size_b", "task", "reward_min", "reward_max",
                                               "total_steps", "model"]]
        summary.join(runs).loc[list(RUNS)]
    """),
    ("code", """
        def issues_frame(report) -> pd.DataFrame:
            \"\"\"A read report's issues and notes, one row each, files named relative to the work folder.\"\"\"
            def where(source: str) -> str:
                return Path(source).relative_to(WORK).as_posix() if source.startswith(str(WORK)) else source

            return pd.DataFrame([{"source": where(i.source), "kind": i.kind, "action": i.action, "count": i.count,
                                  "where": ", ".join(i.locations[:3]), "detail": i.detail} for i in report.issues])


        print(table.report.summary().replace(str(WORK) + "/", ""))
        issues_frame(table.report)
    """),
    ("md", """
        Nothing was dropped or repaired: the rows above are notes (`info`). The metadata override
        is gemma2-2b-ppo's horizon, 105 stated where its log planned 210. Each run's rewards read
        back are the bundled run's, step for step:
    """),
    ("code", """
        check = []
        for name, (bundled_id, _) in RUNS.items():
            written = points_of(name).set_index("step")["reward"].dropna()
            read = table.run(name).set_index("step")["reward"].dropna()
            check.append({"run": name, "reward points written": len(written), "read": len(read),
                          "max |difference|": float((read.reindex(written.index) - written).abs().max())})
        pd.DataFrame(check).set_index("run")
    """),
    ("md", """
        ## 3. Damaged logs: what is kept, repaired and dropped

        Real logs are rarely clean. Three damaged copies:

        - the verl file logger's JSONL **cut mid-record**, as when the run is still writing or the disk
          filled up;
        - the verl console log of a **resumed run**: it crashed after step 60, restarted from its
          step-50 checkpoint and printed steps 51 to 60 again (with the config and a traceback in
          between);
        - a `trainer_state.json` with **text where a number belongs**: one reward written `"nan%"`,
          another `"1.25"`.

        `load_runs` keeps every record it can, repairs what it can say how it repaired, drops the
        rest, and reports each with where and why. (It also emits one `ReadWarning` summarising the
        changes; `warn=False` leaves only the report, and `strict=True` raises at the first record
        it would change.)
    """),
    ("code", """
        DAMAGED = WORK / "damaged"
        (DAMAGED / "mistral-7b-grpo").mkdir(parents=True)

        text = files["qwen2-7b-gpg"].read_text()  # 1. cut inside the last record's reward
        (DAMAGED / "qwen2-7b-gpg.jsonl").write_text(text[: text.rindex('"critic/score/mean"') + 25])

        gemma = points_of("gemma2-2b-ppo")  # 2. steps 51-60 printed twice
        with open(DAMAGED / "gemma2-2b-ppo.log", "w", encoding="utf-8") as handle:
            write_verl_console(handle, gemma[gemma["step"] <= 60], config=VERL_CONFIG, total_training_steps=210)
            handle.write("Traceback (most recent call last):\\nRuntimeError: NCCL communicator was aborted\\n")
            write_verl_console(handle, gemma[gemma["step"] > 50], config=VERL_CONFIG, total_training_steps=210)

        state = json.loads(files["mistral-7b-grpo"].read_text())  # 3. text in a number's place
        state["log_history"][99]["reward"] = "nan%"
        state["log_history"][149]["reward"] = "1.25"
        (DAMAGED / "mistral-7b-grpo" / "trainer_state.json").write_text(json.dumps(state, indent=2, sort_keys=True))

        damaged = bayesgrpo.load_runs(DAMAGED, metadata={name: META[name] for name in ("qwen2-7b-gpg", "gemma2-2b-ppo", "mistral-7b-grpo")},
                                      warn=False)
        issues_frame(damaged.report)
    """),
    ("code", """
        accounts = pd.DataFrame([{"source": Path(a.source).relative_to(WORK).as_posix(), "records read": a.records_read,
                                  "kept": a.records_kept, "dropped": a.records_dropped, "read = kept + dropped": a.balanced}
                                 for a in damaged.report.sources]).set_index("source")
        resumed = damaged.run("gemma2-2b-ppo").set_index("step")["reward"]
        print(f"resumed run: {len(resumed)} steps, {resumed.index.min()} to {resumed.index.max()}, each once")
        accounts
    """),
    ("md", """
        Read the two tables together. The cut JSONL line is dropped and reported as `truncated`; every
        complete line before it is kept. Of the resumed run's steps 51 to 60, the records printed
        before the crash are dropped as `duplicate_step` and the later ones kept (the latest record of
        a step wins, as it reflects the run that went on). The reward written `"1.25"` is converted
        (`string_number`), the one written `"nan%"` becomes missing (`non_numeric`) and its step keeps
        its other metrics (`no_reward`). In every file, records read = kept + dropped.

        ## 4. Runs in progress: where will each end, and should it stop?

        Now the same seven runs as if they were training right now: each is written again, cut at
        60% of its steps, into `live/`, and read with the same metadata. For each run the population
        shipped with bayesgrpo (`bundled_population()`, fitted on the 60 bundled runs) is conditioned
        on the points logged so far (`LiveForecaster.update`, no refit: tens of milliseconds), and
        `default_rule()` answers. It is the rule `bayesgrpo stop`, `bayesgrpo watch`, the TRL callback
        and the verl hook decide with unless told otherwise, `FixedBudgetRule(0.65)`: stop at 65% of
        the planned steps. Beside its decision it reports what the posterior says, as information:
        `P(gain < 1%)` of the reward range before the horizon (*P(gain < eps)* below) and the
        expected remaining gain with its interval. At 60% of their steps all seven runs are before
        the budget, so each answer here is continue, and the probability beside it is what to read.
        The default is a fixed budget because on runs of sources the package never saw no rule that
        decides by the posterior beat one (`benchmarks/results/defaults.md`); how the rules compare:
        `03_when_to_stop.ipynb`.

        **A caveat on honesty.** These seven are bundled runs, so the shipped population saw their
        *whole* curves when it was fitted; a run of yours is new to it. The forecasts below are
        therefore somewhat optimistic. Measured from populations that never saw the run (leave one
        source out), forecasts and stop decisions are in `03_when_to_stop.ipynb` and
        `benchmarks/results/`.
    """),
    ("code", """
        LIVE = WORK / "live"
        CUT = 0.6  # the share of each run's steps logged so far
        write_logs(LIVE, fraction=CUT)
        live_table = bayesgrpo.load_runs(LIVE, metadata=META, warn=False)

        population = bundled_population()
        live = LiveForecaster(population, random_seed=1)  # as `bayesgrpo stop` and `watch` (seed 1)
        rule = default_rule()
        print(rule)
        updates, decisions, rows, seconds = {}, {}, [], []
        for name in RUNS:
            horizon = float(META[name]["total_steps"])
            start = time.perf_counter()
            with warnings.catch_warnings():  # a Pareto k above 0.7 warns: the table shows the path taken instead
                warnings.simplefilter("ignore", LiveUpdateWarning)
                update = updates[name] = live.update(live_table.select([name]), horizon=horizon)
            seconds.append(time.perf_counter() - start)
            decision = decisions[name] = rule.decide(update.curve_draws, update.step, horizon)[0]
            low, median, high = update.final_interval(0.9, band="curve")  # the expected reward at the horizon
            logged_low, _, logged_high = update.final_interval(0.9)  # one logged reward there (the default band)
            logged = live_table.run(name)["reward"].dropna()
            later = table.run(name)["reward"].dropna()  # what the run logged in the end
            actual_end = later.iloc[-max(5, len(later) // 10):].mean()  # mean of its last 10% of points
            now = logged.iloc[-10:].mean()  # mean of the last 10 points so far, as `watch` shows it
            range_low, range_high, range_how = update.reward_range
            rows.append({"run": name, "step": update.step, "horizon": horizon, "reward now": now,
                         "end (curve)": median, "5%": low, "95%": high, "actual end": actual_end,
                         "in 90%": bool(low <= actual_end <= high),
                         "logged reward at the end, 90%": f"[{logged_low:.3g}, {logged_high:.3g}]",
                         "eps (1%)": rule.eps * (range_high - range_low), "range": range_how,
                         "P(gain < eps)": decision.probability, "decision": decision.decision,
                         "actual gain": actual_end - now, "path": update.method})
        forecasts = pd.DataFrame(rows).set_index("run").round({"P(gain < eps)": 3})
        print(f"population fitted on {population.fit_summary()['n_runs']} runs; {live.n_draws} draws per update, "
              f"median {1000 * np.median(seconds):.0f} ms per update")
        print(f"{forecasts['in 90%'].sum()} of {len(forecasts)} actual ends inside the curve's 90% interval; "
              f"decisions: {forecasts['decision'].value_counts().to_dict()}")
        forecasts
    """),
    ("md", """
        *reward now* is the mean of the last 10 logged rewards at the cut, *actual end* the mean of
        the last 10% of the points the run logged in the end, *actual gain* their difference.

        A live update gives **two bands**, and says which one it shows. The *curve* band
        (`band="curve"`) is where the expected reward will be: what the stop rules' probabilities are
        about, and what the mean of many logged points, like *actual end*, should fall in (*end
        (curve)* with its 5% and 95% quantiles). The *predictive* band (`band="predictive"`, the
        default of `LiveUpdate.quantiles`, `final_interval` and the fan charts) is where one logged
        reward will be, the run's noise included: *logged reward at the end, 90%*. On a noisy run the
        second is far wider than the first. *eps (1%)* is the gain whose probability the default
        reports, 1% of the reward range; *range* says whether that range was stated for the run or estimated from its logged points
        (`LiveUpdate.range_note()` says how). *path* is how the update drew its answer: `importance`
        sampling, or `ensemble_mcmc` where the importance weights could not be trusted.
    """),
    ("code", """
        for name in RUNS:
            print(f"{name}: {decisions[name].decision.upper()}: {decisions[name].reason}")
    """),
    ("code", """
        fig, axes = plt.subplots(2, 4, figsize=(12, 5.6))
        for ax, name in zip(axes.flat, RUNS):
            row = forecasts.loc[name]
            plot_fan(updates[name].curve_draws, observed=table, step_now=row["step"], ax=ax,
                     title=f"{name}\\n{RUNS[name][1]}: {row['decision']} at step {row['step']:.0f}")
        axes.flat[-1].axis("off")
        axes.flat[0].legend(fontsize=6, loc="lower right")
        fig.tight_layout()
    """),
    ("md", """
        The fan charts show the predictive band (their legend names it); the dots after the dotted
        line are what each run logged after the cut, which the forecast did not see.

        All seven actual ends fall inside the curve's 90% interval. The default says continue to all
        seven; the posterior beside it says how much each run still has to give, and here it was
        borne out. Where it was sure of a plateau the run gained less than its eps: qwen2-7b-grpo
        (P(gain < eps) = 1.00) gained 0.005 (its eps 0.010), gemma4-e2b-sudoku (0.96) fell by 1.313
        (section 5 says why), phi4-grpo (0.83) gained 0.033 (eps 0.044). Where it expected a gain
        the run made one: gemma2-2b-ppo (0.00; an expected gain to step 105 of 0.034, 90%: 0.011 to
        0.054) gained 0.024, qwen2-7b-gpg (0.16) 0.033. In between, llama31-8b-grpo (0.31) gained
        -0.009, and mistral-7b-grpo (0.66) 0.085 against an eps of 0.032, within what its noise
        moves a mean of ten points (one logged reward at its end: anywhere from -0.132 to 0.631).

        On a run without a stated range, eps is 1% of a range estimated from its logged points, and
        on the noisiest runs that is a large step: 0.558 reward units on the Sudoku run, whose whole
        range is estimated at -9.85 to 46. Where you know the range your reward lives in, state it
        (`reward_min`/`reward_max` in the metadata, or `--reward-range` on the command line); the
        range note under each answer of `bayesgrpo stop` (section 7) says which range was used.
    """),
    ("md", """
        How sure is sure? The live update draws its answer by importance sampling, so a probability
        carries Monte Carlo noise. The default's decision does not depend on it, but a reader of the
        probability, or a rule that decides by it, should know how far it moves. The same updates
        with other seeds (*seeds at P >= 0.9*: how many put the run at 0.9 or above, a sure plateau
        to `PlateauRule(0.01, 0.9)`):
    """),
    ("code", """
        def p_gain_below(seed: int) -> dict[str, float]:
            \"\"\"Each run's P(gain < eps), the probability the default rule reports, from an update drawn with ``seed``.\"\"\"
            forecaster = LiveForecaster(population, random_seed=seed)
            out = {}
            for name in RUNS:
                horizon = float(META[name]["total_steps"])
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", LiveUpdateWarning)
                    update = forecaster.update(live_table.select([name]), horizon=horizon)
                out[name] = rule.decide(update.curve_draws, update.step, horizon)[0].probability
            return out


        spread = pd.DataFrame({seed: p_gain_below(seed) for seed in SEEDS}).round(3)
        pd.DataFrame({"P(gain < eps), seed 1": spread[1], "min over seeds": spread.min(axis=1),
                      "max over seeds": spread.max(axis=1), "seeds at P >= 0.9": (spread >= 0.9).sum(axis=1),
                      "seeds": spread.shape[1]})
    """),
    ("md", """
        Over ten seeds the probabilities move by up to 0.22 (phi4-grpo, 0.758 to 0.980), and
        phi4-grpo is the only run that crosses 0.9 at some seeds and not at others (4 of 10). A
        probability that near a threshold is a close call, not a verdict: look at the fan chart, or
        ask again after a few more logged points (`bayesgrpo watch`, the TRL callback and the verl
        hook ask at every check).
    """),
    ("md", """
        ## 5. Diagnostics: is something wrong with a run?

        `diagnose(table)` looks at the signals beyond the reward curve that the logs hold (reward
        spread within groups, entropy, completion length, validation reward) and reports each
        failure mode it finds with its evidence and what to do. On the seven runs read back in
        section 2:
    """),
    ("code", """
        findings = diagnose(table)
        findings[["run_id", "name", "severity", "first_step", "last_step", "action"]]
    """),
    ("code", """
        collapse = findings[(findings["run_id"] == "gemma4-e2b-sudoku") & (findings["name"] == "collapse")].iloc[0]
        evidence = collapse["evidence"]
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in evidence.items()})

        sudoku = table.run("gemma4-e2b-sudoku")
        fig, (ax_r, ax_s) = plt.subplots(1, 2, figsize=(9, 2.6))
        ax_r.plot(sudoku["step"], sudoku["reward"], ".-", color="0.3", markersize=3, linewidth=0.6)
        ax_r.axvline(evidence["peak_step"], color="C2", linestyle=":", label=f"smoothed peak {evidence['peak']:g} (step {evidence['peak_step']:g})")
        ax_r.axhline(evidence["threshold"], color="C3", linestyle="--", label=f"collapse threshold {evidence['threshold']:g}")
        ax_r.set(xlabel="step", ylabel="reward", title="gemma4-e2b-sudoku: reward")
        ax_r.legend(fontsize=6, loc="upper right")
        ax_s.plot(sudoku["step"], sudoku["reward_std"], ".-", color="C0", markersize=3, linewidth=0.6)
        ax_s.set(xlabel="step", ylabel="reward_std", title="reward spread within a group")
        fig.tight_layout()
    """),
    ("md", """
        The Gemma Sudoku run is flagged high for a collapse: its reward, smoothed by a rolling median,
        peaked at 26 at step 14, and over its last 39 points it sits at 8.4, below the collapse
        threshold of 11.68: a share 0.983 of the way down from the peak to the run's floor of 8.1
        (`lost_fraction`). The advice: restart from the checkpoint before the fall. At its end every
        group gives all its completions the same reward (`advantage_degeneracy`, steps 55 to 60), so
        GRPO has nothing left to learn from.
        qwen2-7b-gpg's entropy collapses (`policy_concentration`, steps 190 to 210) while its
        completion length runs away (`reward_hacking`, from step 106); phi4-grpo is noted as a stall
        (`info`).
    """),
    ("md", """
        The same on the runs in progress of section 4, cut at 60% of their steps:
    """),
    ("code", """
        live_findings = diagnose(live_table)
        live_findings[["run_id", "name", "severity", "first_step", "last_step"]].assign(
            signal=live_findings["evidence"].map(lambda e: e.get("signal")))
    """),
    ("md", """
        At step 36 the Sudoku run is already flagged high for a collapse (from step 23), and at steps
        33 to 36 every group gave all its completions the same reward: a reason to look at the run
        whatever a stop rule says (here the default said continue, with the posterior sure of a
        plateau, P = 0.96). Flags on a run in progress are early
        warnings, not verdicts: phi4-grpo is flagged high for a collapse at steps 27 to 60, yet its
        whole run (the first findings table) raises no collapse, only a stall note, and it gained
        0.033 after the cut.
    """),
    ("md", """
        ## 6. One HTML page to share

        `write_report` puts the runs in progress on one self-contained page (figures inline, no
        server): the read report, each run's forecast and stop decision with its history, the
        steps to 80% of the gain, the pooling, and the diagnostics. With `population=` each run is
        conditioned on it live; without, the pooled model is fitted on the runs (minutes). From the
        terminal: `bayesgrpo report live/ --metadata runs.yaml -o report.html` fits the pooled model,
        and `--population model.nc` conditions the runs on a fitted one instead.
    """),
    ("code", """
        report = write_report(live_table, WORK / "report.html", population=population, rule=rule,
                              history_points=HISTORY_POINTS, title="runs in progress")
        html = report.read_text(encoding="utf-8")
        print(f"{report.name}: {report.stat().st_size / 1024:.0f} kB, {html.count('<img')} figures inline")
        print("sections:", [re.sub("<[^>]+>", "", s) for s in re.findall(r"<h2[^>]*>(.*?)</h2>", html)])
    """),
    ("md", """
        ## 7. From the terminal: `bayesgrpo watch` and `bayesgrpo stop`

        The same answers without Python. The metadata goes in a YAML (or CSV) file keyed by run
        name. `bayesgrpo watch` follows growing logs (files or folders, which may still be empty or
        not exist yet) and redraws a table every `--interval` seconds; `--once` prints one table and
        exits. `bayesgrpo stop` prints each run's decision with its reason. Both use the shipped
        population unless given `--population model.nc`, and `default_rule()` unless told otherwise
        (`--rule plateau --eps 0.01 --prob 0.9` asks the plateau rule; `bayesgrpo stop --help` lists
        the rules). In a shell:

        ```
        bayesgrpo watch live/ --metadata runs.yaml          # Ctrl-C to quit
        bayesgrpo watch --once live/ --metadata runs.yaml
        bayesgrpo stop live/ --metadata runs.yaml
        ```

        Here through `bayesgrpo.interfaces.cli.main`, which takes the same arguments:
    """),
    ("code", """
        (WORK / "runs.yaml").write_text(yaml.safe_dump(META, sort_keys=False))
        assert bayesgrpo_cli(["watch", "--once", str(LIVE), "--metadata", str(WORK / "runs.yaml")]) == 0
    """),
    ("code", """
        with warnings.catch_warnings(record=True) as caught:  # shown below as one line each, without the source path
            warnings.simplefilter("always", LiveUpdateWarning)
            assert bayesgrpo_cli(["stop", str(LIVE), "--metadata", str(WORK / "runs.yaml")]) == 0
        for warning in caught:
            print(f"{warning.category.__name__}: {warning.message}")
    """),
    ("md", """
        The numbers are those of section 4: the same population, seed and rule.
    """),
    ("md", """
        ## Take-away

        - One call, `bayesgrpo.load_runs(folder, metadata=...)`, reads TensorBoard, verl (console
          and file logger), TRL (`trainer_state.json` and console), W&B exports, notebook tables
          and plain CSV/JSONL/Parquet tables, and accounts for every record.
        - State what the logs do not: family, size, task, reward range, planned steps.
        - Then ask: `LiveForecaster(bundled_population()).update(run)` with `default_rule()` (or a
          `PlateauRule` of your eps and probability) in Python, `bayesgrpo stop` / `bayesgrpo watch`
          in a terminal, `write_report` for a page to
          share, `diagnose` for what else is wrong. Read a stop with its reason line and its
          probability, a probability near the threshold as a close call, and a band with its name:
          the curve band for where the expected reward goes, the predictive band (the default) for
          where logged rewards will fall.
    """),
]

if __name__ == "__main__":
    main(CELLS, "05_from_your_logs.ipynb")
