"""The plain-table reader (readers/tabular.py): CSV, JSON Lines and Parquet.

Column mapping and several runs per file, every malformed input we know of (each asserting
the typed error naming the place, or the reported repair, and that every record read is
accounted for), and the 44 real CSVs bundled under data/csv. ``test_bug_*`` tests guard
bugs that were found and fixed.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesgrpo
from bayesgrpo.errors import (
    BayesGRPOError,
    EmptyLogError,
    LogReadError,
    MalformedRecordError,
    TruncatedLogError,
    UnknownMetricError,
)
from bayesgrpo.logs.readers import ReadOptions, Source, detect_format
from bayesgrpo.logs.readers._records import tidy_run
from bayesgrpo.logs.readers.tabular import read_table

HERE = Path(__file__).resolve().parents[2]
DATA = HERE / "data" / "tabular"
REAL = HERE.parent / "data"
MAPPING = {"step": "global_step", "reward": "score", "run_id": "name"}


# ---------------------------------------------------------------- helpers


def load(path: Path, **kwargs):
    """load_runs without the summary warning (tests look at the report itself)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bayesgrpo.load_runs(path, **kwargs)


def issues(table) -> dict[str, tuple[str, int, tuple[str, ...]]]:
    return {i.kind: (i.action, i.count, i.locations) for i in table.report.issues}


def assert_balanced(table) -> None:
    for account in table.report.sources:
        assert account.records_read == account.records_kept + account.records_dropped, account
    assert table.report.balanced


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def multi_run(tmp_path: Path, fmt: str) -> Path:
    """The fixture table in the asked format (Parquet made from the CSV, with typed columns)."""
    if fmt == "parquet":
        path = tmp_path / "multi_run.parquet"
        pd.read_csv(DATA / "multi_run.csv").to_parquet(path, index=False)
        return path
    return DATA / f"multi_run.{fmt}"


# ---------------------------------------------------------------- mapping and several runs


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_column_mapping_and_several_runs_per_file(tmp_path, fmt):
    path = multi_run(tmp_path, fmt)
    assert detect_format(path) == fmt
    table = load(path, columns=MAPPING)
    assert table.run_ids == ["run-a", "run-b"]
    a, b = table.run("run-a"), table.run("run-b")
    assert a["step"].tolist() == [1, 2, 3] and b["step"].tolist() == [1, 2, 3]
    np.testing.assert_allclose(a["reward"], [0.10, 0.15, 0.20])
    np.testing.assert_allclose(b["reward"], [0.30, 0.35, 0.40])
    np.testing.assert_allclose(b["completion_length"], [300.25, 290.0, 280.0])  # canonical name
    np.testing.assert_allclose(a["kl"], [0.001, 0.002, 0.003])
    assert "name" not in table.points.columns and "score" not in table.points.columns
    assert table.runs["path"].tolist() == [f"{path}#run-a", f"{path}#run-b"]
    assert set(table.runs["reward_key"]) == {"score"}
    assert [a.records_read for a in table.report.sources] == [3, 3]
    assert not table.report.has_changes
    assert_balanced(table)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_reader_function_gives_one_raw_run_per_run_id(tmp_path, fmt):
    path = multi_run(tmp_path, fmt)
    raws = read_table(Source(fmt, (path,), path.stem), ReadOptions(columns=MAPPING))
    assert [(r.run_id, r.source, r.records_read) for r in raws] == [
        ("run-a", f"{path}#run-a", 3),
        ("run-b", f"{path}#run-b", 3),
    ]
    # locations are the file's own lines (CSV/JSONL, the CSV header is line 1) or rows
    expected = {"csv": [2, 3, 5], "jsonl": [1, 2, 4], "parquet": [1, 2, 4]}[fmt]
    assert raws[0].records["_loc"].tolist() == expected
    assert raws[0].location_label == ("row" if fmt == "parquet" else "line")
    assert all(tidy_run(raw).account.balanced for raw in raws)


@pytest.mark.parametrize("what", ["step", "reward", "run_id"])
@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_mapping_naming_a_missing_column_lists_the_columns(tmp_path, fmt, what):
    path = multi_run(tmp_path, fmt)
    mapping = {**MAPPING, what: "nope"}
    with pytest.raises(UnknownMetricError) as info:
        load(path, columns=mapping)
    message = str(info.value)
    assert "'nope'" in message and str(path) in message and f"columns['{what}']" in message
    for column in ("name", "global_step", "score", "kl", "completions/mean_length"):
        assert repr(column) in message
    assert "_loc" not in message


def test_without_mapping_a_table_with_other_names_is_a_clear_error(tmp_path):
    # global_step is a default step name, but no default reward column is there
    with pytest.raises(UnknownMetricError, match="pass reward=") as info:
        load(DATA / "multi_run.csv")
    assert "'score'" in str(info.value)
    path = write(tmp_path, "t.csv", "iter_num,score\n1,0.1\n")
    with pytest.raises(bayesgrpo.LogReadError, match=r"no step column.*columns=\{'step'") as info:
        load(path)
    assert "'iter_num'" in str(info.value)


# ---------------------------------------------------------------- malformed CSV / JSONL / Parquet

CSV_HEAD = "step,reward,kl\n"
MALFORMED = [
    # (id, file name, content, issue kind, action, count, location, strict error, steps kept)
    (
        "csv last line cut",
        "t.csv",
        CSV_HEAD + "1,0.1,0.01\n2,0.2,0.02\n3,0.3",
        "truncated",
        "dropped",
        1,
        "line 4",
        TruncatedLogError,
        [1, 2],
    ),
    (
        "csv ragged line",
        "t.csv",
        CSV_HEAD + "1,0.1,0.01\n2,0.2\n3,0.3,0.03\n",
        "bad_line",
        "dropped",
        1,
        "line 3",
        MalformedRecordError,
        [1, 3],
    ),
    (
        "csv extra cell",
        "t.csv",
        CSV_HEAD + "1,0.1,0.01\n2,0.2,0.02,9\n3,0.3,0.03\n",
        "bad_line",
        "dropped",
        1,
        "line 3",
        MalformedRecordError,
        [1, 3],
    ),
    (
        "csv infinite value",
        "t.csv",
        CSV_HEAD + "1,0.1,0.01\n2,inf,0.02\n3,0.3,0.03\n",
        "non_finite",
        "repaired",
        1,
        "line 3",
        MalformedRecordError,
        [1, 2, 3],
    ),
    (
        "csv text in a number column",
        "t.csv",
        CSV_HEAD + "1,0.1,0.01\n2,abc,0.02\n3,0.3,0.03\n",
        "non_numeric",
        "repaired",
        1,
        "line 3",
        MalformedRecordError,
        [1, 2, 3],
    ),
    (
        "csv record with nothing usable",
        "t.csv",
        CSV_HEAD + "1,0.1,0.01\n2,abc,\n3,0.3,0.03\n",
        "no_values",
        "dropped",
        1,
        "line 3",
        MalformedRecordError,
        [1, 3],
    ),
    (
        "csv bad step",
        "t.csv",
        CSV_HEAD + "1,0.1,0.01\n2.5,0.2,0.02\n3,0.3,0.03\n",
        "bad_step",
        "dropped",
        1,
        "line 3",
        MalformedRecordError,
        [1, 3],
    ),
    (
        "csv duplicate step (resumed run)",
        "t.csv",
        CSV_HEAD + "1,0.1,0.01\n2,0.2,0.02\n2,0.25,0.02\n3,0.3,0.03\n",
        "duplicate_step",
        "dropped",
        1,
        "line 3",
        MalformedRecordError,
        [1, 2, 3],
    ),
    (
        "csv steps out of order",
        "t.csv",
        CSV_HEAD + "1,0.1,0.01\n3,0.3,0.03\n2,0.2,0.02\n",
        "out_of_order",
        "repaired",
        1,
        "line 4",
        MalformedRecordError,
        [1, 2, 3],
    ),
    (
        "jsonl last line cut",
        "t.jsonl",
        '{"step": 1, "reward": 0.1}\n{"step": 2, "reward": 0.2}\n{"step": 3, "rew',
        "bad_line",
        "dropped",
        1,
        "line 3",
        TruncatedLogError,
        [1, 2],
    ),
    (
        "jsonl line not an object",
        "t.jsonl",
        '{"step": 1, "reward": 0.1}\n[2, 0.2]\n{"step": 3, "reward": 0.3}\n',
        "bad_line",
        "dropped",
        1,
        "line 2",
        MalformedRecordError,
        [1, 3],
    ),
    (
        "jsonl number as text",
        "t.jsonl",
        '{"step": 1, "reward": 0.1}\n{"step": 2, "reward": "0.2"}\n',
        "string_number",
        "repaired",
        1,
        "line 2",
        MalformedRecordError,
        [1, 2],
    ),
    (
        "jsonl Infinity",
        "t.jsonl",
        '{"step": 1, "reward": 0.1, "kl": 0}\n{"step": 2, "reward": Infinity, "kl": 0}\n',
        "non_finite",
        "repaired",
        1,
        "line 2",
        MalformedRecordError,
        [1, 2],
    ),
    (
        "jsonl NaN only",
        "t.jsonl",
        '{"step": 1, "reward": 0.1}\n{"step": 2, "reward": NaN}\n',
        "no_values",
        "dropped",
        1,
        "line 2",
        MalformedRecordError,
        [1],
    ),
    (
        "jsonl duplicate step",
        "t.jsonl",
        '{"step": 1, "reward": 0.1}\n{"step": 1, "reward": 0.15}\n{"step": 2, "reward": 0.2}\n',
        "duplicate_step",
        "dropped",
        1,
        "line 1",
        MalformedRecordError,
        [1, 2],
    ),
]


@pytest.mark.parametrize(
    ("name", "content", "kind", "action", "count", "location", "strict_error", "steps"),
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_malformed_text_tables_are_repaired_or_dropped_and_reported(
    tmp_path, name, content, kind, action, count, location, strict_error, steps
):
    path = write(tmp_path, name, content)
    table = load(path)
    assert table.points["step"].tolist() == steps
    found = issues(table)
    assert found[kind][:2] == (action, count), table.report.summary()
    assert location in found[kind][2]
    assert_balanced(table)
    with pytest.raises(strict_error) as info:
        load(path, strict=True)
    assert str(path) in str(info.value)


def test_nan_written_as_text_is_simply_missing(tmp_path):
    path = write(tmp_path, "t.csv", CSV_HEAD + "1,0.1,0.01\n2,nan,0.02\n3,0.3,0.03\n")
    table = load(path)
    assert table.points["step"].tolist() == [1, 2, 3] and np.isnan(table.points["reward"].iloc[1])
    assert issues(table)["no_reward"][:2] == ("info", 1)
    assert not table.report.has_changes
    assert_balanced(table)


def test_parquet_strings_nan_inf_duplicates_and_order(tmp_path):
    frame = pd.DataFrame(
        {
            "step": [1, 2, 3, 3, 2],
            "reward": ["0.1", "abc", "0.3", "0.35", "0.2"],
            "kl": [0.1, np.inf, np.nan, 0.1, 0.2],
        }
    )
    path = tmp_path / "t.parquet"
    frame.to_parquet(path, index=False)
    table = load(path)
    assert table.points["step"].tolist() == [1, 2, 3]
    assert table.points["reward"].tolist() == [0.1, 0.2, 0.35]  # latest wins for steps 2 and 3
    found = issues(table)
    assert found["non_numeric"][:2] == ("repaired", 1) and found["non_numeric"][2] == ("row 2",)
    assert found["non_finite"][:2] == ("repaired", 1)
    assert found["no_values"][:2] == ("dropped", 1)
    assert found["duplicate_step"][:2] == ("dropped", 1)
    assert found["out_of_order"][:2] == ("repaired", 1)
    assert_balanced(table)
    with pytest.raises(MalformedRecordError, match="row"):
        load(path, strict=True)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("t.csv", "", "empty file"),
        ("t.csv", "step,reward\n", "no data row"),
        ("t.jsonl", "", "empty file"),
        ("t.jsonl", "\n\n", "empty file"),
        ("t.jsonl", "[1]\n", "no data row"),
    ],
)
def test_empty_tables_are_empty_log_errors_naming_the_file(tmp_path, name, content, message):
    path = write(tmp_path, name, content)
    for strict in (False, True):
        with pytest.raises((EmptyLogError, MalformedRecordError)) as info:
            load(path, strict=strict)
        assert str(path) in str(info.value)
    with pytest.raises(EmptyLogError, match=message):
        load(path)


def test_empty_parquet_is_an_empty_log_error(tmp_path):
    path = tmp_path / "t.parquet"
    pd.DataFrame({"step": pd.Series([], dtype="int64"), "reward": pd.Series([], dtype=float)}).to_parquet(
        path
    )
    with pytest.raises(EmptyLogError, match="no rows") as info:
        load(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("damage", ["cut in half", "last byte gone", "garbage", "empty"])
def test_damaged_parquet_is_a_truncated_log_error(tmp_path, damage):
    good = tmp_path / "good.parquet"
    pd.read_csv(DATA / "multi_run.csv").to_parquet(good)
    data = good.read_bytes()
    damaged = {
        "cut in half": data[: len(data) // 2],
        "last byte gone": data[:-1],
        "garbage": b"PAR1" + b"\x00" * 64,
        "empty": b"",
    }[damage]
    path = write(tmp_path, "bad.parquet", damaged)
    with pytest.raises(TruncatedLogError, match="not a readable Parquet file") as info:
        load(path, columns=MAPPING)
    assert str(path) in str(info.value)
    table = load(tmp_path, columns=MAPPING, skip_unreadable=True)
    assert table.run_ids == ["run-a", "run-b"]
    assert any(i.kind == "unreadable" and "bad.parquet" in i.source for i in table.report.issues)


# ---------------------------------------------------------------- the real CSVs


def _real_csv_rows() -> list[dict]:
    runs = pd.read_csv(REAL / "runs.csv")
    return runs[runs["file"].str.startswith("csv/")].to_dict("records")


REAL_ROWS = _real_csv_rows()


def test_all_44_real_csvs_are_listed():
    assert len(REAL_ROWS) == 44
    assert sorted(row["file"] for row in REAL_ROWS) == sorted(
        f"csv/{p.name}" for p in (REAL / "csv").glob("*.csv")
    )


@pytest.mark.parametrize("row", REAL_ROWS, ids=[Path(row["file"]).stem for row in REAL_ROWS])
def test_real_csvs_load_with_the_listed_points(row):
    path = REAL / row["file"]
    assert detect_format(path) == "csv"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean real file needs no repair
        table = bayesgrpo.load_runs(path, reward=row["reward_key"])
    points = table.points[np.isfinite(table.points["reward"])]
    assert len(points) == row["n_points"]
    assert points["step"].iloc[0] == row["first_step"] and points["step"].iloc[-1] == row["last_step"]
    assert table.runs["reward_key"].tolist() == [row["reward_key"]]
    assert table.report.records_dropped == 0
    assert_balanced(table)


# ---------------------------------------------------------------- fixed bugs (regression tests)


def test_bug_csv_saved_by_a_spreadsheet_with_a_byte_order_mark(tmp_path):
    path = write(tmp_path, "t.csv", b"\xef\xbb\xbfstep,reward\n1,0.1\n2,0.2\n")
    assert load(path).points["step"].tolist() == [1, 2]


def test_bug_mapped_step_column_next_to_a_column_named_step(tmp_path):
    path = write(tmp_path, "t.csv", "step,global_step,reward\n1,10,0.1\n2,20,0.2\n")
    try:
        table = load(path, columns={"step": "global_step"})
    except BayesGRPOError:
        table = None
    assert table is not None and table.points["step"].tolist() == [10, 20]


def test_bug_record_without_run_id_is_lost_silently(tmp_path):
    path = write(
        tmp_path,
        "t.jsonl",
        '{"run_id": "a", "step": 1, "reward": 0.1}\n{"step": 2, "reward": 0.2}\n{"run_id": "a", "step": 3, '
        '"reward": 0.3}\n',
    )
    table = load(path)
    assert table.report.records_read == 3 and table.report.records_dropped == 1
    assert_balanced(table)


def test_bug_mapping_of_another_metric_to_a_missing_column(tmp_path):
    path = write(tmp_path, "t.csv", "step,reward,kl_div\n1,0.1,0.01\n2,0.2,0.02\n")
    with pytest.raises(UnknownMetricError, match="kl_dvi"):
        load(path, columns={"kl": "kl_dvi"})


def test_bug_parquet_with_the_step_as_index(tmp_path):
    path = tmp_path / "t.parquet"
    pd.DataFrame({"step": [1, 2, 3], "reward": [0.1, 0.2, 0.3]}).set_index("step").to_parquet(path)
    assert load(path).points["step"].tolist() == [1, 2, 3]


def test_bug_two_log_names_of_one_canonical_metric(tmp_path):
    path = write(
        tmp_path, "t.csv", "step,reward,completions/mean_length,response_length/mean\n1,0.1,5,6\n2,0.2,5,6\n"
    )
    try:
        table = load(path)
    except BayesGRPOError:
        table = None
    assert table is not None and table.points["completion_length"].tolist() == [5, 5]


def test_bug_stray_quote_swallows_the_following_lines(tmp_path):
    path = write(tmp_path, "t.csv", 'step,reward\n1,0.1\n2,"0.2\n3,0.3\n4,0.4\n')
    table = load(path)
    assert table.points["step"].tolist() == [1, 3, 4]
    assert table.report.records_read == 4 and "line 3" in issues(table)["bad_line"][2]


def test_bug_last_line_cut_inside_its_last_value(tmp_path):
    path = write(tmp_path, "t.csv", CSV_HEAD + "1,0.1,0.01\n2,0.2,0.02\n3,0.3,0.0")
    table = load(path)
    assert any("line 4" in i.locations for i in table.report.issues)


def test_bug_jsonl_cut_mid_record_strict_is_a_truncated_log_error(tmp_path):
    path = write(tmp_path, "t.jsonl", '{"step": 1, "reward": 0.1}\n{"step": 2, "rew')
    with pytest.raises(TruncatedLogError):
        load(path, strict=True)


def test_bug_step_too_large_for_int64(tmp_path):
    path = write(tmp_path, "t.csv", "step,reward\n1,0.1\n100000000000000000000,0.2\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = load(path)
    assert table.points["step"].tolist() == [1]
    assert issues(table)["bad_step"][:2] == ("dropped", 1)


@pytest.mark.parametrize("column", ["reward_mean", "mean_reward"])
def test_hand_written_loops_reward_columns_are_read_by_default(tmp_path, column):
    # public GRPO loops write their mean reward under these names (metrics.jsonl, train_log.csv)
    path = tmp_path / "train_log.csv"
    pd.DataFrame({"step": [1, 2, 3], column: [0.1, 0.2, 0.4], "reward_std": [0.3, 0.3, 0.2]}).to_csv(
        path, index=False
    )
    table = bayesgrpo.load_runs(path, warn=False)
    assert table.runs.loc[0, "reward_key"] == column
    np.testing.assert_allclose(table.points["reward"], [0.1, 0.2, 0.4])


def test_tinker_cookbook_metrics_take_the_training_reward_not_the_test_one(tmp_path):
    # the Tinker cookbook's metrics.jsonl (public runs): the evaluation reward sits beside it
    lines = [
        {"step": 0, "env/all/reward/total": 0.57, "test/env/all/reward/total": 0.9, "optim/entropy": 0.5},
        {"step": 1, "env/all/reward/total": 0.58, "optim/entropy": 0.4},
        {"step": 2, "env/all/reward/total": 0.67, "optim/entropy": 0.5},
    ]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    table = bayesgrpo.load_runs(path, warn=False)
    assert table.runs.loc[0, "reward_key"] == "env/all/reward/total"
    np.testing.assert_allclose(table.points["reward"], [0.57, 0.58, 0.67])


def test_trainer_log_dicts_without_a_step_take_their_row_order(tmp_path):
    # a callback writing on_log's dicts to JSONL (a public GRPO run): no step, an eval row between
    rows = [
        {"loss": 0.1, "reward": 0.2, "epoch": 0.01},
        {"loss": 0.2, "reward": 0.3, "epoch": 0.02},
        {"eval_loss": 0.5, "epoch": 0.02},
        {"loss": 0.1, "reward": 0.5, "epoch": 0.03},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    table = bayesgrpo.load_runs(path, warn=False)
    assert table.points["step"].tolist() == [1, 2, 3]
    np.testing.assert_allclose(table.points["reward"], [0.2, 0.3, 0.5])
    issue = next(i for i in table.report.issues if i.kind == "steps_from_row_order")
    assert "logging_steps=1 assumed" in issue.detail and issue.count == 3
    given = bayesgrpo.load_runs(path, warn=False, logging_steps=10)
    assert given.points["step"].tolist() == [10, 20, 30]


def test_a_table_without_a_step_that_is_no_trainer_log_is_still_refused(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("reward,other\n0.1,1\n0.2,2\n")
    with pytest.raises(LogReadError, match="no step column"):
        bayesgrpo.load_runs(path, warn=False)
