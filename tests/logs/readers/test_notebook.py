"""The notebook reader: transformers/Unsloth progress tables in saved Jupyter notebooks.

The two real notebooks of data/notebook/ exist as CSV tables in data/csv/ under the same stem:
the reader must give the same steps and values. The hand-made notebooks of
tests/data/notebook/ are written by bayesgrpo.logs.writers.notebook, which reproduces the real
notebooks' outputs byte for byte (checked below); run this file as a script to regenerate them.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesgrpo
from bayesgrpo.errors import EmptyLogError, LogReadError, MalformedRecordError, TruncatedLogError
from bayesgrpo.logs.readers import ReadOptions, Source
from bayesgrpo.logs.readers.notebook.code import code_metadata
from bayesgrpo.logs.readers.notebook.reader import metric_name, read_notebook
from bayesgrpo.logs.writers.notebook import (
    code_cell,
    html_output,
    notebook,
    progress_html,
    stream_output,
    text_to_html_table,
    training_cell,
    write_notebook,
)

ROOT = Path(__file__).resolve().parents[3]
REAL = ROOT / "data" / "notebook"
CSV = ROOT / "data" / "csv"
DATA = Path(__file__).resolve().parents[2] / "data" / "notebook"
REAL_STEMS = sorted(p.stem for p in REAL.glob("*.ipynb"))

SETUP_CODE = """from unsloth import FastLanguageModel
model, tokenizer = FastLanguageModel.from_pretrained(
    model_name = "Qwen/Qwen2.5-3B-Instruct",  # a comment (with parentheses)
    max_seq_length = 1024,
    load_in_4bit = True,
)
from trl import GRPOConfig, GRPOTrainer
training_args = GRPOConfig(
    learning_rate = 5e-6,
    logging_steps = 1,
    per_device_train_batch_size = 6,
    gradient_accumulation_steps = 1,
    num_generations = 6,
    max_steps = 10,
    output_dir = "outputs",
    report_to = "none",
)
"""


def grpo_rows(n: int, missing_kl_at: tuple[int, ...] = ()) -> list[dict]:
    rows = []
    for step in range(1, n + 1):
        row = {
            "step": step,
            "loss": 0.0001 * step,
            "reward": round(-0.1 + 0.12 * step, 6),
            "reward_std": 0.3,
            "completion_length": 200.0 - step,
            "kl": 0.000123 * step,
            "rewards/correctness_reward_func": round(0.1 * step, 6),
        }
        if step in missing_kl_at:
            del row["kl"]
        rows.append(row)
    return rows


def interrupted_cell() -> dict:
    """A first run, stopped by hand at step 3 of 10: progress table then KeyboardInterrupt."""
    cell = training_cell(grpo_rows(3), max_steps=10, banner="unsloth")
    cell["outputs"].append(
        {
            "ename": "KeyboardInterrupt",
            "evalue": "",
            "output_type": "error",
            "traceback": ["KeyboardInterrupt: "],
        }
    )
    return cell


TRAIN_OUTPUT = (
    "TrainOutput(global_step=10, training_loss=0.00055, metrics={'train_runtime': 61.5, "
    "'train_samples_per_second': 0.976, 'train_steps_per_second': 0.163, 'total_flos': 0.0, "
    "'train_loss': 0.00055, 'epoch': 0.12})"
)


def finished_cell() -> dict:
    """The re-run to the end: transformers' banner, the table, and trainer.train()'s result."""
    cell = training_cell(
        grpo_rows(10, missing_kl_at=(1, 2)), max_steps=10, banner="transformers", num_examples=500
    )
    cell["execution_count"] = 5
    cell["outputs"].append(
        {
            "data": {"text/plain": [TRAIN_OUTPUT]},
            "execution_count": 5,
            "metadata": {},
            "output_type": "execute_result",
        }
    )
    return cell


def golden_files() -> dict[str, str]:
    rerun = notebook(
        [
            code_cell(SETUP_CODE, execution_count=1),
            interrupted_cell(),
            code_cell(
                "print('re-running')", [{"name": "stdout", "output_type": "stream", "text": ["re-running\n"]}]
            ),
            finished_cell(),
        ]
    )
    stopped = notebook([training_cell(grpo_rows(8), max_steps=10, value=8, banner="unsloth")])
    return {
        "rerun_two_tables.ipynb": json.dumps(rerun, indent=1) + "\n",
        "stopped_early.ipynb": json.dumps(stopped, indent=1) + "\n",
    }


def quiet_load(path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return bayesgrpo.load_runs(path, **kwargs)


def loud_load(path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bayesgrpo.load_runs(path, **kwargs)


def kinds(table) -> dict[str, tuple[str, int]]:
    return {i.kind: (i.action, i.count) for i in table.report.issues}


# --------------------------------------------------------------------------------------------
# the real notebooks
# --------------------------------------------------------------------------------------------


def test_real_notebooks_are_present():
    assert len(REAL_STEMS) == 2


@pytest.mark.parametrize("stem", REAL_STEMS)
def test_real_notebook_gives_the_same_run_as_its_csv(stem):
    from_notebook = quiet_load(REAL / f"{stem}.ipynb")
    from_csv = quiet_load(CSV / f"{stem}.csv")
    a, b = from_notebook.points, from_csv.points
    assert sorted(a.columns) == sorted(b.columns)  # 'rewards / f' read back as TRL's 'rewards/f'
    assert a["step"].tolist() == b["step"].tolist() == list(range(1, 251))
    columns = [c for c in b.columns if c not in ("run_id", "step")]
    np.testing.assert_allclose(a[columns].to_numpy(float), b[columns].to_numpy(float), rtol=0, atol=1e-6)
    assert from_notebook.report.balanced and from_notebook.report.records_read == 250


@pytest.mark.parametrize(
    ("stem", "expected"),
    [
        (
            "nb_unslothai_notebooks_Kaggle_Qwen2_5_3B_GRPO_4616903_n250",
            {
                "num_examples": 7473,
                "num_epochs": 1,
                "total_steps": 250,
                "samples_per_step": 1,
                "num_gpus": 1,
                "trainable_parameters": 119_734_272,
                "steps_completed": 250,
                "train_runtime": 6029,
            },
        ),
        (
            "nb_unslothai_notebooks_Llama3_1_8B_GRPO_91f52fa_n250",
            {
                "num_examples": 7473,
                "num_epochs": 1,
                "total_steps": 250,
                "samples_per_step": 6,
                "num_gpus": 1,
                "trainable_parameters": 83_886_080,
                "total_parameters": 4_712_566_784,
                "per_device_batch_size": 6,
            },
        ),
    ],
)
def test_real_notebook_banner_becomes_metadata(stem, expected):
    run = quiet_load(REAL / f"{stem}.ipynb").runs.iloc[0]
    for key, value in expected.items():
        assert run[key] == value, key
    assert run["format"] == "notebook" and run["run_id"] == stem


def test_writer_reproduces_the_real_notebook_outputs():
    stem = "nb_unslothai_notebooks_Kaggle_Qwen2_5_3B_GRPO_4616903_n250"
    real = json.loads((REAL / f"{stem}.ipynb").read_text())["cells"][0]
    rows = pd.read_csv(CSV / f"{stem}.csv").rename(columns={"Training Loss": "loss"})
    cell = training_cell(
        rows[["step", "loss", "reward", "reward_std", "completion_length", "kl"]], max_steps=250
    )
    assert cell["outputs"] == real["outputs"]


# --------------------------------------------------------------------------------------------
# hand-made notebooks
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(golden_files()))
def test_golden_files_are_what_the_writer_writes(name):
    assert (DATA / name).read_bytes().decode("utf-8") == golden_files()[name]


def test_rerun_notebook_reads_the_last_table_and_reports_the_other():
    table = quiet_load(DATA / "rerun_two_tables.ipynb")
    assert table.points["step"].tolist() == list(range(1, 11))
    np.testing.assert_allclose(table.points["reward"], [r["reward"] for r in grpo_rows(10)])
    assert (
        "rewards/correctness_reward_func" in table.points.columns
        and "completion_length" in table.points.columns
    )
    # 'No Log' cells: missing, not an error
    assert table.points["kl"].isna().tolist()[:3] == [True, True, False]
    found = kinds(table)
    assert found["no_log"] == ("info", 2)
    assert found["other_tables"] == ("info", 1)
    other = next(i for i in table.report.issues if i.kind == "other_tables")
    assert other.locations == ("cell 2",) and "cell 4" in other.detail
    run = table.runs.iloc[0]
    # the banner of the re-run (transformers'), not the first run's (Unsloth's)
    assert run["num_examples"] == 500 and run["total_steps"] == 10 and run["samples_per_step"] == 8
    # what the notebook's code states literally
    assert run["group_size"] == 6 and run["learning_rate"] == 5e-6 and run["logging_steps"] == 1
    assert run["model"] == "Qwen/Qwen2.5-3B-Instruct"
    # the TrainOutput the cell returned
    assert run["train_runtime"] == 61.5 and run["train_loss"] == 0.00055 and run["global_step"] == 10
    assert found["code_metadata"][0] == "info"
    assert table.report.balanced


def test_reader_function_returns_table_rows_as_records():
    raws = read_notebook(Source("notebook", (DATA / "rerun_two_tables.ipynb",), "nb"), ReadOptions())
    raw = raws[0]
    assert raw.records_read == 10 and raw.text_values and raw.location_label == "table row"
    assert raw.records["step"].tolist() == [str(s) for s in range(1, 11)]  # as written
    assert raw.records["kl"].tolist()[:2] == [None, None]


def test_stopped_run_says_so():
    table = quiet_load(DATA / "stopped_early.ipynb")
    assert table.points["step"].tolist() == list(range(1, 9))
    run = table.runs.iloc[0]
    assert run["steps_completed"] == 8 and run["total_steps"] == 10
    assert kinds(table)["stopped_early"] == ("info", 1)


def _write(tmp_path: Path, cells: list[dict]) -> Path:
    path = tmp_path / "run.ipynb"
    path.write_text(json.dumps(notebook(cells), indent=1))
    return path


def test_table_cell_that_is_not_a_number_is_reported(tmp_path):
    html = progress_html(grpo_rows(4), max_steps=4).replace("<td>0.140000</td>", "<td>error</td>", 1)
    path = _write(tmp_path, [code_cell("trainer.train()", [html_output(html)])])
    table = loud_load(path)
    assert table.points["step"].tolist() == [1, 2, 3, 4]
    assert kinds(table)["non_numeric"] == ("repaired", 1) and np.isnan(table.points.loc[1, "reward"])
    with pytest.raises(MalformedRecordError):
        bayesgrpo.load_runs(path, strict=True)


def test_row_with_missing_cells_is_dropped(tmp_path):
    html = progress_html(grpo_rows(4), max_steps=4)
    start = html.index("<td>0.140000</td>")
    html = html[:start] + html[start + len("<td>0.140000</td>") :]
    path = _write(tmp_path, [code_cell("trainer.train()", [html_output(html)])])
    table = loud_load(path)
    assert table.points["step"].tolist() == [1, 3, 4]
    assert kinds(table)["bad_row"] == ("dropped", 1) and table.report.balanced
    with pytest.raises(MalformedRecordError, match="table row 2"):
        bayesgrpo.load_runs(path, strict=True)


def test_table_html_cut_mid_row_drops_the_partial_row(tmp_path):
    html = progress_html(grpo_rows(4), max_steps=4)
    html = html[: html.rindex("<tr>") + 30]
    path = _write(tmp_path, [code_cell("trainer.train()", [html_output(html)])])
    table = loud_load(path)
    assert table.points["step"].tolist() == [1, 2, 3]
    assert kinds(table)["truncated"] == ("dropped", 1) and table.report.balanced
    with pytest.raises(TruncatedLogError, match="cell 1"):
        bayesgrpo.load_runs(path, strict=True)


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        ([], "no training progress table"),
        (
            [
                code_cell(
                    "df.head()",
                    [html_output('<table border="1" class="dataframe"><tr><th>a</th></tr></table>')],
                )
            ],
            "no training progress table",
        ),
        (
            [code_cell("trainer.train()", [html_output(progress_html([], max_steps=10, value=0))])],
            "no complete row",
        ),
        (
            [
                code_cell(
                    "trainer.train()",
                    [html_output(progress_html(grpo_rows(2)).replace("<th>Step</th>", "<th>Epoch</th>"))],
                )
            ],
            "none with a 'Step' column",
        ),
    ],
)
def test_notebook_without_usable_table_is_empty(tmp_path, cells, message):
    path = _write(tmp_path, cells)
    with pytest.raises(EmptyLogError, match=message) as caught:
        bayesgrpo.load_runs(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    ("content", "error", "message"),
    [
        ("", EmptyLogError, "empty notebook"),
        ("[1, 2]", LogReadError, "not a notebook"),
        ('{"metadata": {}}', LogReadError, "no 'cells' list"),
        (
            '{\n "cells": [\n  {"cell_type": "code" @@ },\n  {}\n ]\n}\n',
            LogReadError,
            "not valid notebook JSON",
        ),
    ],
)
def test_unreadable_notebooks_raise_typed_errors(tmp_path, content, error, message):
    path = tmp_path / "run.ipynb"
    path.write_text(content)
    with pytest.raises(error, match=message):
        bayesgrpo.load_runs(path)


def test_cut_notebook_is_a_truncated_error_naming_the_byte(tmp_path):
    text = (DATA / "rerun_two_tables.ipynb").read_text()
    path = tmp_path / "run.ipynb"
    path.write_text(text[: len(text) * 2 // 3])
    with pytest.raises(TruncatedLogError, match=r"byte \d+ \(line \d+"):
        bayesgrpo.load_runs(path)


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("rewards / correctness_reward_func", "rewards/correctness_reward_func"),
        ("completions / mean_length", "completions/mean_length"),
        ("Training Loss", "Training Loss"),
        (" reward ", "reward"),
    ],
)
def test_headers_read_back_as_trl_names(header, name):
    assert metric_name(header) == name


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            SETUP_CODE,
            {
                "group_size": 6,
                "learning_rate": 5e-6,
                "logging_steps": 1,
                "total_steps": 10,
                "per_device_batch_size": 6,
                "gradient_accumulation_steps": 1,
                "model": "Qwen/Qwen2.5-3B-Instruct",
            },
        ),
        ("args = GRPOConfig(num_generations = n_gen, max_steps = 'x')\n", {}),  # not literal numbers: nothing
        (
            "%%capture\n!pip install unsloth\n"
            "model = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.2-1B')\n",
            {"model": "meta-llama/Llama-3.2-1B"},
        ),
        ("cfg = GRPOConfig(num_generations=4,\n", {}),  # unbalanced: nothing, no error
    ],
)
def test_code_metadata_takes_literal_config_values(source, expected):
    assert code_metadata([source]) == expected


def test_notebook_round_trip(tmp_path):
    rng = np.random.default_rng(5)
    rows = [
        {
            "step": s,
            "loss": float(rng.normal()),
            "reward": float(rng.uniform(-2, 3)),
            "kl": float(rng.uniform(0, 0.1)),
        }
        for s in range(1, 41)
    ]
    path = write_notebook(tmp_path / "run.ipynb", rows, banner="transformers", setup_code=SETUP_CODE)
    table = quiet_load(path)
    assert table.points["step"].tolist() == list(range(1, 41))
    np.testing.assert_allclose(table.points["reward"], [r["reward"] for r in rows], atol=5e-7)
    np.testing.assert_allclose(table.points["loss"], [r["loss"] for r in rows], atol=5e-7)
    assert table.report.balanced and table.report.records_dropped == 0


if __name__ == "__main__":
    DATA.mkdir(parents=True, exist_ok=True)
    for file_name, content in golden_files().items():
        (DATA / file_name).write_bytes(content.encode("utf-8"))
        print("wrote", DATA / file_name)


def test_transformers_title_cased_headers_are_read_as_trl_names(tmp_path):
    # transformers' own notebook callback capitalises each '_'-part of a metric's name
    # (reward_std -> "Reward Std"); seen in a public GRPO notebook the reader used to refuse
    header = [
        "Step",
        "Training Loss",
        "Reward",
        "Reward Std",
        "Completions/mean Length",
        "Frac Reward Zero Std",
    ]
    rows = [[s, 0.01 * s, 0.1 * s, 0.3, 120.0 + s, 0.25] for s in (5, 10, 15)]
    html = progress_html([{"step": 1}], max_steps=15).split("<table")[0] + text_to_html_table([header, *rows])
    path = tmp_path / "grpo_gsm8k.ipynb"
    path.write_text(json.dumps(notebook([code_cell("trainer.train()", [html_output(html)])])))
    table = bayesgrpo.load_runs(path, warn=False)
    np.testing.assert_allclose(table.points["reward"], [0.5, 1.0, 1.5])
    assert {"reward_std", "frac_reward_zero_std", "completion_length", "loss"} <= set(table.points.columns)


def test_console_dicts_in_a_cells_stream_output_are_the_run(tmp_path):
    # newer TRL prints its log dicts, values quoted, into the cell's output instead of a progress
    # table (huggingface/trl's own example notebooks): they were refused as "no progress table"
    rewards = ["0.06", "0.12", "0.165", "0.12", "0.225"]
    text = "".join(
        f"{{'loss': '0.01', 'learning_rate': '1e-05', 'reward': '{r}', 'epoch': '{(i + 1) / 4}'}}\n"
        for i, r in enumerate(rewards)
    )
    code = "config = GRPOConfig(max_steps=20, num_generations=4)\ntrainer.train()"
    path = _write(tmp_path, [code_cell(code, [stream_output("Loading...\n"), stream_output(text, "stdout")])])
    table = quiet_load(path)
    np.testing.assert_allclose(table.points["reward"], [float(r) for r in rewards])
    assert table.points["step"].tolist() == [1, 2, 3, 4, 5]
    assert table.runs.loc[0, "format"] == "notebook"
    assert table.runs.loc[0, "total_steps"] == 20 and table.runs.loc[0, "group_size"] == 4
    assert kinds(table)["console_dicts"] == ("info", 5)


def test_a_progress_table_wins_over_console_dicts(tmp_path):
    html = progress_html(grpo_rows(4), max_steps=4)
    stray = stream_output("{'loss': '0.5', 'reward': '9.0', 'epoch': '1'}\n", "stdout")
    path = _write(tmp_path, [code_cell("trainer.train()", [stray, html_output(html)])])
    table = quiet_load(path)
    assert table.points["step"].tolist() == [1, 2, 3, 4] and 9.0 not in table.points["reward"].tolist()
