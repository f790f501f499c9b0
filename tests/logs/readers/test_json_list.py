r"""A ``.json`` file holding one list of step records (a tracker's export) reads as JSON Lines do.

The fixture is an excerpt of a real export the reader refused ("not a trainer state: the JSON
is a list"): Dhiwakar1997/gluon_openenv ``trackio_logs/ticket_issuance-20260426-085256.json``
(blob b6187296), trackio's records as pandas writes them (``/`` escaped as ``\/``): a custom
``reward/mean`` log and TRL's ``train/`` log alternate, one of each a step.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import bayesgrpo
from bayesgrpo.errors import EmptyLogError, LogReadError, MalformedRecordError, TruncatedLogError
from bayesgrpo.logs.readers import detect_format

TRACKIO = r"""[
  {
    "reward\/mean":0.575,
    "reward\/ticket_issuance":0.575,
    "breakdown\/tool_sequence":0.025,
    "timestamp":"2026-04-26T09:06:11.515570+00:00",
    "step":0,
    "train\/loss":null,
    "train\/reward":null,
    "train\/reward_std":null,
    "train\/global_step":null
  },
  {
    "reward\/mean":null,
    "reward\/ticket_issuance":null,
    "breakdown\/tool_sequence":null,
    "timestamp":"2026-04-26T09:06:43.494412+00:00",
    "step":1,
    "train\/loss":0.0236,
    "train\/reward":0.5749999881,
    "train\/reward_std":0.1004842371,
    "train\/global_step":1.0
  },
  {
    "reward\/mean":0.5375,
    "reward\/ticket_issuance":0.5375,
    "breakdown\/tool_sequence":0.025,
    "timestamp":"2026-04-26T09:18:42.821816+00:00",
    "step":1,
    "train\/loss":null,
    "train\/reward":null,
    "train\/reward_std":null,
    "train\/global_step":null
  },
  {
    "reward\/mean":null,
    "reward\/ticket_issuance":null,
    "breakdown\/tool_sequence":null,
    "timestamp":"2026-04-26T09:19:15.255118+00:00",
    "step":2,
    "train\/loss":-0.0385,
    "train\/reward":0.5375000238,
    "train\/reward_std":0.1329607815,
    "train\/global_step":2.0
  }
]"""


def _write(tmp_path: Path, text: str, name: str = "ticket_issuance-20260426-085256.json") -> Path:
    folder = tmp_path / "trackio_logs"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def _kinds(table) -> dict[str, tuple[str, int]]:
    return {i.kind: (i.action, i.count) for i in table.report.issues}


def test_a_trackio_export_reads_as_a_table_of_its_steps(tmp_path):
    path = _write(tmp_path, TRACKIO)
    assert detect_format(path) == "jsonl"
    table = bayesgrpo.load_runs(tmp_path, warn=False)  # the folder, as a scan reads it
    run = table.runs.iloc[0]
    assert (run["run_id"], run["format"], run["reward_key"]) == (
        "ticket_issuance-20260426-085256",
        "jsonl",
        "train/reward",
    )
    points = table.points.dropna(subset=["reward"])
    assert points["step"].tolist() == [1, 2]
    np.testing.assert_allclose(points["reward"], [0.5749999881, 0.5375000238])
    np.testing.assert_allclose(table.points["reward/mean"], [0.575, 0.5375, np.nan])  # kept as a metric
    assert _kinds(table)["merged_records"] == ("info", 1)  # step 1: the custom log and TRL's, one row
    where = next(i for i in table.report.issues if i.kind == "non_numeric").locations
    assert where[0] == "list entry 1"  # places named by the list's entries
    assert table.report.balanced and table.report.records_read == 4


def test_a_log_history_saved_alone_is_still_a_trainer_state(tmp_path):
    history = [{"loss": 0.1, "reward": 0.2, "step": 1}, {"loss": 0.1, "reward": 0.3, "step": 2}]
    ppo = [{"objective\\/scores": 0.1, "eps": 1, "step": 1}]  # pandas' escaped slash
    assert detect_format(_write(tmp_path, json.dumps(history), "trajectory.json")) == "trl-state"
    assert detect_format(_write(tmp_path, json.dumps(ppo).replace("\\\\", "\\"), "ppo.json")) == "trl-state"
    # a list of other things (no step) is no log at all
    assert detect_format(_write(tmp_path, '[{"run": "a", "rows": 14, "metrics": ["x"]}]', "s.json")) is None


def test_a_list_cut_mid_entry_keeps_the_entries_before_and_reports_the_cut(tmp_path):
    path = _write(tmp_path, TRACKIO[: TRACKIO.index('"train\\/loss":-0.0385')])
    table = bayesgrpo.load_runs(path, warn=False)
    np.testing.assert_allclose(table.points["reward"].dropna(), [0.5749999881])
    assert _kinds(table)["bad_line"] == ("dropped", 1)
    assert table.report.balanced and table.report.records_read == 4
    with pytest.raises(TruncatedLogError, match="list entry 4"):
        bayesgrpo.load_runs(path, strict=True)


def test_a_list_cut_between_entries_loses_nothing_and_says_so(tmp_path):
    path = _write(tmp_path, TRACKIO[: TRACKIO.rindex("},") + 2])
    table = bayesgrpo.load_runs(path, warn=False)
    assert table.report.records_read == table.report.records_kept == 3
    assert _kinds(table)["truncated"] == ("info", 0)


def test_an_entry_that_is_no_object_is_dropped_and_reported(tmp_path):
    path = _write(tmp_path, TRACKIO.replace("[\n  {", '[\n  "oops",\n  {', 1))
    with pytest.warns(UserWarning, match="1 of 5 records dropped"):
        table = bayesgrpo.load_runs(path, format="jsonl")  # detected by its first entry: not this one
    assert next(i for i in table.report.issues if i.kind == "bad_line").locations == ("list entry 1",)
    with pytest.raises(MalformedRecordError, match="list entry 1"):
        bayesgrpo.load_runs(path, format="jsonl", strict=True)


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("[]", EmptyLogError, "empty JSON list"),
        ('[{"step": 1, "reward": 0.5} @@ {"step": 2}]', LogReadError, "not a readable JSON list"),
    ],
)
def test_unreadable_lists_are_clear_errors(tmp_path, text, error, message):
    path = _write(tmp_path, text, "log.json")
    with pytest.raises(error, match=message) as caught:
        bayesgrpo.load_runs(path, format="jsonl")
    assert str(path) in str(caught.value)


#: JSON Lines under a ``.json`` name, keyed by ``iteration``, in the layout of a real file the
#: reader refused ("no reader recognises this file"): harshbhatt7585/rlvr_blackjac
#: ``training_log.json`` (commit 4407a28d; its first two iterations, fewer columns, values rounded).
JSON_LINES_NAMED_JSON = """\
{"iteration": 1, "episodes": 50, "train/loss": 2.6595, "reward/mean": -0.2, "reward/std": 0.9798}
{"iteration": 2, "episodes": 50, "train/loss": 2.5251, "reward/mean": -0.28, "reward/std": 0.96}
"""


def test_json_lines_under_a_json_name_read_as_json_lines(tmp_path):
    path = tmp_path / "training_log.json"
    path.write_text(JSON_LINES_NAMED_JSON)
    assert detect_format(path) == "jsonl"
    table = bayesgrpo.load_runs([path], warn=False)
    np.testing.assert_array_equal(table.points["step"], [1, 2])
    np.testing.assert_allclose(table.points["reward"], [-0.2, -0.28])
    pretty = tmp_path / "config.json"  # one pretty-printed object is no log
    pretty.write_text(json.dumps({"iteration": 1, "reward/mean": 0.5}, indent=2))
    assert detect_format(pretty) is None
