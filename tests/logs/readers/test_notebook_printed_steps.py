"""Notebooks whose reward is only in ``Step N | name: value`` lines a training callback printed.

The fixtures are excerpts of real public notebooks the reader refused: tripathysagar/rlhf-gsm8k
``nbs/00_smollm2-135M-grpo-gsm8k.ipynb`` (blob f262b59b, a ``VibecheckCallback`` printing ``Step
10 | reward: 1.570`` to step 1868 beside a progress table of the training loss only) and
Danselem/llm_finetuning ``SmolLM_x_Grpo.ipynb`` (several title-cased metrics a line, no progress
table, the output cut by Colab to its last 5000 lines).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import bayesgrpo
from bayesgrpo.errors import EmptyLogError, UnknownMetricError
from bayesgrpo.logs.readers.notebook.printed import parse_printed_step
from bayesgrpo.logs.writers.notebook import (
    code_cell,
    html_output,
    notebook,
    progress_html,
    stream_output,
    text_to_html_table,
)

#: The GRPO cell's code (trimmed): the callback that prints, the config, the training call.
VIBECHECK_CODE = """class VibecheckCallback(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs:
            reward = logs.get('reward')
            if reward is not None:
                print(f"Step {state.global_step} | reward: {reward:.3f}")

config = GRPOConfig(
    output_dir="grpo_gsm8k",
    num_generations=8,
    per_device_train_batch_size=4,
    gradient_accumulation_steps=4,
    learning_rate=5e-6,
    logging_steps=10,
    report_to='wandb',
)
trainer = GRPOTrainer(model=model, reward_funcs=reward_fn, args=config, callbacks=[VibecheckCallback()])
trainer.train()
"""
#: The first printed lines and progress-table rows of the real cell.
PRINTED = "Step 10 | reward: 1.570\nStep 20 | reward: 1.637\nStep 30 | reward: 1.871\n"
PRINTED_MORE = "Step 40 | reward: 1.770\nStep 50 | reward: 1.884\nStep 60 | reward: 1.912\n"
LOSSES = [(10, 0.182147), (20, 0.103409), (30, 0.116420), (40, 0.007909), (50, 0.005), (60, 0.004)]
WIDGET = {"data": {"text/plain": ["wandb panel"]}, "metadata": {}, "output_type": "display_data"}


def _loss_table(rows: list[tuple[int, float]], max_steps: int) -> dict:
    """The progress display transformers shows of a training loss only (``Step``, ``Training Loss``)."""
    bar = progress_html([{"step": 1}], max_steps=max_steps).split("<table")[0]
    return html_output(bar + text_to_html_table([["Step", "Training Loss"], *rows]))


def _write(tmp_path: Path, cells: list[dict], name: str = "00_smollm2-135M-grpo-gsm8k.ipynb") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(notebook(cells), indent=1))
    return path


def _kinds(table) -> dict[str, tuple[str, int]]:
    return {i.kind: (i.action, i.count) for i in table.report.issues}


def _quiet(path: Path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing dropped or repaired: no ReadWarning
        return bayesgrpo.load_runs(path, **kwargs)


def test_printed_rewards_are_the_run_when_the_progress_table_has_only_the_loss(tmp_path):
    # the notebook's table holds 'Training Loss' only: the reader asked for a reward it lacks
    # ("Available: 'Training Loss'"), and the scan counted the notebook as holding no run
    sft = code_cell("sft_trainer.train()", [_loss_table([(10, 1.796393), (20, 1.270053)], 20)])
    grpo = code_cell(
        VIBECHECK_CODE,
        [
            stream_output("Passing `generation_config` together with ...\n"),
            _loss_table(LOSSES, 60),
            stream_output(PRINTED, "stdout"),
            WIDGET,  # the printed lines come in several stream outputs, widgets between them
            stream_output(PRINTED_MORE, "stdout"),
        ],
    )
    table = _quiet(_write(tmp_path, [sft, grpo]))
    assert table.run_ids == ["00_smollm2-135M-grpo-gsm8k"]
    points = table.points
    assert points["step"].tolist() == [10, 20, 30, 40, 50, 60]
    np.testing.assert_allclose(points["reward"], [1.570, 1.637, 1.871, 1.770, 1.884, 1.912])
    run = table.runs.iloc[0]
    assert (run["format"], run["reward_key"]) == ("notebook", "reward")
    # the training's own progress bar and code state the plan
    assert (run["total_steps"], run["group_size"], run["logging_steps"]) == (60, 8, 10)
    found = _kinds(table)
    assert found["printed_steps"] == ("info", 6)
    assert found["other_tables"] == ("info", 1)  # the SFT table of cell 1
    printed = next(i for i in table.report.issues if i.kind == "printed_steps")
    assert "cell 2 has no reward column" in printed.detail and "'Training Loss'" in printed.detail
    assert table.report.balanced and table.report.records_read == 6


def test_several_title_cased_metrics_a_line_without_a_table(tmp_path):
    # Danselem/llm_finetuning SmolLM_x_Grpo.ipynb: no progress table, the metrics TRL logs printed
    # title-cased, sample completions between the lines, and Colab kept the output's last lines
    text = (
        "\x1b[1;30;43mStreaming output truncated to the last 5000 lines.\x1b[0m\n"
        "Total distance traveled in flat sand = 60 miles\n"
        "================== End ==================\n\n"
        "Step 119 | Loss: 0.0000 | Reward: -0.3655 | Reward Std: 0.0566 "
        "| Completion Length: 200.0000 | KL: 0.0580\n"
        "\n=============== Sample 120 ===============\nQuestion:\nMalcolm brushes his teeth ...\n"
        "Step 120 | Loss: 0.0000 | Reward: 0.5850 | Reward Std: 0.0544 "
        "| Completion Length: 65.0000 | KL: 0.0174\n"
        "Step 120 | Generated text (first example):\n"
        "Step 121 | Loss: 0.0000 | Reward: 0.3830 | Reward Std: 0.0460 "
        "| Completion Length: 96.5000 | KL: 0.0348\n"
    )
    code = "config = GRPOConfig(num_generations=2, max_steps=500, logging_steps=1)\ntrainer.train()"
    path = _write(tmp_path, [code_cell(code, [stream_output(text, "stdout")])], "SmolLM_x_Grpo.ipynb")
    table = _quiet(path)
    points = table.points
    assert points["step"].tolist() == [119, 120, 121]
    np.testing.assert_allclose(points["reward"], [-0.3655, 0.5850, 0.3830])
    np.testing.assert_allclose(points["reward_std"], [0.0566, 0.0544, 0.0460])
    np.testing.assert_allclose(points["kl"], [0.0580, 0.0174, 0.0348])
    np.testing.assert_allclose(points["completion_length"], [200.0, 65.0, 96.5])
    assert (table.runs.loc[0, "total_steps"], table.runs.loc[0, "group_size"]) == (500, 2)
    found = _kinds(table)
    assert found["printed_steps"] == ("info", 3)
    assert found["not_metric_lines"] == ("info", 1)  # 'Step 120 | Generated text ...': no record
    assert found["output_cut"] == ("info", 1)
    cut = next(i for i in table.report.issues if i.kind == "output_cut")
    assert "last 5000 lines" in cut.detail and "before step 119" in cut.detail


def test_a_progress_table_with_a_reward_wins_over_printed_lines(tmp_path):
    rows = [["Step", "Training Loss", "reward"], [1, 0.1, 0.25], [2, 0.1, 0.5]]
    bar = progress_html([{"step": 1}], max_steps=2).split("<table")[0]
    cell = code_cell(
        "trainer.train()",
        [html_output(bar + text_to_html_table(rows)), stream_output("Step 1 | reward: 9.0\n", "stdout")],
    )
    table = _quiet(_write(tmp_path, [cell]), reward=None)
    np.testing.assert_allclose(table.points["reward"], [0.25, 0.5])
    assert "printed_steps" not in _kinds(table)


def test_printed_lines_read_when_the_reward_asked_for_is_only_there(tmp_path):
    cell = code_cell(
        "trainer.train()",
        [_loss_table(LOSSES[:3], 30), stream_output(PRINTED, "stdout")],
    )
    path = _write(tmp_path, [cell])
    # the table's own metric asked for: the table is read
    assert bayesgrpo.load_runs(path, reward="Training Loss", warn=False).points["reward"].tolist() == [
        0.182147,
        0.103409,
        0.11642,
    ]
    np.testing.assert_allclose(_quiet(path).points["reward"], [1.570, 1.637, 1.871])


def test_printed_lines_without_a_reward_are_a_clear_error(tmp_path):
    # a JAX pre-training notebook printing 'Step 0 | Loss: 4.7828': no reward, said so
    cell = code_cell("train()", [stream_output("Step 0 | Loss: 4.7828\nStep 500 | Loss: 1.5317\n", "stdout")])
    with pytest.raises(UnknownMetricError, match="'loss'"):
        bayesgrpo.load_runs(_write(tmp_path, [cell]))


def test_a_notebook_with_no_run_says_what_it_looked_for(tmp_path):
    cell = code_cell("print(result)", [stream_output("Final Accuracy: 16/660 = 2.42%\n", "stdout")])
    with pytest.raises(EmptyLogError, match="no printed 'Step N \\| name: value' lines"):
        bayesgrpo.load_runs(_write(tmp_path, [cell]))


def test_a_printed_nan_is_noted_and_its_empty_record_reported(tmp_path):
    text = "Step 1 | reward: 0.5\nStep 2 | reward: nan\nStep 3 | reward: 0.7\n"
    path = _write(tmp_path, [code_cell("t()", [stream_output(text, "stdout")])])
    with pytest.warns(UserWarning, match="1 of 3 records dropped"):
        table = bayesgrpo.load_runs(path)
    assert table.points["step"].tolist() == [1, 3]
    found = _kinds(table)
    assert found["nan_value"] == ("info", 1) and found["no_values"] == ("dropped", 1)
    where = next(i for i in table.report.issues if i.kind == "no_values").locations
    assert where == ("stream line 2",) and table.report.balanced


def test_printed_steps_of_an_earlier_cell_are_noted_not_read(tmp_path):
    first = code_cell("t()", [stream_output("Step 1 | reward: 0.1\nStep 2 | reward: 0.2\n", "stdout")])
    second = code_cell("t()", [stream_output("Step 1 | reward: 0.3\nStep 2 | reward: 0.4\n", "stdout")])
    table = _quiet(_write(tmp_path, [first, second]))
    np.testing.assert_allclose(table.points["reward"], [0.3, 0.4])
    assert _kinds(table)["other_printed_steps"] == ("info", 2)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("Step 10 | reward: 1.570", (10, {"reward": 1.57})),
        ("  Step 3 |rewards/format: -1e-3 | kl = 0.5", (3, {"rewards/format": -0.001, "kl": 0.5})),
        ("Step 10 | Generated text (first example):", None),
        ("Step 10 | reward: 1.5 | note: fine", None),  # every part must be a number
        ("Step 10: reward 1.5", None),
        ("Stepping 10 | reward: 1.5", None),
        ("Total steps 10 | reward: 1.5", None),
    ],
)
def test_what_counts_as_a_printed_step(line, expected):
    assert parse_printed_step(line) == expected
