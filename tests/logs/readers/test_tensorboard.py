"""The TensorBoard event-file reader (``bayesgrpo.logs.readers.tensorboard``) and writer.

Event files are written with tensorboard's own ``EventFileWriter`` (what torch's
``SummaryWriter`` uses under verl and the transformers/TRL callback), then read back or damaged
byte by byte. Every case that drops or repairs something checks the accounting invariant:
records read == records kept + records dropped (``report.balanced``).
"""

from __future__ import annotations

import struct
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
from tensorboard.compat.proto import event_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as reference_masked_crc32c

import bayesgrpo
from bayesgrpo.errors import EmptyLogError, LogReadError, MalformedRecordError, TruncatedLogError
from bayesgrpo.logs.readers import ReadOptions, Source, detect_format, discover
from bayesgrpo.logs.readers.tensorboard import crc as tb_crc
from bayesgrpo.logs.readers.tensorboard import records as tb_records
from bayesgrpo.logs.readers.tensorboard.crc import masked_crc32c
from bayesgrpo.logs.readers.tensorboard.reader import (
    REWARD_CANDIDATES,
    read_event_files,
    read_tensorboard,
    tensorboard_aliases,
)
from bayesgrpo.logs.readers.tensorboard.records import event_file_order, tensor_scalar
from bayesgrpo.logs.readers.verl.lines import metric_aliases
from bayesgrpo.logs.writers.tensorboard import (
    append_events,
    frame_records,
    histogram_value,
    image_value,
    scalar_value,
    summary_event,
    text_value,
    write_events,
    write_large_tensorboard,
    write_tensorboard,
)

ROOT = Path(__file__).resolve().parents[3]
REAL = ROOT / "data" / "tensorboard"
REAL_RUN = REAL / "verl_asyncRA_q3b_fsdp_base"
VAL_TAG = "val-core/openai/gsm8k/reward/mean@1"


# ---------------------------------------------------------------------------------------------
# helpers


def _points(n: int = 20, seed: int = 0, first_step: int = 1) -> pd.DataFrame:
    """A verl-like run: train reward, entropy, KL loss and a sparse validation reward."""
    rng = np.random.default_rng(seed)
    steps = np.arange(first_step, first_step + n)
    reward = 0.3 + 0.5 * (1 - np.exp(-steps / 8)) + rng.normal(0, 0.02, n)
    validation = np.where(steps % 5 == 0, reward + 0.05, np.nan)
    return pd.DataFrame(
        {
            "step": steps,
            "critic/score/mean": reward,
            "actor/entropy": rng.uniform(0.2, 1.0, n),
            "actor/kl_loss": rng.uniform(0.0, 0.01, n),
            VAL_TAG: validation,
        }
    )


def _n_values(points: pd.DataFrame) -> int:
    return int(points.drop(columns="step").notna().to_numpy().sum())


def _load(path: Path, **kwargs) -> bayesgrpo.RunsTable:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bayesgrpo.load_runs(path, **kwargs)


def _records(data: bytes) -> list[tuple[int, int]]:
    """(offset, payload length) of each TFRecord of a valid file."""
    out, position = [], 0
    while position < len(data):
        (length,) = struct.unpack_from("<Q", data, position)
        out.append((position, length))
        position += 12 + length + 4
    return out


def _issue(table: bayesgrpo.RunsTable, kind: str):
    found = [issue for issue in table.report.issues if issue.kind == kind]
    assert found, f"no {kind!r} issue in:\n{table.report.summary()}"
    return found[0]


def _run_folder(tmp_path: Path, points: pd.DataFrame | None = None, **kwargs) -> tuple[Path, Path]:
    folder = tmp_path / "run"
    path = write_tensorboard(folder, _points() if points is None else points, **kwargs)
    return folder, path


# ---------------------------------------------------------------------------------------------
# real files


def test_real_verl_run_reads_every_scalar():
    table = bayesgrpo.load_runs(REAL_RUN)
    points = table.points
    rewards = points.dropna(subset=["reward"])
    assert len(rewards) == 105
    assert rewards["step"].tolist() == list(range(1, 106))
    # step 0 holds only validation (verl validates before training)
    assert points["step"].tolist() == list(range(0, 106))
    assert np.isnan(points.loc[points["step"] == 0, "reward"]).all()
    # the validation score is its own column, named as the verl console reader names it
    assert points["val_reward"].notna().sum() == 22  # every 5 steps, step 0 included
    assert points.loc[points["val_reward"].notna(), "step"].tolist() == list(range(0, 106, 5))
    assert "val-aux/openai/gsm8k/score/mean@1" in points.columns
    # every tag is a column; verl's names mapped to canonical ones
    for canonical in ("entropy", "kl", "completion_length", "learning_rate", "epoch", "loss"):
        assert canonical in points.columns
    assert "actor/ppo_kl" in points.columns  # a different KL, kept under its own name
    assert len(table.metrics) == 63  # 63 tags
    assert table.runs.loc[0, "reward_key"] == "critic/score/mean"
    assert table.report.balanced and table.report.records_dropped == 0
    assert table.report.records_read == 6259


def test_real_verl_runs_all_load():
    table = bayesgrpo.load_runs(REAL)
    assert len(table) == 11
    counts = table.points.dropna(subset=["reward"]).groupby("run_id")["step"].agg(["count", "min", "max"])
    assert (counts["count"] == 105).all() and (counts["min"] == 1).all() and (counts["max"] == 105).all()
    assert table.report.balanced and table.report.records_dropped == 0


def test_real_file_values_match_tensorboards_own_loader():
    path = next(REAL_RUN.glob("events.out.tfevents.*"))
    expected = {
        event.step: event.summary.value[0].simple_value
        for event in LegacyEventFileLoader(str(path)).Load()
        if event.HasField("summary") and event.summary.value[0].tag == "critic/score/mean"
    }
    points = bayesgrpo.load_runs(REAL_RUN).points.dropna(subset=["reward"])
    assert dict(zip(points["step"], points["reward"], strict=True)) == pytest.approx(expected, rel=0, abs=0)


def test_reader_function_returns_long_records():
    (source,), _, _ = discover(REAL_RUN)
    assert source.format == "tensorboard" and detect_format(source.paths[0]) == "tensorboard"
    (raw,) = read_tensorboard(source, ReadOptions(run_id="r"))
    assert raw.long and raw.location_label == "event" and raw.run_id == "r"
    assert list(raw.records.columns) == ["_loc", "step", "metric", "value"]
    assert raw.records_read == len(raw.records) == 6259
    assert (
        raw.records["_loc"].is_monotonic_increasing and raw.records["_loc"].min() == 2
    )  # event 1: file_version
    assert raw.reward_candidates == REWARD_CANDIDATES
    assert raw.issues == []


# ---------------------------------------------------------------------------------------------
# writer -> reader round trips


@pytest.mark.parametrize(
    ("style", "dtype", "tolerance"),
    [
        ("simple_value", "float32", 1e-7),
        ("tensor", "float32", 1e-7),
        ("tensor", "float64", 0.0),
        ("tf2", "float32", 1e-7),
        ("tf2", "float64", 0.0),
        ("tf2", "float16", 1e-3),
        ("tf2", "bfloat16", 8e-3),
    ],
)
def test_round_trip_every_scalar_encoding(tmp_path, style, dtype, tolerance):
    points = _points()
    folder, _ = _run_folder(tmp_path, points, style=style, dtype=dtype)
    table = bayesgrpo.load_runs(folder)
    got = table.points
    assert got["step"].tolist() == points["step"].tolist()
    np.testing.assert_allclose(got["reward"], points["critic/score/mean"], rtol=tolerance, atol=0)
    np.testing.assert_allclose(got["entropy"], points["actor/entropy"], rtol=tolerance, atol=0)
    np.testing.assert_allclose(got["val_reward"], points[VAL_TAG], rtol=tolerance, atol=0)
    assert table.report.balanced and table.report.records_read == _n_values(points)
    assert table.report.records_dropped == 0 and table.report.issues == []


def test_tensor_metadata_only_on_first_value_of_a_tag(tmp_path):
    """TensorFlow 1's FileWriter keeps a tag's plugin metadata on its first value only."""
    points = _points()
    folder, _ = _run_folder(tmp_path, points, style="tf2", metadata_once=True)
    table = bayesgrpo.load_runs(folder)
    assert table.report.records_read == _n_values(points) and table.report.issues == []
    np.testing.assert_allclose(table.points["reward"], points["critic/score/mean"], rtol=1e-7)


def test_writer_makes_a_real_event_file(tmp_path):
    _, path = _run_folder(tmp_path)
    assert detect_format(path) == "tensorboard"
    events = list(LegacyEventFileLoader(str(path)).Load())
    assert events[0].file_version == "brain.Event:2"
    assert sum(len(e.summary.value) for e in events) == _n_values(_points())


@pytest.mark.parametrize("style", ["simple_value", "tensor"])
def test_large_writer_round_trip(tmp_path, style):
    path = write_large_tensorboard(tmp_path / "big", n_steps=50, n_tags=4, style=style)
    assert path.parent == tmp_path / "big" and detect_format(path) == "tensorboard"
    table = bayesgrpo.load_runs(tmp_path / "big")
    assert table.points["step"].tolist() == list(range(50))
    assert table.points["reward"].notna().all() and len(table.metrics) == 4
    assert table.report.records_read == 200 and table.report.balanced


def test_large_writer_target_size(tmp_path):
    path = write_large_tensorboard(tmp_path / "t", target_bytes=300_000, n_tags=10)
    assert 300_000 <= path.stat().st_size < 300_000 + 3_500_000
    table = bayesgrpo.load_runs(tmp_path / "t")
    assert table.report.balanced and table.report.records_dropped == 0


# ---------------------------------------------------------------------------------------------
# CRC and scalar decoding


def test_masked_crc32c_matches_tensorboard_both_implementations(monkeypatch):
    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, 4000, dtype=np.uint8).tobytes()
    starts = rng.integers(0, 2000, 80)
    lengths = rng.integers(0, 2000, 80)
    lengths[:3] = [0, 1, 8]
    lengths[40:] = 50  # many ranges of one length: the vectorised numpy path
    expected = [reference_masked_crc32c(data[s : s + n]) for s, n in zip(starts, lengths, strict=True)]
    assert masked_crc32c(data, starts, lengths).tolist() == expected
    monkeypatch.setattr(tb_crc, "_FAST_CRC", False)  # the numpy fallback
    assert masked_crc32c(data, starts, lengths).tolist() == expected
    assert masked_crc32c(data, [], []).tolist() == []


def _tensor(dtype: int, shape: list[int] | None = None, **fields) -> tensor_pb2.TensorProto:
    dims = [tensor_shape_pb2.TensorShapeProto.Dim(size=s) for s in (shape or [])]
    return tensor_pb2.TensorProto(
        dtype=dtype, tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=dims), **fields
    )


@pytest.mark.parametrize(
    ("tensor", "expected"),
    [
        (_tensor(types_pb2.DT_FLOAT, float_val=[0.5]), 0.5),
        (_tensor(types_pb2.DT_DOUBLE, [1], double_val=[0.25]), 0.25),
        (_tensor(types_pb2.DT_HALF, half_val=[0x3C00]), 1.0),
        (_tensor(types_pb2.DT_BFLOAT16, half_val=[0x3F80]), 1.0),
        (_tensor(types_pb2.DT_BFLOAT16, tensor_content=b"\x80\x3f"), 1.0),
        (_tensor(types_pb2.DT_FLOAT, tensor_content=np.float32(0.75).tobytes()), 0.75),
        (_tensor(types_pb2.DT_HALF, tensor_content=np.float16(-2.0).tobytes()), -2.0),
        (_tensor(types_pb2.DT_INT64, int64_val=[7]), 7.0),
        (_tensor(types_pb2.DT_BOOL, bool_val=[True]), 1.0),
        (_tensor(types_pb2.DT_FLOAT, [2], float_val=[1.0, 2.0]), None),  # not a scalar
        (_tensor(types_pb2.DT_FLOAT, [3, 1], tensor_content=np.zeros(3, np.float32).tobytes()), None),
        (_tensor(types_pb2.DT_STRING, [1], string_val=[b"x"]), None),
        (_tensor(types_pb2.DT_FLOAT), None),  # no value at all
        (_tensor(types_pb2.DT_FLOAT, tensor_content=b"\x00\x00\x80"), None),  # 3 bytes for a float32
        (_tensor(types_pb2.DT_HALF, half_val=[0x3F800000]), None),  # not a 16-bit pattern
    ],
)
def test_tensor_scalar(tensor, expected):
    assert tensor_scalar(tensor) == expected


# ---------------------------------------------------------------------------------------------
# malformed files


def test_empty_file_is_an_empty_log(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    path = folder / "events.out.tfevents.1700000000.host.1.0"
    path.write_bytes(b"")
    with pytest.raises(EmptyLogError, match="empty event file") as caught:
        bayesgrpo.load_runs(folder)
    assert str(path) in str(caught.value)


def test_empty_file_beside_a_good_one_is_noted(tmp_path):
    folder, _ = _run_folder(tmp_path, file_time=1_700_000_000)
    (folder / "events.out.tfevents.1700000100.host.2.0").write_bytes(b"")
    table = _load(folder)
    note = _issue(table, "empty_file")
    assert note.action == "info" and "1700000100" in note.locations[0]
    assert len(table.points) == 20 and table.report.balanced and table.report.records_dropped == 0


def test_garbage_file_is_not_an_event_file(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    path = folder / "events.out.tfevents.1700000000.host.1.0"
    path.write_bytes(b"step,reward\n1,0.5\n2,0.6\n" * 20)
    with pytest.raises(LogReadError, match="not a TensorBoard event file") as caught:
        bayesgrpo.load_runs(folder)
    assert str(path) in str(caught.value) and "byte 0" in str(caught.value)


def test_garbage_file_beside_a_good_one_is_dropped(tmp_path):
    folder, _ = _run_folder(tmp_path, file_time=1_700_000_000)
    bad = folder / "events.out.tfevents.1700000100.host.2.0"
    bad.write_bytes(bytes(range(256)) * 4)
    table = _load(folder)
    issue = _issue(table, "not_event_file")
    assert issue.action == "dropped" and issue.count == 1 and bad.name in issue.locations[0]
    assert len(table.points) == 20
    assert table.report.balanced and table.report.records_read == _n_values(_points()) + 1
    with pytest.raises(LogReadError, match="byte 0.*not an event file"):
        bayesgrpo.load_runs(folder, strict=True)


def _cut_points(data: bytes) -> dict[str, int]:
    offset, length = _records(data)[-1]
    return {
        "inside_length": offset + 5,
        "inside_length_crc": offset + 10,
        "inside_data": offset + 12 + length // 2,
        "inside_data_crc": offset + 12 + length + 2,
    }


@pytest.mark.parametrize("where", ["inside_length", "inside_length_crc", "inside_data", "inside_data_crc"])
def test_torn_last_record_is_dropped_and_reported(tmp_path, where):
    folder, path = _run_folder(tmp_path)
    data = path.read_bytes()
    last_offset = _records(data)[-1][0]
    path.write_bytes(data[: _cut_points(data)[where]])
    with pytest.warns(bayesgrpo.ReadWarning):
        table = bayesgrpo.load_runs(folder)
    issue = _issue(table, "truncated")
    assert issue.action == "dropped" and issue.count == 1
    assert issue.locations == (f"{path.name} byte {last_offset}",)
    assert f"byte {last_offset}" in issue.detail and "cut" in issue.detail
    # the last event held the last value written: step 20's validation reward
    assert table.points["val_reward"].notna().sum() == 3 and table.points["reward"].notna().sum() == 20
    assert table.report.balanced and table.report.records_read == _n_values(_points())


def test_torn_last_record_strict_raises_with_its_place(tmp_path):
    folder, path = _run_folder(tmp_path)
    data = path.read_bytes()
    last_offset = _records(data)[-1][0]
    path.write_bytes(data[:-3])
    with pytest.raises(TruncatedLogError) as caught:
        bayesgrpo.load_runs(folder, strict=True)
    assert f"byte {last_offset}" in str(caught.value) and path.name in str(caught.value)


def test_tensorboards_own_loader_swallows_a_torn_record_silently(tmp_path):
    """Why the records are framed here: the library's loader just stops (DataLossError -> break)."""
    _, path = _run_folder(tmp_path)
    data = path.read_bytes()
    offset, _ = _records(data)[10]
    damaged = bytearray(data)
    damaged[offset + 3] ^= 0xFF  # corrupt a length in the middle
    path.write_bytes(bytes(damaged))
    events = list(LegacyEventFileLoader(str(path)).Load())  # no error, no warning
    assert len(events) == 10  # everything after the damage is gone
    table = _load(path.parent)  # here: reported, and reading resumes
    assert table.points["reward"].notna().sum() >= 18


def test_corrupted_data_in_the_middle_drops_one_record(tmp_path):
    folder, path = _run_folder(tmp_path)
    data = bytearray(path.read_bytes())
    offset, length = _records(bytes(data))[10]
    data[offset + 12 + length // 2] ^= 0x01  # one bit of one payload
    path.write_bytes(bytes(data))
    table = _load(folder)
    issue = _issue(table, "bad_checksum")
    assert issue.action == "dropped" and issue.count == 1
    assert issue.locations == (f"{path.name} byte {offset}",)
    # the dropped record held one value: read = all values, kept = all but one
    assert table.report.balanced and table.report.records_read == _n_values(_points())
    assert table.report.records_kept == _n_values(_points()) - 1
    with pytest.raises(MalformedRecordError, match=f"byte {offset}"):
        bayesgrpo.load_runs(folder, strict=True)


@pytest.mark.parametrize("chunk", [None, 64, 1000])
def test_corrupted_length_in_the_middle_resynchronises(tmp_path, chunk, monkeypatch):
    if chunk is not None:
        monkeypatch.setattr(tb_records, "CHUNK_BYTES", chunk)
    folder, path = _run_folder(tmp_path)
    data = bytearray(path.read_bytes())
    records = _records(bytes(data))
    offset, _ = records[10]
    next_offset, _ = records[11]
    data[offset + 2] ^= 0x40  # the length of record 11 is wrong now
    path.write_bytes(bytes(data))
    table = _load(folder)
    issue = _issue(table, "corrupt")
    assert issue.action == "dropped" and issue.count == 1
    assert issue.locations == (f"{path.name} byte {offset}",)
    assert f"resumed at byte {next_offset}" in issue.detail
    assert table.report.records_kept == _n_values(_points()) - 1
    assert table.report.balanced and table.report.records_read == _n_values(_points())
    with pytest.raises(MalformedRecordError, match=f"byte {offset}"):
        bayesgrpo.load_runs(folder, strict=True)


def test_garbage_inserted_between_records_is_skipped(tmp_path):
    folder, path = _run_folder(tmp_path)
    data = path.read_bytes()
    offset, _ = _records(data)[15]
    garbage = np.random.default_rng(1).integers(0, 256, 3000, dtype=np.uint8).tobytes()
    path.write_bytes(data[:offset] + garbage + data[offset:])
    table = _load(folder)
    issue = _issue(table, "corrupt")
    assert issue.count == 1 and f"bytes {offset} to {offset + 3000}" in issue.detail
    assert table.report.records_kept == _n_values(_points())  # every record survives
    assert table.report.balanced


def test_corruption_to_the_end_of_the_file(tmp_path):
    folder, path = _run_folder(tmp_path)
    data = path.read_bytes()
    offset, _ = _records(data)[30]
    path.write_bytes(data[:offset] + b"\x00\xff" * 200)
    table = _load(folder)
    issue = _issue(table, "corrupt")
    assert "to the end" in issue.detail and issue.locations == (f"{path.name} byte {offset}",)
    assert table.report.balanced and table.report.records_kept == 29  # events 2..30


def test_valid_framing_but_not_an_event_payload(tmp_path):
    folder, path = _run_folder(tmp_path)
    with open(path, "ab") as handle:
        handle.write(frame_records([b"\xff\xff\xff"]))  # checksums fine, protobuf is not
    table = _load(folder)
    issue = _issue(table, "undecodable")
    assert issue.count == 1 and "not a valid Event" in issue.detail
    assert table.report.balanced and table.report.records_kept == _n_values(_points())
    with pytest.raises(MalformedRecordError, match="not a valid Event"):
        bayesgrpo.load_runs(folder, strict=True)


def test_strict_on_a_clean_file_is_quiet(tmp_path):
    folder, _ = _run_folder(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", bayesgrpo.ReadWarning)
        table = bayesgrpo.load_runs(folder, strict=True)
    assert table.report.records_dropped == 0


@pytest.mark.parametrize("chunk", [13, 100, 4096])
def test_small_read_windows_read_the_same(tmp_path, chunk):
    """Records straddling window boundaries, and one record larger than the window."""
    points = _points(30)
    folder = tmp_path / "run"
    events = [summary_event(0, [text_value("notes", "x" * 5000)], 1.0)]
    events += [
        summary_event(row.step, [scalar_value("critic/score/mean", row.reward)], 2.0)
        for row in points.rename(columns={"critic/score/mean": "reward"}).itertuples()
    ]
    path = write_events(folder, events)
    scan, results = read_event_files([path], chunk=chunk)
    assert results[0].valid == 32 and not scan.problems
    assert list(scan.values) == pytest.approx(points["critic/score/mean"].tolist(), rel=1e-6)
    assert scan.non_scalar["text"] == 1


# ---------------------------------------------------------------------------------------------
# values and steps


def test_nan_and_inf_values(tmp_path):
    points = _points(10)
    points.loc[3, "critic/score/mean"] = np.nan  # a NaN the tool logged
    points.loc[5, "actor/entropy"] = np.inf
    points.loc[6, "actor/kl_loss"] = -np.inf
    folder, _ = _run_folder(tmp_path, points, skip_missing=False)
    table = _load(folder)
    read = _n_values(points) + int(points[VAL_TAG].isna().sum()) + 1  # NaNs are written as values too
    assert table.report.records_read == read and table.report.balanced
    assert _issue(table, "no_values").action == "dropped"  # NaN records
    assert _issue(table, "non_finite").action == "repaired"
    got = table.points.set_index("step")
    assert np.isnan(got.loc[4, "reward"]) and np.isnan(got.loc[6, "entropy"]) and np.isnan(got.loc[7, "kl"])
    assert got["reward"].notna().sum() == 9


def test_resumed_run_two_files_latest_wins(tmp_path):
    folder = tmp_path / "run"
    first = _points(20, seed=1)  # steps 1..20, killed after step 20
    second = _points(15, seed=2, first_step=16)  # resumed from the checkpoint at step 15
    # the later file sorts first by name but second by time: the order comes from the time
    write_tensorboard(folder, first, file_time=9_999_999_999)
    write_tensorboard(folder, second, file_time=10_000_000_000, purge_step=16)
    names = sorted(p.name for p in folder.iterdir())
    assert names[0].startswith("events.out.tfevents.10000000000")
    table = _load(folder)
    got = table.points.set_index("step")
    assert got.index.tolist() == list(range(1, 31))
    np.testing.assert_allclose(got.loc[1:15, "reward"], first["critic/score/mean"][:15], rtol=1e-6)
    np.testing.assert_allclose(got.loc[16:30, "reward"], second["critic/score/mean"], rtol=1e-6)
    duplicate = _issue(table, "duplicate_step")
    overlap = first[first["step"] >= 16]
    assert duplicate.action == "dropped" and duplicate.count == _n_values(overlap)
    restart = _issue(table, "restart")
    assert restart.action == "info" and "step 16" in restart.detail
    assert table.report.balanced
    assert table.report.records_read == _n_values(first) + _n_values(second)


def test_torn_record_in_the_first_file_of_a_resumed_run(tmp_path):
    folder = tmp_path / "run"
    first = write_tensorboard(folder, _points(20, seed=1), file_time=1_000_000_000)
    write_tensorboard(folder, _points(10, seed=2, first_step=21), file_time=1_000_000_100)
    first.write_bytes(first.read_bytes()[:-7])  # the first writer was killed mid-record
    table = _load(folder)
    issue = _issue(table, "truncated")
    assert first.name in issue.locations[0]
    assert table.points["step"].tolist() == list(range(1, 31))
    assert table.report.balanced


def test_a_file_growing_while_read(tmp_path):
    """A writer flushing during training: read, more records arrive, one of them half-written."""
    folder, path = _run_folder(tmp_path, _points(10))
    assert len(_load(folder).points) == 10
    more = [summary_event(step, [scalar_value("critic/score/mean", 0.9)], 100.0) for step in (11, 12, 13)]
    append_events(path, more)
    whole = path.read_bytes()
    path.write_bytes(whole[:-20])  # the last record is still being written
    table = _load(folder)
    assert table.points["step"].tolist() == list(range(1, 13))
    assert _issue(table, "truncated").count == 1 and table.report.balanced
    path.write_bytes(whole)  # ... and now it is complete
    table = _load(folder)
    assert table.points["step"].tolist() == list(range(1, 14)) and table.report.records_dropped == 0


def test_event_file_order_uses_the_time_in_the_name():
    paths = [
        Path(n)
        for n in (
            "events.out.tfevents.100.b.1.0",
            "events.out.tfevents.99.a.1.0",
            "x.tfevents.100.a.1.0",
            "y.tfevents",
        )
    ]
    assert [p.name for p in event_file_order(paths)] == [
        "y.tfevents",
        "events.out.tfevents.99.a.1.0",
        "events.out.tfevents.100.b.1.0",
        "x.tfevents.100.a.1.0",
    ]


def test_out_of_order_steps_are_sorted(tmp_path):
    points = _points(12).iloc[[0, 1, 2, 6, 7, 3, 4, 5, 8, 9, 10, 11]].reset_index(drop=True)
    folder, _ = _run_folder(tmp_path, points)
    table = _load(folder)
    assert table.points["step"].tolist() == list(range(1, 13))
    np.testing.assert_allclose(
        table.points.set_index("step").loc[points["step"], "reward"], points["critic/score/mean"], rtol=1e-6
    )
    assert table.report.balanced and table.report.records_dropped == 0


def test_negative_step_is_dropped_by_tidy_run(tmp_path):
    folder = tmp_path / "run"
    events = [summary_event(step, [scalar_value("critic/score/mean", 0.5)], 1.0) for step in (1, -3, 2)]
    write_events(folder, events)
    table = _load(folder)
    assert table.points["step"].tolist() == [1, 2]
    assert _issue(table, "bad_step").locations == ("event 3",)  # event 1 is the file version
    assert table.report.balanced


# ---------------------------------------------------------------------------------------------
# non-scalar data, TRL files


def test_non_scalar_summaries_are_counted_not_read(tmp_path):
    folder = tmp_path / "run"
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 20
    events = [event_pb2.Event(wall_time=1.0, graph_def=b"\x0a\x00")]
    for step in range(1, 6):
        events.append(summary_event(step, [scalar_value("critic/score/mean", 0.1 * step)], 1.0 + step))
        events.append(
            summary_event(step, [histogram_value("actor/grad", np.arange(10.0) * step)], 1.0 + step)
        )
        events.append(
            summary_event(
                step, [image_value("samples", png, 1, 1), text_value("completion", "a b c")], 1.0 + step
            )
        )
    write_events(folder, events)
    table = _load(folder)
    assert table.points["step"].tolist() == [1, 2, 3, 4, 5] and table.metrics == ["reward"]
    note = _issue(table, "non_scalar")
    assert note.action == "info" and note.count == 16
    for text in ("histo 5", "image 5", "text 5", "graph_def 1", "'actor/grad'", "'completion/text_summary'"):
        assert text in note.detail
    assert table.report.balanced and table.report.records_read == 5


def test_only_non_scalar_data_is_an_empty_log(tmp_path):
    folder = tmp_path / "run"
    write_events(folder, [summary_event(s, [histogram_value("w", np.arange(5.0))], 1.0) for s in range(3)])
    with pytest.raises(EmptyLogError, match="no scalar summary.*histo 3"):
        bayesgrpo.load_runs(folder)


def test_trl_event_file(tmp_path):
    """Tags as transformers' TensorBoardCallback writes them for a TRL GRPO run."""
    rng = np.random.default_rng(0)
    n = 12
    points = pd.DataFrame(
        {
            "step": np.arange(1, n + 1) * 5,
            "train/loss": rng.normal(0, 0.01, n),
            "train/grad_norm": rng.uniform(0, 1, n),
            "train/learning_rate": np.linspace(5e-6, 0, n),
            "train/num_tokens": np.arange(1, n + 1) * 1000.0,
            "train/completions/mean_length": rng.uniform(100, 200, n),
            "train/rewards/accuracy_reward/mean": rng.uniform(0, 1, n),
            "train/reward": rng.uniform(0, 1, n),
            "train/reward_std": rng.uniform(0, 0.3, n),
            "train/frac_reward_zero_std": rng.uniform(0, 0.5, n),
            "train/kl": rng.uniform(0, 0.01, n),
            "train/entropy": rng.uniform(0.2, 0.8, n),
            "train/epoch": np.linspace(0.05, 0.6, n),
        }
    )
    args = (
        '{"output_dir": "out", "learning_rate": 5e-06, "num_train_epochs": 1.0, "max_steps": 60, '
        '"logging_steps": 5, "num_generations": 8, "per_device_train_batch_size": 8}'
    )
    config = '{"_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct", "model_type": "qwen2"}'
    folder = tmp_path / "runs" / "Nov21_02-00-00_host"
    write_tensorboard(folder, points, text={"args": args, "model_config": config})
    table = _load(folder)
    got = table.points
    np.testing.assert_allclose(got["reward"], points["train/reward"], rtol=1e-6)
    for canonical in (
        "reward_std",
        "kl",
        "entropy",
        "completion_length",
        "frac_reward_zero_std",
        "loss",
        "learning_rate",
        "epoch",
    ):
        assert canonical in got.columns, canonical
    assert "train/rewards/accuracy_reward/mean" in got.columns and "train/grad_norm" in got.columns
    run = table.runs.iloc[0]
    assert run["run_id"] == "Nov21_02-00-00_host"
    assert run["model"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert run["learning_rate"] == 5e-6 and run["group_size"] == 8
    assert run["total_steps"] == 60 and run["logging_steps"] == 5
    assert pd.isna(run["num_epochs"])  # max_steps overrides epochs
    assert _issue(table, "non_scalar").count == 2  # the two text summaries
    assert table.report.balanced and table.report.records_dropped == 0


def test_aliases_follow_the_verl_and_trl_readers():
    verl_tags = [
        "actor/entropy",
        "actor/kl_loss",
        "actor/ppo_kl",
        "response_length/mean",
        VAL_TAG,
        "critic/score/mean",
    ]
    assert tensorboard_aliases(verl_tags) == metric_aliases(verl_tags)
    assert tensorboard_aliases(verl_tags)[VAL_TAG] == "val_reward"
    trl_tags = [
        "train/kl",
        "train/completions/mean_length",
        "train/reward_std",
        "eval/reward",
        "train/reward",
    ]
    assert tensorboard_aliases(trl_tags) == {
        "train/kl": "kl",
        "train/completions/mean_length": "completion_length",
        "train/reward_std": "reward_std",
    }
    # one name per canonical metric: verl's KL wins over a second KL tag
    assert tensorboard_aliases(["actor/kl_loss", "train/kl"]) == {"actor/kl_loss": "kl"}


def test_trl_eval_tags_are_kept_and_reward_can_be_chosen(tmp_path):
    points = pd.DataFrame(
        {"step": [10, 20, 30], "train/reward": [0.1, 0.2, 0.3], "eval/reward": [0.15, np.nan, 0.35]}
    )
    folder, _ = _run_folder(tmp_path, points)
    table = _load(folder)
    assert table.points["eval/reward"].notna().sum() == 2
    chosen = _load(folder, reward="eval/reward")
    assert chosen.points.dropna(subset=["reward"])["step"].tolist() == [10, 30]


# ---------------------------------------------------------------------------------------------
# robustness and resources


def test_a_length_beyond_the_file_is_a_torn_record_not_a_huge_read(tmp_path):
    folder, path = _run_folder(tmp_path)
    header = struct.pack("<Q", 2**62)
    crc = struct.pack("<I", int(masked_crc32c(header, [0], [8])[0]))
    with open(path, "ab") as handle:
        handle.write(header + crc + b"\x08\x01")  # a sound header claiming 4 EiB, then the end
    table = _load(folder)
    issue = _issue(table, "truncated")
    assert f"of its {2**62 + 16} bytes" in issue.detail
    assert table.report.balanced and table.report.records_kept == _n_values(_points())


def test_a_file_holding_only_a_torn_record(tmp_path):
    folder, path = _run_folder(tmp_path)
    path.write_bytes(path.read_bytes()[:30])  # cut inside the first record (file_version)
    with pytest.raises(EmptyLogError, match="records dropped: truncated 1"):
        bayesgrpo.load_runs(folder)


def test_read_errors_become_log_read_errors(tmp_path, monkeypatch):
    folder, _ = _run_folder(tmp_path)

    def fail(self, keep_from, need=0):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(tb_records._Window, "advance", fail)
    with pytest.raises(LogReadError, match="cannot read.*Input/output error"):
        bayesgrpo.load_runs(folder)


def test_out_of_order_steps_are_reported(tmp_path):
    points = _points(12).iloc[[0, 1, 2, 6, 7, 3, 4, 5, 8, 9, 10, 11]].reset_index(drop=True)
    folder, _ = _run_folder(tmp_path, points)
    assert _issue(_load(folder), "out_of_order").action == "repaired"


def test_memory_stays_within_a_few_times_the_records(tmp_path, monkeypatch):
    """Compact arrays, a bounded read window: peak Python allocations ~ the records' size."""
    monkeypatch.setattr(tb_records, "CHUNK_BYTES", 64 * 1024)
    path = write_large_tensorboard(tmp_path / "big", n_steps=2_000, n_tags=20)  # 40,000 events
    source = Source("tensorboard", (path,), "big")
    tracemalloc.start()
    try:
        (raw,) = read_tensorboard(source, ReadOptions())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    output = raw.records.memory_usage(deep=True).sum()
    assert len(raw.records) == 40_000
    assert peak < 3 * output, (peak / 2**20, output / 2**20)
    assert peak < path.stat().st_size  # never the whole file in memory


def test_hparams_only_subfolder_is_a_note_not_a_run(tmp_path):
    # older transformers write add_hparams into a timestamped sub-folder holding no scalars

    folder, _ = _run_folder(tmp_path, _points(10))
    write_events(folder / "1712345678.123", [summary_event(0, [text_value("hparams", "lr: 1e-6")], 1.0)])
    table = _load(folder)
    assert len(table) == 1
    assert any(n.kind == "no_scalars" for n in table.report.notes)
    with pytest.raises(bayesgrpo.EmptyLogError, match="no scalar summary"):
        bayesgrpo.load_runs(folder / "1712345678.123")
