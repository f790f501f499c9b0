"""The live-log watcher: logs written by another process while it polls, rotation, restarts,
half-written files, caching, the numbers it shows, and ``bayesgrpo watch`` itself.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import os
import re
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from rich.console import Console
from tensorboard.compat.proto import event_pb2

from bayesgrpo.interfaces.cli import main
from bayesgrpo.interfaces.watch import FileStamp, LogFollower, RunStatus, Watcher, render_table, run
from bayesgrpo.interfaces.watch import follow as follow_module
from bayesgrpo.interfaces.watch import watcher as watch
from bayesgrpo.logs.readers import discover, load_runs
from bayesgrpo.logs.writers.tensorboard import frame_records, scalar_value, summary_event, write_tensorboard
from bayesgrpo.logs.writers.trl import trainer_state_text
from bayesgrpo.logs.writers.verl import write_verl_console
from bayesgrpo.model.datasets import data_dir, load_bundled
from bayesgrpo.questions.live import LiveForecaster
from bayesgrpo.questions.stopping import Confirmed, CurveDraws, PlateauRule, prob_gain_below, reward_at

DATA = Path(__file__).resolve().parents[2] / "data"
VERL_LOG = DATA / "verl-console" / "verl_gpg_qwen2-7b_math_megatron.log"
TRL_CSV = DATA / "csv" / "nb_unslothai_notebooks_Qwen3_4B_GRPO_c7b12e0_n100.csv"
VERL_CSV = DATA / "csv" / "verl_pr3389_dp_2_gpu_20251110_100611.csv"

# Plays a list of file operations with pauses, as a training process writes its logs. It imports
# nothing of bayesgrpo, so it starts at once.
WRITER = r"""
import json, os, shutil, sys, time, base64
for op in json.load(open(sys.argv[1])):
    kind = op[0]
    if kind == "append":
        with open(op[1], "a", encoding="utf-8", newline="") as handle:
            handle.write(op[2])
    elif kind == "append_bytes":
        with open(op[1], "ab") as handle:
            handle.write(base64.b64decode(op[2]))
    elif kind == "replace":  # truncate and rewrite in two halves, as a trainer saving its state
        text, half = op[2], len(op[2]) // 2
        with open(op[1], "w", encoding="utf-8") as handle:
            handle.write(text[:half]); handle.flush(); time.sleep(op[3]); handle.write(text[half:])
    elif kind == "rename":
        os.replace(op[1], op[2])
    elif kind == "mkdir":
        os.makedirs(op[1], exist_ok=True)
    elif kind == "rmtree":
        shutil.rmtree(op[1])
    elif kind == "sleep":
        time.sleep(op[1])
    elif kind == "gate":  # wait until the watcher has begun and finished a poll after this point
        def polls():
            try:
                return int(open(op[1]).read() or 0)
            except (OSError, ValueError):
                return 0
        start, deadline = polls(), time.monotonic() + 20
        while polls() < start + 2 and time.monotonic() < deadline:
            time.sleep(0.002)
"""

PAUSE = 0.005  # seconds between the writer's operations


class StubForecaster:
    """A fixed exponential-saturation posterior: fast, and its numbers have closed forms.

    ``R(t) = r0 + (A - r0) (1 - exp(-t / tau))`` with ``r0 = 0.1``, ``tau = 40`` steps and
    ``A`` evenly spread over [0.5, 0.7] across the 101 draws.
    """

    asymptote = np.linspace(0.5, 0.7, 101)

    def __init__(self) -> None:
        self.calls = 0

    def update(self, run, *, horizon):
        self.calls += 1
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


def _chunks(text: str, n: int) -> list[str]:
    """``text`` in ``n`` pieces cut anywhere (mid-line, mid-value), as a writer flushes it."""
    bounds = np.linspace(0, len(text), n + 1).astype(int)
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def _appends(path: Path, text: str, n: int) -> list[list]:
    ops: list[list] = []
    for piece in _chunks(text, n):
        ops += [["append", str(path), piece], ["sleep", PAUSE]]
    return ops


def _play(ops: list[list], tmp_path: Path, gates: int = 3) -> tuple[subprocess.Popen, Path]:
    """Start the writer; at ``gates`` evenly spaced points it waits for the watcher to poll, so
    that however slow the machine, the watcher sees the log part-written (writes and reads still
    race between the gates).
    """
    counter = tmp_path / f"polls{time.perf_counter_ns()}.txt"
    counter.write_text("0")
    step = max(1, len(ops) // (gates + 1))
    gated: list[list] = []
    for i, op in enumerate(ops):
        gated.append(op)
        if (i + 1) % step == 0 and (i + 1) < len(ops):
            gated.append(["gate", str(counter)])
    spec = tmp_path / f"ops{time.perf_counter_ns()}.json"
    spec.write_text(json.dumps(gated))
    return subprocess.Popen([sys.executable, "-c", WRITER, str(spec)]), counter


def _follow(
    watcher: Watcher, writer: tuple[subprocess.Popen, Path], timeout: float = 60.0
) -> list[list[RunStatus]]:
    """Poll while the writer writes, then once more after it finished."""
    proc, counter = writer
    polls = []
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        polls.append(watcher.poll())
        counter.with_suffix(".tmp").write_text(str(len(polls)))
        os.replace(counter.with_suffix(".tmp"), counter)
        time.sleep(0.003)
    assert proc.wait(timeout=10) == 0
    polls.append(watcher.poll())
    return polls


def _steps_seen(polls: list[list[RunStatus]], run_id: str | None = None) -> list[int]:
    out = []
    for statuses in polls:
        rows = [s for s in statuses if run_id is None or s.run_id == run_id]
        assert len(rows) <= 1, [s.run_id for s in rows]
        out.append(rows[0].n_steps if rows else 0)
    return out


def _assert_followed(polls: list[list[RunStatus]], watcher: Watcher, expected_path: Path) -> None:
    """Steps only grow, nothing is an error, growth was seen, and the end equals load_runs."""
    for statuses in polls:
        assert all(s.state != "error" for s in statuses), [s.reason for s in statuses]
    seen = _steps_seen(polls)
    assert all(b >= a for a, b in itertools.pairwise(seen)), seen
    assert len(set(seen)) >= 3, seen  # the watcher saw the run part-written
    expected = load_runs(expected_path, warn=False)
    (follower,) = watcher.followers
    got = follower.table
    assert got is not None and len(got.run_ids) == 1
    want = expected.points.dropna(subset=["reward"])
    have = got.points.dropna(subset=["reward"])
    assert seen[-1] == len(want)
    np.testing.assert_array_equal(have["step"].to_numpy(), want["step"].to_numpy())
    np.testing.assert_allclose(have["reward"].to_numpy(), want["reward"].to_numpy())


def _watcher(paths, **kwargs) -> Watcher:
    kwargs.setdefault("population", StubForecaster())
    kwargs.setdefault("rule", PlateauRule(eps=0.01, prob=0.9, relative=True))
    return Watcher(paths, **kwargs)


# --------------------------------------------------------------------------------------------
# logs written by another process while the watcher polls
# --------------------------------------------------------------------------------------------


def test_verl_console_log_followed_while_written(tmp_path):
    log = tmp_path / "run.log"
    watcher = _watcher(log)
    assert watcher.poll()[0].state == "waiting"  # not started yet: waiting, not an error
    writer = _play(_appends(log, VERL_LOG.read_text(encoding="utf-8"), 30), tmp_path)
    polls = _follow(watcher, writer)
    _assert_followed(polls, watcher, VERL_LOG)
    last = polls[-1][0]
    assert last.state == "ok" and last.horizon_step == 105  # "Total training steps: 105" in its log


def test_trainer_state_checkpoints_followed_while_saved(tmp_path):
    out = tmp_path / "outputs"
    points = pd.read_csv(TRL_CSV)
    ops: list[list] = [["mkdir", str(out)]]
    saves = list(range(20, len(points) + 1, 20))
    for k in saves:
        folder = out / f"checkpoint-{k}"
        text = trainer_state_text(points.iloc[:k], max_steps=len(points))
        ops += [
            ["mkdir", str(folder)],
            ["sleep", PAUSE],
            ["replace", str(folder / "trainer_state.json"), text, 0.02],
        ]
        if k - 40 in saves:  # save_total_limit: older checkpoints are deleted
            ops.append(["rmtree", str(out / f"checkpoint-{k - 40}")])
        ops.append(["sleep", 2 * PAUSE])
    watcher = _watcher(out)
    writer = _play(ops, tmp_path)
    polls = _follow(watcher, writer)
    _assert_followed(polls, watcher, out)
    assert watcher.followers[0].source.paths[0].parent.name == f"checkpoint-{saves[-1]}"
    assert polls[-1][0].run_id == "outputs" and polls[-1][0].horizon_step == len(points)


@pytest.mark.parametrize("watch_folder", [False, True], ids=["file", "folder"])
def test_rotated_log_keeps_the_steps_of_the_old_file(tmp_path, watch_folder):
    log = tmp_path / "train.log"
    lines = VERL_LOG.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "step:60 " in line)
    before, after = "".join(lines[:cut]), "".join(lines[cut:])
    ops = _appends(log, before, 15) + [
        ["rename", str(log), str(tmp_path / "train.log.1")],
        ["sleep", 3 * PAUSE],
    ]
    ops += _appends(log, after, 15)
    watcher = _watcher(tmp_path if watch_folder else log)
    polls = _follow(watcher, _play(ops, tmp_path))
    whole = tmp_path / "whole.log"
    whole.write_text(before + after, encoding="utf-8")
    _assert_followed(polls, watcher, whole)
    (follower,) = watcher.followers
    assert follower.rotations == 1
    assert follower.table.runs["total_steps"].iloc[0] == 105  # stated only in the old file's head
    assert [s.run_id for s in polls[-1]] == ["train"]  # train.log.1 is not a second run


def test_a_file_renamed_while_the_folder_is_listed_is_not_a_second_run(tmp_path, monkeypatch):
    """The race CI met: the folder listed with ``train.log``, renamed to ``train.log.1`` before
    ``discover`` walks it; the renamed file is the followed run's, not a new run ``train.log``.
    """
    log = tmp_path / "train.log"
    lines = VERL_LOG.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "step:60 " in line)
    log.write_text("".join(lines[:cut]), encoding="utf-8")
    watcher = _watcher(tmp_path)
    assert [s.run_id for s in watcher.poll()] == ["train"]
    real_discover = follow_module.discover

    def rename_then_discover(*args, **kwargs):
        if not (tmp_path / "train.log.1").exists():  # logrotate's rename, once
            os.replace(log, tmp_path / "train.log.1")
        return real_discover(*args, **kwargs)

    monkeypatch.setattr(follow_module, "discover", rename_then_discover)
    (tmp_path / "notes.txt").write_text("a new file: the folder is discovered again")
    assert [s.run_id for s in watcher.poll()] == ["train"]
    log.write_text("".join(lines[cut:]), encoding="utf-8")
    (status,) = watcher.poll()
    assert status.run_id == "train" and status.n_steps == 105  # both files' steps, as one run
    assert watcher.followers[0].rotations == 1


def test_restarted_run_relogs_steps_and_the_latest_wins(tmp_path):
    log = tmp_path / "run.log"
    lines = VERL_LOG.read_text(encoding="utf-8").splitlines(keepends=True)

    def index(step: int) -> int:
        return next(i for i, line in enumerate(lines) if re.search(rf"step:{step} - ", line))

    relogged = [
        re.sub(
            r"critic/score/mean:([\d.]+)",
            lambda m: f"critic/score/mean:{float(m.group(1)) + 0.25:.3f}",
            lines[index(s)],
        )
        for s in range(5, 11)
    ]
    text = "".join(lines[: index(12) + 1]) + "".join(relogged) + "".join(lines[index(12) + 1 :])
    watcher = _watcher(log)
    polls = _follow(watcher, _play(_appends(log, text, 30), tmp_path))
    finished = tmp_path / "finished.log"
    finished.write_text(text, encoding="utf-8")
    _assert_followed(polls, watcher, finished)
    points = watcher.followers[0].table.points.set_index("step")["reward"]
    original = load_runs(VERL_LOG, warn=False).points.set_index("step")["reward"]
    np.testing.assert_allclose(points.loc[5:10], original.loc[5:10] + 0.25, atol=1e-9)
    np.testing.assert_allclose(points.loc[11:], original.loc[11:])


def test_tensorboard_folder_growing_with_torn_records_and_a_resumed_file(tmp_path):
    run = tmp_path / "tb" / "verl_run"
    points = pd.read_csv(VERL_CSV).iloc[:60]
    first = run / "events.out.tfevents.1700000000.host.1.0"
    second = run / "events.out.tfevents.1700009999.host.1.0"
    head = frame_records([event_pb2.Event(wall_time=1.7e9, file_version="brain.Event:2").SerializeToString()])
    ops: list[list] = [["mkdir", str(run)]]
    for path in (first, second):
        ops.append(["append_bytes", str(path), base64.b64encode(head).decode()])
    ops.pop()  # the second file starts when the run resumes
    half = len(points) // 2
    for row in points.itertuples(index=False):
        path = first if row.step <= half else second
        if row.step == half + 1:
            ops.append(["append_bytes", str(second), base64.b64encode(head).decode()])
        events = [
            summary_event(int(row.step), [scalar_value(tag, float(value))], 1.7e9 + row.step)
            for tag, value in zip(points.columns[1:], row[1:], strict=True)
        ]
        record = frame_records([e.SerializeToString() for e in events])
        cut = len(record) // 3  # the last record torn until the next write
        ops += [
            ["append_bytes", str(path), base64.b64encode(record[:cut]).decode()],
            ["sleep", PAUSE / 2],
            ["append_bytes", str(path), base64.b64encode(record[cut:]).decode()],
            ["sleep", PAUSE / 2],
        ]
    watcher = _watcher(tmp_path / "tb", horizon=200)
    assert watcher.poll()[0].state == "waiting"
    polls = _follow(watcher, _play(ops, tmp_path))
    _assert_followed(polls, watcher, run)
    assert len(watcher.followers[0].source.paths) == 2
    assert polls[-1][0].run_id == "verl_run" and polls[-1][0].state == "ok"


# --------------------------------------------------------------------------------------------
# following, one poll at a time
# --------------------------------------------------------------------------------------------


def _verl_text() -> str:
    return VERL_LOG.read_text(encoding="utf-8")


def test_a_cut_last_line_is_not_an_error_and_unchanged_files_are_not_read_again(tmp_path):
    text = _verl_text()
    at = text.index("critic/score/mean", text.index("step:40 - ")) + len("critic/score/mean:0.")
    log = tmp_path / "run.log"
    log.write_text(text[:at], encoding="utf-8")  # ends inside step 40's reward value
    follower = LogFollower(load_source(log))
    assert follower.poll() and follower.state == "ok"
    steps = follower.table.points.dropna(subset=["reward"])["step"]
    assert steps.max() == 39  # step 40's reward was cut: not read, not an error
    assert not follower.poll() and follower.reads == 1  # nothing changed: not read again
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(text[at:])
    assert follower.poll() and follower.reads == 2
    assert (
        follower.table.points["reward"].notna().sum()
        == load_runs(VERL_LOG, warn=False).points["reward"].notna().sum()
    )


def load_source(path: Path):
    (source,), _, _ = discover(path)
    return source


def test_a_half_written_trainer_state_keeps_the_last_complete_read(tmp_path):
    points = pd.read_csv(TRL_CSV)
    state = tmp_path / "trainer_state.json"
    state.write_text(trainer_state_text(points.iloc[:60]))
    follower = LogFollower(load_source(state))
    follower.poll()
    assert _n(follower) == 60
    full = trainer_state_text(points.iloc[:90])
    for cut in (0, 40, len(full) // 3):  # empty, before log_history, inside it (fewer than 60 entries)
        state.write_text(full[:cut])
        follower.poll()
        assert follower.state == "ok" and _n(follower) == 60, cut
    state.write_text(full)
    follower.poll()
    assert _n(follower) == 90 and follower.message == ""


def _n(follower: LogFollower) -> int:
    return int(follower.table.points["reward"].notna().sum())


def test_paths_that_do_not_exist_yet_wait(tmp_path):
    watcher = _watcher([tmp_path / "later.log", tmp_path / "folder"])
    statuses = watcher.poll()
    assert [s.state for s in statuses] == ["waiting", "waiting"]
    (tmp_path / "later.log").write_text("")  # created empty: still waiting
    assert watcher.poll()[0].state == "waiting"
    (tmp_path / "later.log").write_text(_verl_text(), encoding="utf-8")
    (tmp_path / "folder").mkdir()
    statuses = watcher.poll()
    assert statuses[0].state == "ok" and statuses[0].n_steps == 105
    assert statuses[1].state == "waiting"


@pytest.mark.slow
def test_watching_the_bundled_folder_reads_what_load_bundled_reads():
    """Per-source following of a folder with a manifest (``runs.csv``): the same run ids,
    points and metadata as ``load_runs`` on the folder (about 10 s: 60 sources read one by one).
    """
    watcher = _watcher(data_dir(), horizon=5000)
    statuses = watcher.poll()
    assert len(statuses) == 60 and {s.state for s in statuses} == {"ok"}
    expected = load_bundled(warn=False)
    tables = {f.table.run_ids[0]: f.table for f in watcher.followers}
    assert set(tables) == set(expected.run_ids)
    for run_id, table in tables.items():
        want = expected.select([run_id])
        have, ref = table.points.dropna(subset=["reward"]), want.points.dropna(subset=["reward"])
        np.testing.assert_array_equal(have["step"].to_numpy(), ref["step"].to_numpy())
        np.testing.assert_allclose(have["reward"].to_numpy(), ref["reward"].to_numpy())
        columns = ["family", "size_b", "group_size", "total_steps", "reward_min", "reward_max", "task"]
        assert (
            table.runs[columns].astype(str).iloc[0].tolist()
            == want.runs[columns].astype(str).iloc[0].tolist()
        )


def test_file_stamp_tells_identity_size_and_time(tmp_path):
    path = tmp_path / "a.log"
    assert FileStamp.of(path) is None
    path.write_text("x")
    one = FileStamp.of(path)
    path.write_text("xy")
    two = FileStamp.of(path)
    assert one.same_file(two) and two.size == 2
    path.rename(tmp_path / "b.log")
    path.write_text("xy")
    assert not two.same_file(FileStamp.of(path))


# --------------------------------------------------------------------------------------------
# what the watcher shows
# --------------------------------------------------------------------------------------------


def test_status_numbers_match_the_closed_form_of_the_posterior(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(_verl_text(), encoding="utf-8")
    watcher = _watcher(log, horizon=200, eps=0.02, relative=False, smooth=5)
    (status,) = watcher.poll()
    rewards = load_runs(VERL_LOG, warn=False).points["reward"].dropna().to_numpy()
    a = StubForecaster.asymptote
    final = 0.1 + (a - 0.1) * (1 - np.exp(-200 / 40))
    gain = (a - 0.1) * (np.exp(-105 / 40) - np.exp(-200 / 40))
    assert status.state == "ok" and status.step == 105 and status.n_steps == 105
    assert status.reward_now == pytest.approx(rewards[-5:].mean())
    assert status.final_median == pytest.approx(np.median(final))
    assert status.final_lower == pytest.approx(np.quantile(final, 0.05))
    assert status.final_upper == pytest.approx(np.quantile(final, 0.95))
    assert status.p_plateau == pytest.approx((gain < 0.02).mean())  # gain 0.029-0.043: 0 draws
    assert status.decision == "continue"
    watcher.eps = 0.04
    watcher._cache.clear()
    assert watcher.poll()[0].p_plateau == pytest.approx((gain < 0.04).mean())


def test_only_runs_whose_data_changed_are_updated(tmp_path):
    text = _verl_text()
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text(text, encoding="utf-8")
    b.write_text(text[: text.index("step:50 - ")], encoding="utf-8")
    stub = StubForecaster()
    watcher = _watcher([a, b], population=stub)
    first = watcher.poll()
    assert [s.updated for s in first] == [True, True] and stub.calls == 2
    second = watcher.poll()
    assert [s.updated for s in second] == [False, False] and stub.calls == 2
    assert [s.final_median for s in second] == [s.final_median for s in first]
    with open(b, "a", encoding="utf-8") as handle:
        handle.write(text[text.index("step:50 - ") :])
    third = watcher.poll()
    assert [s.updated for s in third] == [False, True] and stub.calls == 3
    assert [f.reads for f in watcher.followers] == [1, 2]


def test_no_horizon_is_said_and_a_horizon_given_is_used(tmp_path):
    points = pd.read_csv(VERL_CSV)

    write_tensorboard(tmp_path / "run", points)
    (status,) = _watcher(tmp_path / "run").poll()
    assert status.state == "no_horizon" and "--horizon" in status.reason and status.n_steps == len(points)
    (status,) = _watcher(tmp_path / "run", horizon=100).poll()
    assert status.state == "error" and "past the horizon" in status.reason
    (status,) = _watcher(tmp_path / "run", horizon=300).poll()
    assert status.state == "ok" and status.horizon_step == 300


def test_real_live_update_agrees_with_a_direct_call(tmp_path, population):
    model, _ = population
    log = tmp_path / "run.log"
    text = _verl_text()
    log.write_text(text[: text.index("step:60 - ")], encoding="utf-8")
    rule = PlateauRule(eps=0.01, prob=0.9, relative=True)
    (status,) = Watcher(log, rule=rule, population=model, random_seed=7).poll()
    run = load_runs(log, warn=False)
    update = LiveForecaster(model, random_seed=7).update(run, horizon=105)
    lower, median, upper = update.final_interval(0.9)  # the predictive band, by default
    assert status.state == "ok" and status.step == 59 and status.band == "predictive"
    assert (status.final_lower, status.final_median, status.final_upper) == pytest.approx(
        (lower, median, upper)
    )
    (curve,) = Watcher(log, rule=rule, population=model, random_seed=7, band="curve").poll()
    final = reward_at(update.curve_draws, [105.0])[:, 0, 0]
    assert curve.band == "curve" and curve.final_lower == pytest.approx(np.quantile(final, 0.05))
    assert curve.final_upper - curve.final_lower < upper - lower
    assert status.p_plateau == pytest.approx(
        prob_gain_below(update.curve_draws, 59, 105, eps=0.01, relative=True)[0]
    )
    assert status.decision == rule.decide(update.curve_draws, 59, 105)[0].decision
    assert status.pareto_k == pytest.approx(update.posterior.pareto_k)


def test_run_polls_as_many_times_as_asked(tmp_path):

    log = tmp_path / "run.log"
    log.write_text(_verl_text(), encoding="utf-8")
    out, pauses = io.StringIO(), []
    assert run(_watcher(log), as_json=True, max_polls=3, interval=2.5, stream=out, sleep=pauses.append) == 0
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [p["poll"] for p in lines] == [1, 2, 3] and pauses == [2.5, 2.5]
    assert [p["runs"][0]["updated"] for p in lines] == [True, False, False]
    out = io.StringIO()
    assert (
        run(_watcher(log, horizon=300), max_polls=2, stream=out, sleep=lambda s: None) == 0
    )  # the live view
    assert "run" in out.getvalue() and "continue" in out.getvalue()


def test_run_writes_each_polls_table_when_its_output_is_not_a_terminal(tmp_path):
    # `bayesgrpo watch > file`: each poll's table reaches the file as it is made (a live view
    # wrote nothing until watch ended)
    log = tmp_path / "run.log"
    log.write_text(_verl_text(), encoding="utf-8")
    out, seen = io.StringIO(), []
    run(_watcher(log, horizon=300), max_polls=2, stream=out, sleep=lambda s: seen.append(out.getvalue()))
    assert "poll 1" in seen[0] and "\x1b" not in out.getvalue()
    assert out.getvalue().count("bayesgrpo watch") == 2


def test_render_table_has_one_row_per_run():
    statuses = [
        RunStatus("a", "a.log", "ok", 10, 10.0, 0.5, 100.0, 0.6, 0.55, 0.65, 0.95, "stop", "on its plateau"),
        RunStatus("b", "b.log", "waiting", reason="no such file yet"),
    ]
    console = Console(width=200, record=True)
    console.print(render_table(statuses, title="t"))
    text = console.export_text()
    assert "STOP" in text and "0.6 [0.55, 0.65]" in text and "waiting" in text and "no such file yet" in text
    assert "90% predictive" in text  # the column says which band its interval is
    assert json.loads(json.dumps(statuses[1].to_dict()))["final_median"] is None


# --------------------------------------------------------------------------------------------
# the command
# --------------------------------------------------------------------------------------------


def test_cli_watch_once_prints_one_table(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(watch, "live_forecaster", lambda population, random_seed: StubForecaster())
    log = tmp_path / "run.log"
    log.write_text(_verl_text(), encoding="utf-8")
    assert main(["watch", "--once", "--horizon", "300", str(log), str(tmp_path / "none.log")]) == 0
    out = capsys.readouterr().out
    assert "run " in out and " 105 " in out and "105 / 300" in out and "continue" in out
    assert "none" in out and "waiting" in out and "no such file or folder yet" in out
    with pytest.raises(SystemExit, match="--cost-per-step"):  # as `bayesgrpo stop`: budget needs its costs
        main(["watch", "--once", "--rule", "budget", str(log)])


def test_cli_watch_json_with_a_saved_population(tmp_path, population, capsys):
    model, _ = population
    pop = model.save(tmp_path / "pop.nc")
    log = tmp_path / "run.log"
    log.write_text(_verl_text(), encoding="utf-8")
    argv = [
        "watch",
        "--once",
        "--json",
        "--population",
        str(pop),
        "--rule",
        "target",
        "--target",
        "0.9",
        str(log),
    ]
    assert main(argv) == 0
    payload = json.loads(capsys.readouterr().out)
    (row,) = payload["runs"]
    assert payload["poll"] == 1 and row["run_id"] == "run" and row["n_steps"] == 105 and row["state"] == "ok"
    assert row["step"] == row["horizon_step"] == 105
    assert row["final_lower"] <= row["final_median"] <= row["final_upper"]
    assert row["decision"] in ("stop", "continue", "undecided") and row["reason"]
    assert row["range_source"] == "estimated"  # a verl score inside 0 .. 1, no range stated
    assert "estimated from the run]" in row["reason"] and "[eps against the range" in row["reason"]
    assert main([*argv, "--reward-range", "0", "1"]) == 0  # every run's range stated on the command line
    (row,) = json.loads(capsys.readouterr().out)["runs"]
    assert row["range_source"] == "stated"
    assert "[eps against the range 0 .. 1 stated for the run]" in row["reason"]
    # the guarded budget with its opt-in flat stop, as `bayesgrpo stop --flat-stop` takes it
    flat_argv = [arg for arg in argv if arg not in ("--rule", "target", "--target", "0.9")]
    assert main([*flat_argv, "--rule", "guarded-budget", "--horizon", "400", "--flat-stop", "0.02"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["runs"]
    assert row["decision"] in ("stop", "continue") and "of the run" in row["reason"]
    with pytest.raises(SystemExit, match="--flat-stop goes with --rule guarded-budget"):
        main([*argv, "--flat-stop", "0.02"])


def test_table_shows_bracketed_warnings_and_run_ids_literally():

    status = RunStatus(
        run_id="run[bold]x",
        source="s",
        state="ok",
        n_steps=3,
        step=3.0,
        reward_now=0.5,
        horizon_step=10.0,
        final_median=0.6,
        final_lower=0.5,
        final_upper=0.7,
        p_plateau=0.2,
        decision="continue",
        reason="keep training [live update unreliable: Pareto k 0.84]",
    )
    out = StringIO()
    Console(file=out, width=300, color_system=None).print(render_table([status]))
    text = out.getvalue()
    assert "[live update unreliable: Pareto k 0.84]" in text and "run[bold]x" in text


@pytest.mark.parametrize("where", ["myrun", "myrun/checkpoint-20"])
def test_a_trainer_state_given_from_its_own_folder_is_named_after_the_training_folder(
    tmp_path, monkeypatch, where
):
    folder = tmp_path / where
    folder.mkdir(parents=True)
    points = [{"step": s, "reward": 0.1 + 0.01 * s} for s in range(1, 21)]
    (folder / "trainer_state.json").write_text(trainer_state_text(points, max_steps=100), encoding="utf-8")
    monkeypatch.chdir(folder)
    (status,) = _watcher("trainer_state.json").poll()
    assert status.run_id == "myrun" and status.state == "ok"
    assert load_runs("trainer_state.json", warn=False).run_ids == ["myrun"]


def test_what_reading_a_log_repaired_is_shown_with_the_run(tmp_path):
    log = tmp_path / "run.csv"
    rows = ["step,reward", "1,0.1", "2,abc"] + [f"{s},{0.1 + 0.01 * s}" for s in range(3, 40)]
    log.write_text("\n".join(rows) + "\n", encoding="utf-8")
    (status,) = _watcher(log, horizon=100).poll()
    assert status.state == "ok" and status.repairs is not None and "non_numeric" in status.repairs
    assert "[log repaired: " in status.reason
    assert json.loads(json.dumps(status.to_dict()))["repairs"] == status.repairs


def test_a_confirmed_rule_stops_at_the_second_update_that_says_so(tmp_path):
    path = tmp_path / "flat.log"
    steps = np.arange(1, 181)
    flat = 0.6 + 0.01 * ((7 * steps) % 5 - 2)  # long done rising: on its plateau
    write_verl_console(
        path, pd.DataFrame({"step": steps, "critic/score/mean": flat}), total_training_steps=200
    )
    watcher = Watcher([path], rule=Confirmed(PlateauRule(eps=0.01, prob=0.9, relative=True), checks=2))
    (first,) = watcher.poll()
    assert first.decision == "continue" and "waiting for 1 more check" in first.reason
    (cached,) = watcher.poll()  # nothing new logged: no new check, the same answer
    assert cached.decision == "continue" and not cached.updated
    more = np.arange(181, 186)
    with open(path, "a", encoding="utf-8") as handle:
        for step in more:
            handle.write(f"step:{step} - critic/score/mean:{0.6 + 0.01 * ((7 * step) % 5 - 2):.4f}\n")
    (second,) = watcher.poll()
    assert second.step == 185 and second.decision == "stop"


def test_a_run_that_jumps_past_its_forecast_says_so_in_its_reason(tmp_path):
    """A plain CSV whose last 40 of 200 points jump twenty noise sds: the shipped population's
    update sees them above its band, and the status's reason says so.
    """
    steps = np.arange(1, 201)
    rewards = 0.2 + 0.5 * (1 - np.exp(-steps / 40.0)) + 0.03 * np.random.default_rng(4).standard_normal(200)
    rewards[160:] += 0.6
    log = tmp_path / "jump.csv"
    pd.DataFrame({"step": steps, "reward": rewards}).to_csv(log, index=False)
    (status,) = Watcher(log, rule=PlateauRule(eps=0.01, prob=0.9), horizon=400, random_seed=0).poll()
    assert status.state == "ok"
    assert "[the run has left its forecast: " in status.reason and "lie above the 90% band" in status.reason


# --------------------------------------------------------------------------------------------
# a log deleted and written again, or truncated: earlier steps kept or said (issue 79)
# --------------------------------------------------------------------------------------------


def _table_csv(path: Path, first: int, last: int) -> None:
    steps = np.arange(first, last + 1)
    pd.DataFrame({"step": steps, "reward": 0.2 + 0.005 * steps}).to_csv(path, index=False)


@pytest.mark.parametrize("how", ["deleted", "truncated"])
def test_a_table_written_again_from_scratch_says_its_earlier_steps_are_not_shown(tmp_path, how):
    log = tmp_path / "run.csv"
    _table_csv(log, 1, 52)
    watcher = _watcher(log, horizon=200)
    (status,) = watcher.poll()
    assert status.n_steps == 52 and "restarted" not in status.reason
    if how == "deleted":
        log.unlink()
        watcher.poll()  # the file is gone: what was read is still shown
        _table_csv(log, 1, 10)
    else:
        with open(log, "r+", encoding="utf-8") as handle:  # same file, cut and written again
            handle.truncate(0)
            pd.DataFrame({"step": [1, 2], "reward": [0.2, 0.21]}).to_csv(handle, index=False)
    (status,) = watcher.poll()
    expected = "steps 11 .. 52" if how == "deleted" else "steps 3 .. 52"
    assert "(restarted?)" in status.reason and expected in status.reason and "not shown" in status.reason
    assert watcher.followers[0].rotations == 1


def test_a_table_rewritten_in_full_is_no_restart(tmp_path):
    log = tmp_path / "run.csv"
    _table_csv(log, 1, 52)
    watcher = _watcher(log, horizon=200)
    watcher.poll()
    with open(log, "r+", encoding="utf-8") as handle:  # a trainer's to_csv caught mid-write...
        handle.truncate(0)
        pd.DataFrame({"step": [1, 2], "reward": [0.205, 0.21]}).to_csv(handle, index=False)
    assert "restarted" in watcher.poll()[0].reason
    _table_csv(log, 1, 60)  # ...then the whole table again: nothing lost, nothing to say
    (status,) = watcher.poll()
    assert status.n_steps == 60 and "restarted" not in status.reason


def test_a_verl_log_deleted_and_written_again_keeps_its_steps_and_says_so(tmp_path):
    log = tmp_path / "run.log"
    steps = np.arange(1, 53)
    write_verl_console(log, pd.DataFrame({"step": steps, "critic/score/mean": 0.2 + 0.005 * steps}))
    watcher = _watcher(log, horizon=200)
    watcher.poll()
    log.unlink()
    watcher.poll()
    write_verl_console(log, pd.DataFrame({"step": [1, 2], "critic/score/mean": [0.5, 0.5]}))
    (status,) = watcher.poll()
    assert status.n_steps == 52  # kept, the new file's values where it logs a step again
    assert "the 52 step(s) read before, steps 1 .. 52, are kept" in status.reason
    assert "replaced" in json.loads(json.dumps(status.to_dict()))["reason"]
