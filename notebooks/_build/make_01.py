"""Write notebooks/01_quickstart.ipynb without outputs.

The committed file is this notebook executed with full settings (BAYESGRPO_NOTEBOOK_FAST unset), e.g.
``python notebooks/_build/make_01.py`` then ``python -m jupyter nbconvert --execute --inplace`` or nbclient.
"""

import nbformat as nbf

nb = nbf.v4.new_notebook()
md = nbf.v4.new_markdown_cell
code = nbf.v4.new_code_cell
nb.cells = [
    md("# Quickstart: read logs, fit, forecast, decide when to stop\n\n"
       "The 60 real GRPO/PPO runs bundled with bayesgrpo (verl TensorBoard files and console logs, "
       "TRL/Unsloth notebook tables) stand in for your own logs; `bayesgrpo.load_runs([...])` reads yours "
       "the same way. Set `BAYESGRPO_NOTEBOOK_FAST=1` to run it with few draws (CI does)."),
    code("import os\n\nimport bayesgrpo\nfrom bayesgrpo.interfaces.plotting import plot_forecast_grid\n\n"
         "FAST = os.environ.get(\"BAYESGRPO_NOTEBOOK_FAST\") == \"1\"\n"
         "DRAWS = 60 if FAST else 500\n\n"
         "table = bayesgrpo.load_bundled()\ntable"),
    md("One row per run: what was read, its family and size, and what the logs state."),
    code("table.summary()[[\"run_id\", \"family\", \"size_b\", \"n_points\", \"first_step\", \"last_step\"]].head(8)"),
    md("## Where will each run end?\n\nFit the pooled model on the first half of every run "
       "(the second half is what we forecast), then read each run's final reward with its 90% interval."),
    code("from bayesgrpo.interfaces.cli import cut_table\n\n"
         "half = cut_table(table, 0.5)\n"
         "horizon = dict(zip(table.summary()[\"run_id\"], table.summary()[\"last_step\"].astype(float)))\n"
         "model = bayesgrpo.RewardModel().fit(half, horizon=horizon, draws=DRAWS, tune=DRAWS, random_seed=1, progressbar=False)\n"
         "{k: v for k, v in model.fit_summary().items() if k in (\"sampler\", \"seconds\", \"max_r_hat\", \"min_ess_bulk\", \"divergences\", \"parametrisation\")}"),
    code("model.final_reward().head(8)"),
    code("runs = [\"verl_asyncRA_q7b_fsdp_base\", \"verl_pr3389_dp_2_gpu_20251111_044742\",\n"
         "        \"nb_unslothai_notebooks_Qwen3_4B_GRPO_bac83a2_n312\", \"nb_unslothai_notebooks_Kaggle_Llama3_1_8B_GRPO_add7e30_n250\"]\n"
         "figure = plot_forecast_grid(model, run_ids=runs, observed=table, ncols=2, panel_size=(5.0, 3.2))"),
    md("The dots after the cut were not seen by the fit.\n\n"
       "Read the fit's warnings before its numbers: the fit warns, once per kind and in plain words "
       "(they are kept in `model.diagnostics.warnings`), when its chains disagree, and names the runs "
       "where they do, worst first. Such a run's first "
       "half does not say where it ends (its level at the horizon can have two modes): its interval is "
       "not to be trusted until more draws or more chains (`fit(..., draws=1000, chains=4)`) agree. The "
       "other runs' forecasts are unaffected."),
    md("## Should I stop now?\n\nAt the cut the default rule answers, the one `bayesgrpo stop`, `watch`, the TRL "
       "callback and the verl hook ask unless told otherwise (`default_rule()`, `FixedBudgetRule(0.65)`): stop at "
       "65% of the planned steps, with the posterior's P(gain < 1%) of the reward range and the expected remaining "
       "gain beside the decision as information (the reason line says both). It is a fixed budget because no "
       "posterior rule beat fixed budgets on runs from sources the package never saw "
       "(`benchmarks/results/defaults.md`). At the cut, half of each run, it says continue to every run; the "
       "probability beside it says which already look flat. `GuardedBudgetRule(0.5)` is a budget the posterior "
       "may move, `PlateauRule(eps, prob)` asks only the plateau question; `expected_gain` and `phase` say why."),
    code("from bayesgrpo.questions.stopping import PlateauRule, decisions_table, default_rule, expected_gain, phase\n\n"
         "draws = model.curve_draws()\n"
         "cut_step = half.points.groupby(\"run_id\")[\"step\"].max().reindex(list(draws.run_ids)).to_numpy(dtype=float)\n"
         "rule = default_rule()\n"
         "print(rule)\n"
         "decisions = decisions_table(rule.decide(draws, cut_step))\n"
         "decisions[[\"run_id\", \"decision\", \"probability\", \"reason\"]].head(8)"),
    code("plateau = decisions_table(PlateauRule(eps=0.01, prob=0.9, relative=True).decide(draws, cut_step))\n"
         "plateau[[\"run_id\", \"decision\", \"probability\", \"reason\"]].head(8)"),
    code("phase(draws, cut_step).head(8)"),
    md("## A run in progress, without refitting\n\nA training loop asks again every few steps. "
       "The live update conditions the run's points so far on the fitted population in milliseconds."),
    code("import time\n\nfrom bayesgrpo.logs.table import RunsTable\n\n"
         "one = table.select([\"verl_pr3389_dp_2_gpu_20251111_044742\"])\n"
         "so_far = one.points[one.points[\"step\"] <= 40].reset_index(drop=True)\n"
         "live = bayesgrpo.LiveForecaster(model, random_seed=0)\n"
         "start = time.perf_counter()\n"
         "update = live.update(RunsTable(points=so_far, runs=one.runs, report=one.report), horizon=116)\n"
         "decision = default_rule().decide(update.curve_draws, update.step)[0]\n"
         "print(f\"{1000 * (time.perf_counter() - start):.0f} ms: {decision.decision} - {decision.reason}\")\n"
         "expected_gain(update.curve_draws, update.step)"),
    md("## Anything wrong with a run?"),
    code("from bayesgrpo.questions.diagnostics import diagnose\n\n"
         "findings = diagnose(table)\n"
         "findings[findings[\"severity\"] == \"high\"][[\"run_id\", \"name\", \"first_step\", \"last_step\", \"action\"]]"),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbf.write(nb, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "01_quickstart.ipynb"))
