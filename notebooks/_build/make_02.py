"""Write notebooks/02_pooling_ladder.ipynb without outputs.

The committed file is this notebook executed with full settings (BAYESGRPO_NOTEBOOK_FAST unset), e.g.
``python notebooks/_build/make_02.py`` then ``python -m jupyter nbconvert --execute --inplace`` or nbclient.
"""

import nbformat as nbf

nb = nbf.v4.new_notebook()
md = nbf.v4.new_markdown_cell
code = nbf.v4.new_code_cell
nb.cells = [
    md("# The pooling ladder: none, partial, complete\n\n"
       "Does borrowing strength across runs help? Each bundled run is cut at 25% of its steps; the model (default curve "
       "family, `two_timescale`) is fitted three ways on the cut runs and scored (CRPS, 90% coverage) on the 75% it did not see:\n\n"
       "- **none**: every run alone, under the population priors;\n"
       "- **partial**: runs pooled around family means with size and start-level slopes (the default);\n"
       "- **complete**: one curve for all runs.\n\n"
       "Set `BAYESGRPO_NOTEBOOK_FAST=1` for a quick run with few draws (CI does)."),
    code("import os\n\nimport numpy as np\nimport pandas as pd\n\nimport bayesgrpo\nfrom bayesgrpo.interfaces.cli import cut_table\n"
         "from bayesgrpo.evaluate.scores import crps_from_draws, interval_coverage\n\n"
         "FAST = os.environ.get(\"BAYESGRPO_NOTEBOOK_FAST\") == \"1\"\nDRAWS = 60 if FAST else 500\n\n"
         "table = bayesgrpo.load_bundled(warn=False)\nsummary = table.summary().set_index(\"run_id\")\n"
         "cut = cut_table(table, 0.25)\n"
         "horizon = summary[\"last_step\"].astype(float).to_dict()\n"
         "cut_step = cut.points.groupby(\"run_id\")[\"step\"].max()"),
    code("models = {}\nfor pooling in (\"none\", \"partial\", \"complete\"):\n"
         "    models[pooling] = bayesgrpo.RewardModel(pooling=pooling).fit(\n"
         "        cut, horizon=horizon, draws=DRAWS, tune=DRAWS, random_seed=1, progressbar=False\n    )\n"
         "pd.DataFrame({p: {k: m.fit_summary()[k] for k in (\"seconds\", \"max_r_hat\", \"min_ess_bulk\", \"divergences\")} for p, m in models.items()})"),
    md("Score every held-out point of every run, in units of the run's reward range, with draws of a logged "
       "reward (curve plus noise)."),
    code("rows = []\nfor pooling, model in models.items():\n"
         "    for run_id in table.run_ids:\n"
         "        points = table.points[(table.points[\"run_id\"] == run_id) & (table.points[\"step\"] > cut_step[run_id])].dropna(subset=[\"reward\"])\n"
         "        if points.empty:\n            continue\n"
         "        draws = model.forecast(points[\"step\"].to_numpy(), runs=[run_id], include_noise=True, random_seed=0).draws\n"
         "        sample = draws.sel(run=run_id).to_numpy()\n"
         "        y = points[\"reward\"].to_numpy()\n"
         "        scale = float(table.points.loc[table.points[\"run_id\"] == run_id, \"reward\"].agg(lambda r: r.max() - r.min())) or 1.0\n"
         "        rows.append({\"pooling\": pooling, \"run_id\": run_id,\n"
         "                     \"crps\": float(crps_from_draws(sample, y, scale=scale).mean()),\n"
         "                     \"cover90\": float(interval_coverage(sample, y, 0.9).mean())})\n"
         "scores = pd.DataFrame(rows)\n"
         "scores.groupby(\"pooling\")[[\"crps\", \"cover90\"]].agg([\"median\", \"mean\"]).round(3)"),
    code("wide = scores.pivot(index=\"run_id\", columns=\"pooling\", values=\"crps\")\n"
         "print(f\"partial beats none on {(wide['partial'] < wide['none']).sum()} of {len(wide)} runs, \"\n"
         "      f\"complete on {(wide['partial'] < wide['complete']).sum()} of {len(wide)}\")"),
    md("How to read it: partial pooling lets a run's own points decide what they can and the population "
       "fill in the rest; no pooling has only the priors to extrapolate from; complete pooling ignores what makes "
       "runs differ. On the bundled runs complete pooling is clearly worst (median CRPS 0.216, against 0.128 "
       "partial and 0.122 none). Partial and no pooling are close at this cut: no pooling is a little better on "
       "the median, the means are within 0.001 (0.138 none, 0.139 partial), and partial wins on 36 of the 60 runs. Most runs' first quarter "
       "already pins their curve down (the simulated short runs of `tests/model/test_recovery.py`, seen for 15% "
       "of their horizon, show the gap pooling makes when a run has little data). Two cautions in the tables "
       "above: the partial fit has not fully converged at these settings (max r_hat 1.03, min bulk ESS 34), and "
       "neither it nor no pooling reaches 90% coverage on the held-out points (0.82 on the mean for both, 0.95-0.96 "
       "on the median run); complete pooling's 0.95 comes with the worst CRPS: wide intervals, not good "
       "forecasts. `benchmarks/results/backtest_forecast.md` compares the partial model with the published "
       "baselines."),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbf.write(nb, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "02_pooling_ladder.ipynb"))
