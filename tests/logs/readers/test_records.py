"""The shared cleaning every reader's records go through (readers/_records.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.errors import EmptyLogError, MalformedRecordError, UnknownMetricError
from bayesgrpo.logs.readers._records import RawRun, tidy_run


def raw(records: dict[str, list], **kwargs) -> RawRun:
    frame = pd.DataFrame(records)
    if "_loc" not in frame.columns:
        frame.insert(0, "_loc", np.arange(1, len(frame) + 1))
    return RawRun(run_id="r", source="f.log", format="test", records=frame, records_read=len(frame), **kwargs)


def kinds(result) -> dict[str, tuple[str, int]]:
    return {i.kind: (i.action, i.count) for i in result.account.issues}


def test_clean_input_is_kept_as_is():
    result = tidy_run(raw({"step": [1, 2, 3], "reward": [0.1, 0.2, 0.3], "kl": [0.0, 0.01, 0.02]}))
    assert result.points["step"].tolist() == [1, 2, 3]
    assert result.points["reward"].tolist() == [0.1, 0.2, 0.3]
    assert result.account.issues == []
    assert result.account.balanced and result.account.records_kept == 3


@pytest.mark.parametrize(
    ("records", "kind", "action", "count", "steps"),
    [
        # a resumed run logs steps 2 and 3 again: latest wins, earlier records dropped
        (
            {"step": [1, 2, 3, 2, 3, 4], "reward": [0.1, 0.2, 0.3, 0.25, 0.35, 0.4]},
            "duplicate_step",
            "dropped",
            2,
            [1, 2, 3, 4],
        ),
        # out of order without duplicates: sorted, reported
        ({"step": [1, 3, 2], "reward": [0.1, 0.3, 0.2]}, "out_of_order", "repaired", 1, [1, 2, 3]),
        # a step that is not a whole number, a negative one, a missing one
        (
            {"step": [1, 1.5, -2, None, 3], "reward": [0.1, 0.2, 0.3, 0.4, 0.5]},
            "bad_step",
            "dropped",
            3,
            [1, 3],
        ),
        # a record with no value at all
        (
            {"step": [1, 2, 3], "reward": [0.1, np.nan, 0.3], "kl": [0.0, np.nan, 0.1]},
            "no_values",
            "dropped",
            1,
            [1, 3],
        ),
    ],
)
def test_structural_repairs_are_reported(records, kind, action, count, steps):
    result = tidy_run(raw(records))
    assert result.points["step"].tolist() == steps
    assert kinds(result)[kind] == (action, count)
    assert result.account.balanced


def test_resumed_run_keeps_latest_values():
    result = tidy_run(raw({"step": [1, 2, 3, 2, 3, 4], "reward": [0.1, 0.2, 0.3, 0.25, 0.35, 0.4]}))
    assert result.points["reward"].tolist() == [0.1, 0.25, 0.35, 0.4]
    issue = next(i for i in result.account.issues if i.kind == "duplicate_step")
    assert issue.locations == ("line 2", "line 3")


def test_records_sharing_a_step_with_different_metrics_merge():
    # verl prints validation and training of step 0 on separate lines; TRL logs eval rows apart
    result = tidy_run(raw({"step": [0, 0, 1], "reward": [np.nan, 0.4, 0.5], "val": [0.52, np.nan, np.nan]}))
    assert result.points["step"].tolist() == [0, 1]
    assert result.points.loc[0, "val"] == 0.52 and result.points.loc[0, "reward"] == 0.4
    assert kinds(result)["merged_records"] == ("info", 1)
    assert result.account.records_kept == 3 and result.account.balanced


def test_strings_and_non_numbers_and_infinities():
    records = {
        "step": [1, 2, 3, 4],
        "reward": ["0.1", "np.float64(0.2)", "abc", np.inf],
        "kl": [0.0, 0.0, 0.1, 0.1],
    }
    frame = pd.DataFrame(records).astype({"reward": object})
    result = tidy_run(RawRun("r", "f", "test", frame.assign(_loc=[1, 2, 3, 4]), 4))
    assert result.points["reward"].tolist()[:2] == [0.1, 0.2]
    assert np.isnan(result.points["reward"].iloc[2]) and np.isnan(result.points["reward"].iloc[3])
    found = kinds(result)
    assert found["string_number"] == ("repaired", 2)
    assert found["non_numeric"] == ("repaired", 1)
    assert found["non_finite"] == ("repaired", 1)
    assert found["no_reward"] == ("info", 2)
    assert result.account.balanced


def test_strict_raises_with_the_place():
    with pytest.raises(MalformedRecordError, match="line 2"):
        tidy_run(raw({"step": [1, 1.5, 2], "reward": [0.1, 0.2, 0.3]}), strict=True)


def test_reward_choice_and_aliases():
    run = raw(
        {"step": [1, 2], "critic/score/mean": [0.1, 0.2], "actor/entropy": [1.0, 0.9]},
        reward_candidates=("critic/score/mean",),
        aliases={"actor/entropy": "entropy"},
    )
    result = tidy_run(run)
    assert {"reward", "entropy"} <= set(result.points.columns)
    assert result.metadata["reward_key"] == "critic/score/mean"
    # choose another metric by its log name or its canonical name
    assert tidy_run(run, reward="actor/entropy").points["reward"].tolist() == [1.0, 0.9]
    assert tidy_run(run, reward="entropy").points["reward"].tolist() == [1.0, 0.9]


def test_unknown_reward_lists_close_names():
    run = raw({"step": [1, 2], "critic/score/mean": [0.1, 0.2]}, reward_candidates=("critic/score/mean",))
    with pytest.raises(UnknownMetricError, match="critic/score/mean") as info:
        tidy_run(run, reward="critic/score/mena")
    assert "Did you mean" in str(info.value)


@pytest.mark.parametrize(
    "records", [{"step": [], "reward": []}, {"step": [1, 2], "reward": [np.nan, np.nan]}]
)
def test_no_usable_value_is_an_empty_log(records):
    with pytest.raises(EmptyLogError):
        tidy_run(raw(records))


def test_long_records_pivot_and_dedupe():
    frame = pd.DataFrame(
        {
            "_loc": [1, 2, 3, 4, 5, 6],
            "step": [1, 1, 2, 2, 2, 3],
            "metric": ["reward", "kl", "reward", "kl", "reward", "reward"],
            "value": [0.1, 0.0, 0.2, 0.01, 0.22, np.nan],
        }
    )
    result = tidy_run(RawRun("r", "f", "test", frame, 6, long=True, location_label="event"))
    assert result.points["step"].tolist() == [1, 2]
    assert result.points["reward"].tolist() == [0.1, 0.22]
    found = kinds(result)
    assert found["duplicate_step"] == ("dropped", 1)
    assert found["no_values"] == ("dropped", 1)
    assert result.account.records_kept == 4 and result.account.balanced
