"""The plain-table reader: the details of ten fixed bugs, beyond their regression tests.

Each case asserts the reported repair or the typed error naming the place, and that every
record read is kept or reported dropped.
"""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesgrpo
from bayesgrpo.errors import EmptyLogError, MalformedRecordError, TruncatedLogError, UnknownMetricError
from bayesgrpo.logs.readers import ReadOptions, Source, detect_format
from bayesgrpo.logs.readers._records import tidy_run
from bayesgrpo.logs.readers.tabular import _split_csv_line, read_table

BOM = b"\xef\xbb\xbf"


def load(path: Path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bayesgrpo.load_runs(path, **kwargs)


def issues(table) -> dict[str, tuple[str, int, tuple[str, ...]]]:
    return {i.kind: (i.action, i.count, i.locations) for i in table.report.issues}


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def raw_runs(path: Path, fmt: str, **options):
    return read_table(Source(fmt, (path,), path.stem), ReadOptions(**options))


# ---------------------------------------------------------------- byte-order mark


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("t.csv", BOM + b"step,reward\n1,0.1\n2,0.2\n"),
        ("t.jsonl", BOM + b'{"step": 1, "reward": 0.1}\n{"step": 2, "reward": 0.2}\n'),
    ],
)
def test_byte_order_mark_is_not_part_of_the_first_name(tmp_path, name, content):
    path = write(tmp_path, name, content)
    assert detect_format(path) == name.split(".")[1]
    table = load(path)
    assert table.points["step"].tolist() == [1, 2] and not table.report.has_changes
    assert table.report.balanced


# ---------------------------------------------------------------- column mapping


def test_table_step_column_is_kept_as_step_logged_when_another_is_mapped(tmp_path):
    path = write(tmp_path, "t.csv", "step,global_step,reward\n1,10,0.1\n2,20,0.2\n")
    table = load(path, columns={"step": "global_step"})
    assert table.points["step"].tolist() == [10, 20]
    assert table.points["step_logged"].tolist() == [1.0, 2.0]
    assert issues(table)["renamed_column"][0] == "info" and not table.report.has_changes
    assert table.report.balanced
    raws = raw_runs(path, "csv", columns={"step": "global_step"})
    assert "step_logged" in raws[0].records.columns and tidy_run(raws[0]).account.balanced


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_every_mapping_entry_must_name_a_column(tmp_path, fmt):
    content = (
        "step,reward,kl_div\n1,0.1,0.01\n" if fmt == "csv" else '{"step": 1, "reward": 0.1, "kl_div": 0.01}\n'
    )
    path = write(tmp_path, f"t.{fmt}", content)
    with pytest.raises(UnknownMetricError) as info:
        load(path, columns={"kl": "kl_dvi"})
    message = str(info.value)
    assert "'kl_dvi'" in message and "columns['kl']" in message and str(path) in message
    assert "'kl_div'" in message and "_loc" not in message
    assert load(path, columns={"kl": "kl_div"}).points["kl"].tolist() == [0.01]


# ---------------------------------------------------------------- records without a run id

NO_RUN_ID = [
    (
        "jsonl missing key",
        "t.jsonl",
        '{"run_id": "a", "step": 1, "reward": 0.1}\n{"step": 2, "reward": 0.2}\n{"run_id": "b", "step": 3, '
        '"reward": 0.3}\n',
        "line 2",
    ),
    (
        "jsonl null",
        "t.jsonl",
        '{"run_id": "a", "step": 1, "reward": 0.1}\n{"run_id": null, "step": 2, "reward": 0.2}\n{"run_id": '
        '"b", "step": 3, "reward": 0.3}\n',
        "line 2",
    ),
    ("csv blank cell", "t.csv", "run_id,step,reward\na,1,0.1\n ,2,0.2\nb,3,0.3\n", "line 3"),
]


@pytest.mark.parametrize(
    ("name", "content", "location"), [c[1:] for c in NO_RUN_ID], ids=[c[0] for c in NO_RUN_ID]
)
def test_record_without_run_id_is_dropped_and_reported_on_the_first_run(tmp_path, name, content, location):
    path = write(tmp_path, name, content)
    table = load(path)
    assert table.run_ids == ["a", "b"]
    assert issues(table)["no_run_id"] == ("dropped", 1, (location,))
    first, second = table.report.sources
    assert (first.records_read, first.records_kept, second.records_read) == (2, 1, 1)
    assert table.report.records_read == 3 and table.report.balanced
    raws = raw_runs(path, name.split(".")[1])
    assert sum(r.records_read for r in raws) == 3 and all(tidy_run(r).account.balanced for r in raws)
    with pytest.raises(MalformedRecordError, match=location) as info:
        load(path, strict=True)
    assert str(path) in str(info.value)


def test_parquet_record_without_run_id_and_numeric_run_ids(tmp_path):
    path = tmp_path / "t.parquet"
    pd.DataFrame(
        {"run_id": [7, None, 7, 8], "step": [1, 2, 3, 1], "reward": [0.1, 0.2, 0.3, 0.4]}
    ).to_parquet(path)
    table = load(path)
    assert table.run_ids == ["7.0", "8.0"]  # the column is float once it holds a null
    assert issues(table)["no_run_id"] == ("dropped", 1, ("row 2",))
    assert table.report.balanced


def test_no_record_with_a_run_id_is_an_empty_log_error(tmp_path):
    path = write(
        tmp_path, "t.jsonl", '{"run_id": "a", "step": 1, "reward": 0.1}\n'.replace('"a"', "null") * 2
    )
    with pytest.raises(EmptyLogError, match="run id") as info:
        load(path)
    assert str(path) in str(info.value)


def test_run_ids_of_any_json_type_group_without_error(tmp_path):
    path = write(
        tmp_path,
        "t.jsonl",
        '{"run_id": [1], "step": 1, "reward": 0.1}\n{"run_id": {"a": 1}, "step": 1, "reward": 0.2}\n',
    )
    table = load(path)
    assert table.run_ids == ["[1]", "{'a': 1}"] and table.report.balanced


# ---------------------------------------------------------------- Parquet index


@pytest.mark.parametrize(
    ("frame", "steps"),
    [
        (pd.DataFrame({"step": [5, 6], "reward": [0.1, 0.2]}).set_index("step"), [5, 6]),
        (pd.DataFrame({"step": [5, 6], "reward": [0.1, 0.2]}, index=[10, 11]), [5, 6]),  # unnamed: not data
    ],
    ids=["named index", "unnamed index"],
)
def test_parquet_named_index_is_a_column_unnamed_is_not(tmp_path, frame, steps):
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    table = load(path)
    assert table.points["step"].tolist() == steps
    assert list(table.points.columns) == ["run_id", "step", "reward"] and table.report.balanced


# ---------------------------------------------------------------- CSV parsed line by line


@pytest.mark.parametrize(
    "line",
    [
        "1,0.1,0.01\n",
        "1,0.1,0.01",
        "\n",
        ",,\n",
        '"1","0.1","a,b"\n',
        '1,"x ""quoted""",2\n',
        '1,0."1,2\n',
        "a\x00b,c\n",
        " 1 , 2 \n",
    ],
)
def test_split_csv_line_matches_csv_reader(line):
    expected = next(csv.reader([line], strict=True), [])
    got = _split_csv_line(line)
    assert got == expected or (expected == [] and got == [""])  # an empty line either way


STRAY = [
    # (id, content, kind, locations, strict error, records read, steps kept)
    (
        "stray quote mid-file",
        'step,reward\n1,0.1\n2,"0.2\n3,0.3\n4,0.4\n',
        "bad_line",
        ("line 3",),
        MalformedRecordError,
        4,
        [1, 3, 4],
    ),
    (
        "text after a closing quote",
        'step,reward\n1,0.1\n2,"0.2"x\n3,0.3\n',
        "bad_line",
        ("line 3",),
        MalformedRecordError,
        3,
        [1, 3],
    ),
    (
        "cut inside a quoted last cell",
        'step,reward\n1,0.1\n2,0.2\n3,"0.',
        "truncated",
        ("line 4",),
        TruncatedLogError,
        3,
        [1, 2],
    ),
    (
        "two bad lines, the last one cut",
        "step,reward\n1,0.1\n2\n3,0.3\n4",
        "bad_line",
        ("line 3",),
        MalformedRecordError,
        4,
        [1, 3],
    ),
    (
        "blank lines keep numbering",
        'step,reward\n\n1,0.1\n\n2,"0.2\n3,0.3\n',
        "bad_line",
        ("line 5",),
        MalformedRecordError,
        3,
        [1, 3],
    ),
]


@pytest.mark.parametrize(
    ("content", "kind", "locations", "strict_error", "n_read", "steps"),
    [c[1:] for c in STRAY],
    ids=[c[0] for c in STRAY],
)
def test_bad_csv_lines_are_dropped_alone_with_their_numbers(
    tmp_path, content, kind, locations, strict_error, n_read, steps
):
    path = write(tmp_path, "t.csv", content)
    table = load(path)
    assert table.points["step"].tolist() == steps
    assert issues(table)[kind][2] == locations
    assert table.report.records_read == n_read and table.report.balanced
    with pytest.raises(strict_error) as info:
        load(path, strict=True)
    assert str(path) in str(info.value) and locations[0] in str(info.value)


def test_bad_and_cut_lines_are_reported_apart(tmp_path):
    path = write(tmp_path, "t.csv", "step,reward\n1,0.1\n2\n3,0.3\n4")
    found = issues(load(path))
    assert found["bad_line"] == ("dropped", 1, ("line 3",)) and found["truncated"] == (
        "dropped",
        1,
        ("line 5",),
    )


def test_csv_header_that_is_not_valid_csv_is_an_error_naming_the_line(tmp_path):
    path = write(tmp_path, "t.csv", '\n"step,reward\n1,0.1\n')
    with pytest.raises(MalformedRecordError, match="header") as info:
        load(path)
    assert "line 2" in str(info.value)


def test_last_line_without_line_end_is_kept_with_a_note(tmp_path):
    path = write(tmp_path, "t.csv", "step,reward,kl\n1,0.1,0.01\n2,0.2,0.02\n3,0.3,0.0")
    for strict in (False, True):
        table = load(path, strict=strict)
        assert table.points["step"].tolist() == [1, 2, 3]
        assert issues(table)["no_line_end"] == ("info", 1, ("line 4",))
        assert not table.report.has_changes and table.report.balanced
    assert "no_line_end" not in issues(load(write(tmp_path, "u.csv", "step,reward\n1,0.1\n")))


def test_a_large_csv_keeps_right_line_numbers(tmp_path):
    # speed is measured in benchmarks/read_speed.py, not here
    n = 50_000
    path = tmp_path / "big.csv"
    pd.DataFrame({"step": np.arange(1, n + 1), "reward": np.linspace(0, 1, n)}).to_csv(path, index=False)
    (raw,) = raw_runs(path, "csv")
    assert raw.records_read == n and raw.records["_loc"].iloc[-1] == n + 1


# ---------------------------------------------------------------- JSON Lines


@pytest.mark.parametrize(
    ("content", "error", "location"),
    [
        ('{"step": 1, "reward": 0.1}\n{"step": 2, "rew', TruncatedLogError, "line 2"),
        (
            '{"step": 1, "reward": 0.1}\n{"step": 2, "rew\n{"step": 3, "reward": 0.3}\n',
            MalformedRecordError,
            "line 2",
        ),
        ('{"step": 1, "reward": 0.1}\n{"step": 2, "rew\n', MalformedRecordError, "line 2"),
    ],
    ids=["cut last line", "bad middle line", "bad last line with line end"],
)
def test_jsonl_strict_errors(tmp_path, content, error, location):
    path = write(tmp_path, "t.jsonl", content)
    with pytest.raises(error) as info:
        load(path, strict=True)
    assert type(info.value) is error and str(path) in str(info.value) and location in str(info.value)
    table = load(path)
    assert issues(table)["bad_line"][2] == (location,) and table.report.balanced


@pytest.mark.parametrize("line", ["1" * 5000, "[" * 100_000], ids=["too many digits", "too deep"])
def test_jsonl_lines_json_refuses_are_bad_lines(tmp_path, line):
    path = write(tmp_path, "t.jsonl", '{"step": 1, "reward": 0.1}\n' + line + "\n")
    table = load(path)
    assert issues(table)["bad_line"] == ("dropped", 1, ("line 2",)) and table.report.balanced


# ---------------------------------------------------------------- shared cleaning


def test_second_log_name_of_a_canonical_metric_keeps_its_own_name(tmp_path):
    path = write(
        tmp_path, "t.csv", "step,reward,response_length/mean,completions/mean_length\n1,0.1,6,5\n2,0.2,6,5\n"
    )
    points = load(path).points
    assert points["completion_length"].tolist() == [
        5,
        5,
    ]  # completions/mean_length comes first among the aliases
    assert points["response_length/mean"].tolist() == [6, 6]


@pytest.mark.parametrize("step", ["9223372036854775808", "1e20", "100000000000000000000"])
def test_steps_beyond_int64_are_bad_steps(tmp_path, step):
    path = write(tmp_path, "t.csv", f"step,reward\n1,0.1\n{step},0.2\n")
    table = load(path)
    assert table.points["step"].tolist() == [1]
    assert issues(table)["bad_step"] == ("dropped", 1, ("line 3",)) and table.report.balanced
    with pytest.raises(MalformedRecordError, match="line 3"):
        load(path, strict=True)
