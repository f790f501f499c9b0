"""verl's file logger (``trainer.logger=['file']``, JSON Lines ``{"step": N, "data": {...}}``):
the ``verl-jsonl`` reader, its writer, detection, damaged files, ``bayesgrpo watch`` on such a
file, the ``log_history`` filing shared by the TRL reader and the TRL callback, and metadata
overrides (noted only when a given value differs from the stated one).

Every case that drops or repairs something checks the accounting invariant: records read ==
records kept + records dropped (``report.balanced``).
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

import bayesgrpo
from bayesgrpo.errors import EmptyLogError, MalformedRecordError, ReadWarning, TruncatedLogError
from bayesgrpo.interfaces.cli import main
from bayesgrpo.interfaces.watch import LogFollower, Watcher
from bayesgrpo.interfaces.watch import watcher as watch
from bayesgrpo.logs.readers import ReadOptions, Source, detect_format
from bayesgrpo.logs.readers.trl.state import history_store
from bayesgrpo.logs.readers.verl.jsonl import flatten_metrics, is_verl_jsonl, read_verl_jsonl
from bayesgrpo.logs.report import ReadIssue
from bayesgrpo.logs.table import RunsTable
from bayesgrpo.logs.writers.trl import write_trainer_state
from bayesgrpo.logs.writers.verl import verl_jsonl_line, write_verl_jsonl
from bayesgrpo.questions.stopping import CurveDraws, PlateauRule

REWARD = "critic/score/mean"
VAL = "val-core/openai/gsm8k/reward/mean@1"


# ---------------------------------------------------------------------------------------------
# helpers


def load(path: Path, **kwargs: Any) -> RunsTable:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReadWarning)
        return bayesgrpo.load_runs(path, **kwargs)


def only_issue(table: RunsTable, kind: str) -> ReadIssue:
    found = [i for i in table.report.issues if i.kind == kind]
    assert len(found) == 1, table.report.summary()
    return found[0]


def metrics(step: int, reward: Any = None) -> dict[str, Any]:
    """One train step's metrics under verl's names (a subset, verl's order)."""
    return {
        "actor/entropy": 0.35 - step / 1000,
        "actor/kl_loss": 0.001 * step,
        "actor/pg_loss": -0.03,
        "training/global_step": step,
        REWARD: 0.01 * step if reward is None else reward,
        "response_length/mean": 200.0 + step,
    }


def write_lines(path: Path, lines: list[str], final_newline: bool = True) -> Path:
    path.write_text("\n".join(lines) + ("\n" if final_newline else ""), encoding="utf-8")
    return path


def good(step: int, **kwargs: Any) -> str:
    return verl_jsonl_line(step, metrics(step), **kwargs)


def points_frame(n: int = 40, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "step": np.arange(1, n + 1),
            "reward": rng.uniform(0, 1, n),
            "kl": rng.uniform(0, 0.1, n),
            "entropy": rng.uniform(0.1, 1, n),
            "completion_length": rng.uniform(100, 500, n),
            "val_reward": np.where(np.arange(1, n + 1) % 10 == 0, rng.uniform(0, 1, n), np.nan),
        }
    )


# ---------------------------------------------------------------------------------------------
# writer -> reader round trips, detection


@pytest.mark.parametrize("style", ["json", "orjson"])
def test_round_trip_is_exact(tmp_path, style):
    points = points_frame()
    path = write_verl_jsonl(tmp_path / "run.jsonl", points, style=style)
    first = path.read_text().splitlines()[0]
    assert first.startswith('{"step": 1, "data": {' if style == "json" else '{"step":1,"data":{')
    assert detect_format(path) == "verl-jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = bayesgrpo.load_runs(path)
    assert table.report.records_read == 40 and table.report.records_dropped == 0
    assert table.runs.loc[0, "format"] == "verl-jsonl" and table.runs.loc[0, "reward_key"] == REWARD
    got = table.points
    assert got["step"].tolist() == list(range(1, 41))
    for column in ("reward", "kl", "entropy", "completion_length", "val_reward"):
        np.testing.assert_array_equal(got[column].to_numpy(), points[column].to_numpy())  # float repr: exact


@pytest.mark.parametrize(
    "name, text, expected",
    [
        ("run.jsonl", '{"step": 1, "data": {"critic/score/mean": 0.1}}\n', "verl-jsonl"),
        (
            "run.jsonl",
            '\n{"step":1,"data":{"critic/score/mean":0.1}}\n',
            "verl-jsonl",
        ),  # orjson, blank first line
        (
            "metrics.log",
            '{"step": 1, "data": {"critic/score/mean": 0.1}}\n',
            "verl-jsonl",
        ),  # VERL_FILE_LOGGER_PATH
        ("metrics", '{"step": 1, "data": {"critic/score/mean": 0.1}}\n', "verl-jsonl"),
        ("metrics.json", '{"step": 1, "data": {"critic/score/mean": 0.1}}\n', "verl-jsonl"),
        ("run.jsonl", '{"step": 1, "data": {"critic/sc', "verl-jsonl"),  # first line still being written
        ("run.jsonl", '{"step": 1, "da', "jsonl"),  # too little to tell
        ("run.jsonl", "", "jsonl"),  # empty: as before
        ("run.jsonl", '{"step": 1, "reward": 0.1}\n', "jsonl"),  # a plain table
        ("run.jsonl", '{"data": 1, "step": 1}\n', "jsonl"),
        ("trainer_state.json", '{"log_history": []}', "trl-state"),
    ],
)
def test_detect_format(tmp_path, name, text, expected):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    assert detect_format(path) == expected


def test_plain_jsonl_reader_reads_verl_records_as_verl(tmp_path):
    """A file detected as ``jsonl`` while empty (a watcher's first look), or ``format='jsonl'``."""
    path = write_verl_jsonl(tmp_path / "run.jsonl", points_frame(10))
    table = load(path, format="jsonl")
    assert table.runs.loc[0, "format"] == "verl-jsonl" and len(table.points) == 10
    assert table.report.sources[0].format == "verl-jsonl"
    assert "entropy" in table.points.columns


def test_canonical_names_and_the_reward_choice(tmp_path):
    rows = [(s, {**metrics(s), VAL: 0.5 + s / 100} if s % 5 == 0 else metrics(s)) for s in range(1, 11)]
    path = write_verl_jsonl(tmp_path / "run.jsonl", rows)
    table = load(path)
    for canonical in ("entropy", "kl", "completion_length", "val_reward", "loss"):
        assert canonical in table.points.columns, canonical
    np.testing.assert_allclose(table.points["reward"], [0.01 * s for s in range(1, 11)])
    by_val = load(path, reward=VAL)
    assert by_val.points.dropna(subset=["reward"])["step"].tolist() == [5, 10]
    assert only_issue(by_val, "no_reward").action == "info"  # the other steps keep their metrics


def test_flatten_metrics():
    flat = flatten_metrics(
        {"a": {"b": 1, "c": {"d": 2.5}}, "ok": True, "no": False, "gone": None, "step": 3, "t": "x"}
    )
    assert flat["a/b"] == 1 and flat["a/c/d"] == 2.5 and flat["ok"] == 1.0 and flat["no"] == 0.0
    assert math.isnan(flat["gone"]) and flat["step_logged"] == 3 and flat["t"] == "x"
    assert is_verl_jsonl([{"step": 1, "data": {}}]) and not is_verl_jsonl([{"step": 1, "reward": 0.1}])
    assert not is_verl_jsonl([])


def test_writer_streams_to_a_handle_line_by_line(tmp_path):
    path = tmp_path / "live.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        for step in range(1, 6):
            write_verl_jsonl(handle, [(step, metrics(step))], flush=True)
            table = load(path)
            assert table.points["step"].tolist() == list(range(1, step + 1)) and table.report.balanced
        handle.write('{"step": 6, "data": {"critic/score/mean": 0.0')  # being written
        handle.flush()
        table = load(path)
        assert table.points["step"].tolist() == [1, 2, 3, 4, 5]
        assert only_issue(table, "truncated").locations == ("line 6",)


def test_writer_rejects_an_unknown_style():
    with pytest.raises(ValueError, match="orjson"):
        verl_jsonl_line(1, {}, style="yaml")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# damaged files: every record kept or reported, with where and why


# fmt: off
CASES = [
    # (name, lines, final newline, kind, action, count, locations, kept steps, strict error)
    ("cut last line", [good(1), good(2), '{"step": 3, "data": {"critic/score/me'], False,
     "truncated", "dropped", 1, ("line 3",), [1, 2], TruncatedLogError),
    ("not JSON mid-file", [good(1), "Traceback (most recent call last):", good(3)], True,
     "bad_line", "dropped", 1, ("line 2",), [1, 3], MalformedRecordError),
    ("data not an object", [good(1), '{"step": 2, "data": "oops"}', good(3)], True,
     "no_data", "dropped", 1, ("line 2",), [1, 3], MalformedRecordError),
    ("data missing", [good(1), '{"step": 2}', good(3)], True,
     "no_data", "dropped", 1, ("line 2",), [1, 3], MalformedRecordError),
    ("step missing", [good(1), '{"data": {"critic/score/mean": 0.5}}', good(3)], True,
     "bad_step", "dropped", 1, ("line 2",), [1, 3], MalformedRecordError),
    ("step as text", [good(1), verl_jsonl_line("two", metrics(2)), good(3)], True,
     "bad_step", "dropped", 1, ("line 2",), [1, 3], MalformedRecordError),
    ("number as text", [good(1), verl_jsonl_line(2, metrics(2, "0.02")), good(3)], True,
     "string_number", "repaired", 1, ("line 2",), [1, 2, 3], MalformedRecordError),
    ("text as number", [good(1), verl_jsonl_line(2, metrics(2, "abc")), good(3)], True,
     "non_numeric", "repaired", 1, ("line 2",), [1, 2, 3], MalformedRecordError),
    ("Infinity", [good(1), verl_jsonl_line(2, metrics(2, math.inf)), good(3)], True,
     "non_finite", "repaired", 1, ("line 2",), [1, 2, 3], MalformedRecordError),
    ("every value NaN",
     [good(1), verl_jsonl_line(2, {REWARD: math.nan, "actor/entropy": math.nan}), good(3)], True,
     "no_values", "dropped", 1, ("line 2",), [1, 3], MalformedRecordError),
    ("out of order", [good(1), good(2), good(5), good(3), good(4)], True,
     "out_of_order", "repaired", 1, ("line 4",), [1, 2, 3, 4, 5], MalformedRecordError),
    ("resumed run", [good(s) for s in (1, 2, 3, 4, 2, 3, 4, 5)], True,
     "duplicate_step", "dropped", 3, ("line 2", "line 3", "line 4"), [1, 2, 3, 4, 5], MalformedRecordError),
]
# fmt: on


@pytest.mark.parametrize(
    "lines, final_newline, kind, action, count, where, kept, error",
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_damaged_file(tmp_path, lines, final_newline, kind, action, count, where, kept, error):
    path = write_lines(tmp_path / "run.jsonl", lines, final_newline)
    table = load(path)
    assert table.report.balanced, table.report.summary()
    assert table.report.records_read == len(lines)
    issue = only_issue(table, kind)
    assert (issue.action, issue.count, issue.locations) == (action, count, where)
    assert table.points["step"].tolist() == kept
    with pytest.raises(error, match=where[0]):
        bayesgrpo.load_runs(path, strict=True)


def test_resumed_run_later_values_win(tmp_path):
    rows = [(s, metrics(s)) for s in range(1, 11)] + [(s, metrics(s, 0.5 + s / 100)) for s in range(6, 16)]
    table = load(write_verl_jsonl(tmp_path / "run.jsonl", rows))
    points = table.points.set_index("step")["reward"]
    assert list(points.index) == list(range(1, 16))
    np.testing.assert_allclose(points.loc[1:5], [0.01 * s for s in range(1, 6)])
    np.testing.assert_allclose(points.loc[6:], [0.5 + s / 100 for s in range(6, 16)])
    assert table.report.records_read == 20 and table.report.records_dropped == 5


@pytest.mark.parametrize("style", ["json", "orjson"])
def test_nan_reward_keeps_the_step_and_is_noted(tmp_path, style):
    """NaN is written ``NaN`` by json.dumps, ``null`` by orjson: missing either way, and noted."""
    rows = [(1, metrics(1)), (2, metrics(2, math.nan)), (3, metrics(3))]
    path = write_verl_jsonl(tmp_path / "run.jsonl", rows, style=style)
    assert ("NaN" if style == "json" else "null") in path.read_text().splitlines()[1]
    table = load(path)
    assert table.report.balanced and table.points["step"].tolist() == [1, 2, 3]
    assert np.isnan(table.points.set_index("step").loc[2, "reward"])
    nan = only_issue(table, "nan_value")
    assert nan.action == "info" and nan.locations == ("line 2",)
    assert only_issue(table, "no_reward").locations == ("step 2",)


def test_extra_top_level_keys_are_noted_not_read(tmp_path):
    lines = [good(1), '{"step": 2, "data": {"critic/score/mean": 0.2}, "time": 17.5}', good(3)]
    table = load(write_lines(tmp_path / "run.jsonl", lines))
    issue = only_issue(table, "extra_keys")
    assert issue.action == "info" and issue.locations == ("line 2",) and "time" in issue.detail
    assert "time" not in table.points.columns


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "empty file"),
        ("\n\n", "empty file"),
        ('{"step": 1, "data": {"critic/score/mean": 0.1', "1 read, 1 dropped"),  # only a cut line
    ],
)
def test_nothing_to_read(tmp_path, text, match):
    path = tmp_path / "run.jsonl"
    path.write_text(text)
    with pytest.raises(EmptyLogError, match=match):
        bayesgrpo.load_runs(path, format="verl-jsonl")


def test_reader_function_on_one_file(tmp_path):
    path = write_verl_jsonl(tmp_path / "run.jsonl", points_frame(5))
    (raw,) = read_verl_jsonl(Source("verl-jsonl", (path,), "run"), ReadOptions(run_id="named"))
    assert raw.run_id == "named" and raw.format == "verl-jsonl" and raw.records_read == 5
    assert raw.records["_loc"].tolist() == [1, 2, 3, 4, 5]
    assert raw.aliases["actor/entropy"] == "entropy"


# ---------------------------------------------------------------------------------------------
# bayesgrpo watch follows the file as verl writes it


class StubForecaster:
    """A fixed exponential-saturation posterior (as tests/interfaces/test_watch.py): fast, closed forms."""

    asymptote = np.linspace(0.5, 0.7, 101)

    def update(self, run, *, horizon):
        n = len(self.asymptote)
        draws = CurveDraws(
            curve="exp",
            params={"r0": np.full(n, 0.1), "asymptote": self.asymptote, "tau": np.full(n, 40.0)},
            step_scale=1.0,
            reward_scale=1.0,
            horizon_step=horizon,
            run_ids=(run.run_ids[0],),
        )
        return SimpleNamespace(curve_draws=draws, posterior=SimpleNamespace(pareto_k=0.1))


def test_watch_follows_a_file_logger_jsonl_as_it_grows(tmp_path, monkeypatch, capsys):
    path = tmp_path / "exp.jsonl"
    watcher = Watcher(path, rule=PlateauRule(eps=0.01, prob=0.9), population=StubForecaster(), horizon=40)
    assert watcher.poll()[0].state == "waiting"  # verl has not opened it yet
    seen = []
    points = points_frame(40)
    with open(path, "w", encoding="utf-8") as handle:  # verl opens it with "w" at start-up
        assert watcher.poll()[0].state == "waiting"  # empty: detected as plain jsonl, read as verl later
        for k in range(0, 40, 8):
            rows = points.iloc[k : k + 8].itertuples()
            text = "".join(verl_jsonl_line(int(r.step), {REWARD: r.reward}) + "\n" for r in rows)
            cut = len(text) - 15  # buffered writes: the last line lands in two pieces
            handle.write(text[:cut])
            handle.flush()
            (status,) = watcher.poll()
            seen.append(status.n_steps)
            handle.write(text[cut:])
            handle.flush()
    (status,) = watcher.poll()
    assert seen == [7, 15, 23, 31, 39]  # every complete line, never the cut one
    assert (
        status.state == "ok"
        and status.n_steps == 40
        and status.step == 40
        and status.decision in ("stop", "continue", "undecided")
    )
    (follower,) = watcher.followers
    assert isinstance(follower, LogFollower) and follower.source.format == "jsonl"  # fixed while empty
    assert follower.table.runs.loc[0, "format"] == "verl-jsonl"
    np.testing.assert_array_equal(follower.table.points["reward"], points["reward"])

    monkeypatch.setattr(watch, "live_forecaster", lambda population, random_seed: StubForecaster())
    assert main(["watch", "--once", "--json", "--horizon", "60", str(path)]) == 0
    (row,) = json.loads(capsys.readouterr().out)["runs"]
    assert (
        row["run_id"] == "exp" and row["n_steps"] == 40 and row["state"] == "ok" and row["horizon_step"] == 60
    )


# ---------------------------------------------------------------------------------------------
# log_history filing, shared by read_trainer_state and the TRL callback


HISTORY = [
    {"loss": 1.0, "reward": 0.1, "epoch": 0.1, "step": 1},
    {"eval_reward": 0.2, "epoch": 0.1, "step": 1},  # repeats the training row's epoch
    "not an object",
    {"step": 2},  # an entry with no metric
    {"loss": 0.9, "reward": 0.2, "epoch": 0.2, "bayesgrpo/p_plateau": 0.3, "step": 3},
    {"train_runtime": 5.0, "train_loss": 0.95, "bayesgrpo/stop": 0.0, "epoch": 0.2, "step": 3},
]


def test_history_store_files_entries_as_the_reader():
    filed = history_store(HISTORY)
    assert filed.not_objects == [3] and filed.summary_entries == [6]
    assert filed.summary == {"train_runtime": 5.0, "train_loss": 0.95, "bayesgrpo/stop": 0.0}
    frame = filed.store.frame()
    assert frame["_loc"].tolist() == [1, 2, 4, 5]  # the metric-less entry is a record: tidy_run reports it
    assert frame["epoch"].iloc[0] == 0.1 and np.isnan(frame["epoch"].iloc[1])  # the eval row's copy left out
    assert frame["bayesgrpo/p_plateau"].iloc[3] == 0.3


@pytest.mark.parametrize(
    "keep, locs, columns",
    [
        (None, [1, 2, 5], {"loss", "reward", "epoch", "eval_reward"}),
        (frozenset({"reward"}), [1, 5], {"reward"}),
    ],
)
def test_history_store_for_the_callback(keep, locs, columns):
    filed = history_store(HISTORY, keep, exclude_prefix="bayesgrpo/")
    frame = filed.store.frame()
    assert frame["_loc"].tolist() == locs  # entries left with no metric are skipped
    assert set(frame.columns) - {"_loc", "step"} == columns
    assert filed.summary == {"train_runtime": 5.0, "train_loss": 0.95}


def test_history_store_strict_names_the_entry():
    with pytest.raises(MalformedRecordError, match=r"state\.json, log_history entry 3: .*str"):
        history_store(HISTORY, strict=True, path="state.json")


# ---------------------------------------------------------------------------------------------
# metadata given over what a log states: an override is noted only when the value differs


@pytest.mark.parametrize("given, noted", [(250, False), (250.0, False), ("250", False), (300, True)])
def test_a_given_value_equal_to_the_stated_one_is_no_override(tmp_path, given, noted):
    folder = tmp_path / "run"
    folder.mkdir()
    write_trainer_state(
        folder / "trainer_state.json", [{"step": s, "reward": 0.1 * s} for s in (1, 2, 3)], max_steps=250
    )
    table = load(folder / "trainer_state.json", metadata={"run": {"total_steps": given}})
    overrides = [n for n in table.report.notes if n.kind == "metadata_override"]
    assert bool(overrides) is noted
    assert float(table.runs.loc[0, "total_steps"]) == float(given)
