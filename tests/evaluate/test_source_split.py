"""The leave-one-source-out split: what a source is, and populations that never saw one."""

from __future__ import annotations

import pytest

from bayesgrpo.evaluate.backtest import leave_one_source_out_populations, source_group, source_groups
from bayesgrpo.logs.table import RunsTable
from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.model.simulate import simulate_runs


@pytest.mark.parametrize(
    ("source", "path", "expected"),
    [
        # one notebook on Kaggle, in the course, in BF16, at another commit, copied to another repository
        (
            "unslothai/notebooks",
            "nb/Kaggle-Llama3.1_(8B)-GRPO.ipynb (cell 15, HTML)",
            "notebook:llama38bgrpo",
        ),
        ("unslothai/notebooks", "nb/Llama3.1_(8B)-GRPO.ipynb (cell 14, HTML)", "notebook:llama38bgrpo"),
        ("someone/copy", "Llama3_1_(8B)_GRPO.ipynb (cell 15)", "notebook:llama38bgrpo"),
        ("someone/else", "Llama3.1_(8B)-GRPO_20250225.ipynb (cell 16)", "notebook:llama38bgrpo"),
        ("unslothai/notebooks", "nb/gpt_oss_(20B)_GRPO_BF16.ipynb (cell 62)", "notebook:gptoss20bgrpo"),
        ("unslothai/notebooks", "nb/gpt-oss-(20B)-GRPO.ipynb (cell 62)", "notebook:gptoss20bgrpo"),
        # another model in the same game is another notebook
        (
            "unslothai/notebooks",
            "nb/Gemma4_(E2B)_Reinforcement_Learning_Sudoku_Game.ipynb",
            "notebook:gemma4e2breinforcementlearningsudokugame",
        ),
        # a verl recipe, a verl notebook, a repository of logs
        (
            "volcengine/verl",
            "recipe/async_reward_agent/assets/tensorboard/q3b/events.out",
            "volcengine/verl:recipe/async_reward_agent",
        ),
        (
            "volcengine/verl",
            "examples/ppo_trainer/verl_getting_started.ipynb (blob 0bb8)",
            "volcengine/verl:verlgettingstarted",
        ),
        ("diqiuzhuanzhuan/verldata", "run_logs/qwen2-7b_math.log", "diqiuzhuanzhuan/verldata"),
    ],
)
def test_a_source_is_a_notebook_a_recipe_or_a_repository(source, path, expected):
    assert source_group({"source": source, "source_path": path}) == expected


def test_a_run_without_a_source_is_its_own():
    assert source_group({"run_id": "mine", "source": None}) == "run:mine"
    assert source_group({"run_id": "mine"}) == "run:mine"


def test_the_bundled_runs_fall_into_their_sources():
    groups = source_groups(load_bundled(warn=False))
    assert sum(len(runs) for runs in groups.values()) == 60
    assert len(groups["volcengine/verl:recipe/async_reward_agent"]) == 11
    assert len(groups["notebook:llama38bgrpo"]) == 4  # unsloth's, its Kaggle edition, two copies
    assert 20 <= len(groups) <= 30


def test_populations_never_saw_a_run_of_the_source_they_score(tmp_path, mocked):
    sim = simulate_runs(n_runs=6, curve="weibull", n_steps=60, random_seed=3)
    sources = ["a", "a", "b", "b", "c", "c"]
    table = RunsTable(
        points=sim.table.points, runs=sim.table.runs.assign(source=sources), report=sim.table.report
    )
    fit = {"draws": 20, "tune": 20}
    populations = leave_one_source_out_populations(table, fit, random_seed=1, cache_dir=tmp_path)
    assert set(populations) == set(table.run_ids)
    assert len({id(m) for m in populations.values()}) == 3
    for run_id, model in populations.items():
        source = sources[table.run_ids.index(run_id)]
        seen = {sources[table.run_ids.index(r)] for r in model.data.run_ids}
        assert source not in seen and len(model.data.run_ids) == 4
    # a second call loads what the first saved: same posteriors, no refit
    assert len(list(tmp_path.glob("*.nc"))) == 3
    again = leave_one_source_out_populations(table, fit, random_seed=1, cache_dir=tmp_path)
    first = table.run_ids[0]
    assert again[first].idata.posterior.equals(populations[first].idata.posterior)
    # other settings are not served from the cache
    other = leave_one_source_out_populations(
        table, {"draws": 10, "tune": 20}, random_seed=1, cache_dir=tmp_path
    )
    assert other[first].idata.posterior.sizes["draw"] == 10
