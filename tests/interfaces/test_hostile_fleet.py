"""The fleet answers for every input (issue 79, parts 4 and 6): one row per log given, readable or
not, on every engine; no stop advice without a horizon; Ray's own lines kept off stdout; a lost Ray
gives the rows finished and a clear error; Ctrl-C ends every verb with one line and status 130;
run names drawn by hypothesis stay data in every verb's output and file names.

The fast lane answers by live updates on a saved population, and the pooled ``forecast`` with
sampling mocked (``tests/conftest.py``); the ``--workers`` path runs on the serial engine there. A
real local Ray runs in the slow lane (a killed worker, a killed dashboard agent).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import psutil
import pytest
import ray
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bayesgrpo._text import CONTROL_CHARACTERS, FORMULA_STARTS
from bayesgrpo.errors import MetadataError
from bayesgrpo.interfaces.cli import EXIT_INCOMPLETE, EXIT_INTERRUPTED, main
from bayesgrpo.interfaces.fleet import (
    FLEET_COLUMNS,
    EngineLostError,
    FleetSettings,
    SerialEngine,
    assess,
    ray_engine,
)
from bayesgrpo.interfaces.watch.watcher import Watcher
from bayesgrpo.logs.readers import load_runs
from bayesgrpo.logs.writers.verl import write_verl_console
from bayesgrpo.questions.stopping import default_rule
from tests.test_text import RUN_NAMES

#: How many of a run's points each log of the fleets below holds.
N_POINTS = 40


def _points(seed: int, level: float = 0.6) -> pd.DataFrame:
    steps = np.arange(1, N_POINTS + 1)
    rng = np.random.default_rng(seed)
    reward = 0.2 + (level - 0.2) * (1 - np.exp(-steps / 15)) + rng.normal(0, 0.03, N_POINTS)
    return pd.DataFrame({"step": steps, "critic/score/mean": reward.round(4)})


def _write_log(path: Path, seed: int, total_steps: int | None = 200) -> Path:
    write_verl_console(path, _points(seed), total_training_steps=total_steps)
    return path


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """Six good verl logs, one stating no total steps, and five logs no reader can use: empty,
    random bytes, a CSV of garbage, a JSON Lines file of no record, a W&B file that is not one.
    """
    root = tmp_path / "hostile"
    root.mkdir()
    for i in range(6):
        _write_log(root / f"run_{i}.log", i)
    _write_log(root / "no_total.log", 10, total_steps=None)
    (root / "empty.log").write_bytes(b"")
    (root / "random.log").write_bytes(np.random.default_rng(1).bytes(3000))
    (root / "garbage.csv").write_bytes(b"\x00\x01garbage")
    (root / "torn.jsonl").write_text("not json at all\n", encoding="utf-8")
    (root / "fake.wandb").write_bytes(b"not a W&B file")
    (root / "config.json").write_text('{"lr": 1e-6}', encoding="utf-8")  # not a log: no row
    return root


#: The logs of the hostile fleet no reader can use, and the readable runs.
UNREADABLE = {"empty.log", "random.log", "garbage.csv", "torn.jsonl", "fake.wandb"}
READABLE = {f"run_{i}" for i in range(6)} | {"no_total"}


@pytest.fixture(scope="module")
def saved_population(population, tmp_path_factory):
    model, _ = population
    return str(model.save(tmp_path_factory.mktemp("population") / "population.nc", live_summary=True))


@pytest.fixture
def serial_workers(monkeypatch) -> dict[str, Any]:
    """``--workers N`` answered by the serial engine (the Ray engine is the slow lane's)."""
    seen: dict[str, Any] = {}

    def serial_engine(populations, *, workers=None, address=None, batch_size=None, max_retries=3):
        seen.update(workers=workers)
        return SerialEngine(populations)

    monkeypatch.setattr("bayesgrpo.interfaces.fleet.open_engine", serial_engine)
    return seen


def _rows(text: str) -> dict[str, dict[str, Any]]:
    return {row["run_id"]: row for row in json.loads(text)}


def _lines(text: str) -> list[str]:
    """The lines of ``text``, none of them holding a control character (a tab aside)."""
    lines = text.split("\n")
    raw = [line for line in lines if CONTROL_CHARACTERS.search(line.replace("\t", " "))]
    assert not raw, [line[:300] for line in raw]
    return lines


def test_assess_gives_one_row_per_log_given_readable_or_not(hostile):
    missing = hostile / "missing.log"
    unknown = hostile.parent / "notes.md"
    unknown.write_text("# not a log", encoding="utf-8")
    table = assess([hostile, missing, unknown], settings=FleetSettings(diagnose=False))
    assert list(table.columns) == list(FLEET_COLUMNS)
    by_run = table.set_index("run_id")
    assert set(by_run.index) == READABLE | UNREADABLE | {"missing.log", "notes.md"}
    errors = by_run[by_run["status"] == "error"]
    assert set(errors.index) == UNREADABLE | {"missing.log", "notes.md"}
    assert all(isinstance(e, str) and e for e in errors["error"])
    assert "empty file" in errors.loc["empty.log", "error"]
    assert "no such file" in errors.loc["missing.log", "error"]
    assert (by_run.loc[sorted(READABLE), "status"] == "ok").all()


def test_stop_gives_one_row_per_log_without_and_with_workers(
    hostile, capsys, saved_population, serial_workers
):
    argv = ["stop", str(hostile), "--population", saved_population, "--json"]
    assert main(argv) == 0  # serial: an unreadable file no longer ends every run
    serial = _rows(capsys.readouterr().out)
    assert main([*argv, "--workers", "2"]) == 0
    fleet = _rows(capsys.readouterr().out)
    assert serial_workers["workers"] == 2
    for rows in (serial, fleet):
        assert set(rows) == READABLE | UNREADABLE
        assert {r for r, row in rows.items() if row["status"] == "error"} == UNREADABLE
        assert all(rows[r]["error"] and rows[r]["decision"] is None for r in UNREADABLE)
    assert {r: serial[r]["decision"] for r in READABLE} == {r: fleet[r]["decision"] for r in READABLE}
    assert main(argv[:-1]) == 0  # the text: a line for each log
    out = capsys.readouterr().out
    assert all(f"{name}: ERROR " in out for name in UNREADABLE)


def test_a_log_named_explicitly_that_cannot_be_read_is_a_row_not_the_end(hostile, capsys, saved_population):
    argv = ["stop", str(hostile / "run_0.log"), str(hostile / "empty.log"), str(hostile / "gone.log")]
    assert main([*argv, "--population", saved_population, "--json"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert rows["run_0"]["status"] == "ok" and rows["run_0"]["decision"] in ("stop", "continue", "undecided")
    assert rows["empty.log"]["status"] == rows["gone.log"]["status"] == "error"
    assert (
        main(["stop", str(hostile / "empty.log"), "--population", saved_population]) == 2
    )  # nothing to answer
    assert "no log could be read" in capsys.readouterr().err


def test_strict_still_refuses_the_first_unreadable_log(hostile, capsys, saved_population):
    assert main(["stop", str(hostile), "--population", saved_population, "--strict"]) == 2
    assert "bayesgrpo: error:" in capsys.readouterr().err


def test_no_stop_advice_without_a_horizon_on_any_engine(hostile, capsys, saved_population, serial_workers):
    logs = [str(hostile / "run_0.log"), str(hostile / "no_total.log")]
    for extra in ([], ["--workers", "1"]):
        assert main(["stop", *logs, "--population", saved_population, "--json", *extra]) == 0
        rows = _rows(capsys.readouterr().out)
        assert rows["no_total"]["decision"] is None and "give --horizon" in rows["no_total"]["reason"]
        assert rows["run_0"]["decision"] in ("stop", "continue", "undecided")
        assert main(["stop", *logs, "--population", saved_population, *extra]) == 0
        out = capsys.readouterr().out
        assert "no_total: no answer: no --horizon given" in out and "no_total: STOP" not in out
    # a horizon the runs have passed: no advice either, on the fleet as serially
    assert main(["stop", *logs, "--population", saved_population, "--horizon", "10", "--workers", "1"]) == 2
    assert "no run could be answered" in capsys.readouterr().err


class _LosingEngine(SerialEngine):
    """A serial engine that loses its machine after ``keep`` items (as a dead Ray node does)."""

    name = "ray"

    def __init__(self, populations: Sequence[Any], keep: int) -> None:
        super().__init__(populations)
        self.keep = keep

    def map(self, work, items, settings, *, progress=None):
        done = {i: work(item, self.forecaster_of, settings) for i, item in enumerate(items[: self.keep])}
        raise EngineLostError(
            f"Ray was lost under the work (LocalRayletDiedError: raylet died); {self.keep} of {len(items)} "
            "items were answered before",
            done,
        )


def test_a_lost_engine_gives_the_rows_finished_and_a_clear_error(
    hostile, capsys, saved_population, monkeypatch
):
    logs = [str(hostile / f"run_{i}.log") for i in range(4)]

    def losing_engine(populations, **_):
        return _LosingEngine(populations, keep=2)

    monkeypatch.setattr("bayesgrpo.interfaces.fleet.open_engine", losing_engine)
    table = assess(logs, saved_population, settings=FleetSettings(diagnose=False), workers=2)
    assert table["status"].tolist() == ["ok", "ok", "error", "error"]
    assert table["error"].iloc[2].startswith("not assessed: the engine was lost (Ray was lost")
    assert "2 of 4 items" in table.attrs["incomplete"]
    code = main(["stop", *logs, "--population", saved_population, "--workers", "2", "--json"])
    out = capsys.readouterr()
    assert code == EXIT_INCOMPLETE
    rows = json.loads(out.out)  # stdout is whole JSON, with a row for every log
    assert [row["status"] for row in rows] == ["ok", "ok", "error", "error"]
    assert out.err.count("bayesgrpo: error: Ray was lost under the work") == 1


class _LosingOnCall(_LosingEngine):
    """Loses its machine on its ``lose_on``-th map (counting from 1), after ``keep`` items."""

    def __init__(self, populations: Sequence[Any], keep: int, lose_on: int) -> None:
        super().__init__(populations, keep)
        self.calls, self.lose_on = 0, lose_on

    def map(self, work, items, settings, *, progress=None):
        self.calls += 1
        if self.calls < self.lose_on:
            return SerialEngine.map(self, work, items, settings, progress=progress)
        return super().map(work, items, settings, progress=progress)


@pytest.mark.parametrize("lose_on", [1, 2])  # lost in the peers' pass, or in the findings' pass
def test_diagnose_on_a_lost_engine_gives_a_row_for_every_log_and_exit_3(
    hostile, capsys, monkeypatch, lose_on
):
    logs = [str(hostile / f"run_{i}.log") for i in range(4)]
    monkeypatch.setattr(
        "bayesgrpo.interfaces.fleet.open_engine",
        lambda populations, **_: _LosingOnCall(populations, 1, lose_on),
    )
    code = main(["diagnose", *logs, "--workers", "2", "--json"])
    out = capsys.readouterr()
    findings = json.loads(out.out)  # whole JSON on stdout
    assert code == EXIT_INCOMPLETE and out.err.count("bayesgrpo: error: Ray was lost under the work") == 1
    not_diagnosed = [row for row in findings if row["name"] == "not_diagnosed"]
    # lost in the peers' pass: no run is judged (the stall test needs its peers); in the findings'
    # pass: the run diagnosed before the loss keeps its findings
    assert len(not_diagnosed) == (4 if lose_on == 1 else 3)
    assert all("run diagnose again" in row["action"] for row in not_diagnosed)
    assert not any(row["name"] == "unreadable_log" for row in findings)


def test_watch_goes_on_in_this_process_when_its_ray_is_lost(hostile, capsys, saved_population, monkeypatch):
    logs = [str(hostile / f"run_{i}.log") for i in range(4)]
    monkeypatch.setattr(
        "bayesgrpo.interfaces.watch.watcher.open_engine",
        lambda populations, **_: _LosingEngine(populations, 2),
    )
    with Watcher(logs, rule=default_rule(), population=saved_population, workers=2) as watcher:
        statuses = watcher.poll()
        assert [s.state for s in statuses] == ["ok"] * 4  # 2 from the engine, 2 in this process
        assert "Ray was lost under the work" in str(watcher.engine_lost)
    serial = Watcher(logs, rule=default_rule(), population=saved_population).poll()
    assert [s.final_median for s in statuses] == pytest.approx([s.final_median for s in serial])
    code = main(["watch", *logs, "--population", saved_population, "--workers", "2", "--once", "--json"])
    out = capsys.readouterr()
    assert code == 0 and out.err.count("watch goes on, updating runs here") == 1
    (payload,) = [json.loads(line) for line in out.out.splitlines()]
    assert [row["state"] for row in payload["runs"]] == ["ok"] * 4


def test_ray_s_own_messages_go_to_stderr(capsys):
    ray_engine.ray_messages_to_stderr()  # twice: wrapped once
    message = f"A worker died or was killed while executing a task ({time.time_ns()})"
    ray._private.worker.print_to_stdstream({"lines": [message], "pid": "raylet", "is_err": False}, False)
    out = capsys.readouterr()
    assert message in out.err and message not in out.out


#: Each verb, as the parser runs it, and arguments it parses with.
VERBS = {
    "runs": ["runs", "x.log"],
    "demo": ["demo"],
    "forecast": ["forecast", "x.log"],
    "stop": ["stop", "x.log"],
    "diagnose": ["diagnose", "x.log"],
    "report": ["report", "x.log"],
    "watch": ["watch", "x.log"],
}


@pytest.mark.parametrize("verb", sorted(VERBS))
@pytest.mark.parametrize("swallowed", [False, True], ids=["raised", "swallowed"])
def test_ctrl_c_ends_every_verb_with_one_line_and_130(verb, swallowed, capsys, monkeypatch):
    def interrupted(args):
        if not swallowed:
            raise KeyboardInterrupt
        try:  # as PyMC's samplers and watch's loop do: the verb would go on
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass
        return 0

    name = "cmd_demo" if verb == "demo" else f"cmd_{verb}"
    monkeypatch.setattr(f"bayesgrpo.interfaces.cli.parser.{name}", interrupted)
    before = signal.getsignal(signal.SIGINT)
    assert main(VERBS[verb]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "bayesgrpo: interrupted\n"
    assert signal.getsignal(signal.SIGINT) is before  # the verb's handler is gone


#: ``bayesgrpo`` in a process of its own, whose reading of the logs waits (for a real SIGINT).
_WAITING_READ = """
import sys, time
import bayesgrpo.logs.readers as readers
def waiting(*args, **kwargs):
    print("reading", file=sys.stderr, flush=True)
    time.sleep(60)
readers.load_runs = waiting
from bayesgrpo.interfaces.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("verb", ["runs", "stop", "watch"])
def test_a_real_ctrl_c_exits_130_with_one_line_and_no_traceback(tmp_path, verb):
    log = _write_log(tmp_path / "run.log", 1)
    if verb == "watch":  # watch follows the log itself: interrupted while it waits between polls
        command = [sys.executable, "-m", "bayesgrpo.interfaces.cli", "watch", str(log), "--interval", "30"]
    else:
        command = [sys.executable, "-c", _WAITING_READ, verb, str(log)]
    process = subprocess.Popen(
        command,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal delivers it
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    ready = process.stdout.readline() if verb == "watch" else process.stderr.readline()  # a poll, a read
    assert ready, "the command ended before it could be interrupted"
    process.send_signal(signal.SIGINT)
    try:
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == EXIT_INTERRUPTED, err
    assert err.strip().splitlines()[-1] == "bayesgrpo: interrupted" and "Traceback" not in err


def _write_named_runs(path: Path, names: list[str]) -> Path:
    """One JSON Lines table of rising runs, one per name (JSON carries any character)."""
    with path.open("w", encoding="utf-8") as file:
        for i, name in enumerate(names):
            for step in range(1, 31):
                reward = 0.2 + 0.5 * (1 - np.exp(-step / (15.0 + i))) + 0.01 * np.sin(step)
                file.write(json.dumps({"run_id": name, "step": step * 5, "reward": round(reward, 4)}) + "\n")
    return path


def _names_read(path: Path) -> list[str] | None:
    """The names as read, or None when two names escape alike (a clear MetadataError)."""
    try:
        return load_runs([path], warn=False).run_ids
    except MetadataError:
        return None


def _check_files(folder: Path) -> None:
    """Every file written under ``folder``: a bounded name without control characters."""
    for path in folder.rglob("*"):
        assert len(path.name.encode("utf-8")) <= 120 and not CONTROL_CHARACTERS.search(path.name)


def _check_csv(path: Path, n_runs: int) -> None:
    final = pd.read_csv(path, keep_default_na=False, dtype={"run_id": str})
    assert len(final) == n_runs
    for cell in final["run_id"]:  # OWASP: a formula start is quoted, plain numbers stay numbers
        assert not cell.startswith(FORMULA_STARTS) or cell.lstrip("+-").replace(".", "", 1).isdigit()


NAME_LISTS = st.lists(RUN_NAMES, min_size=1, max_size=3)
HOSTILE_SETTINGS = settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@HOSTILE_SETTINGS
@given(names=NAME_LISTS)
def test_drawn_names_stay_data_in_the_fleet_s_stop_and_forecast(
    tmp_path_factory, capsys, saved_population, serial_workers, names
):
    folder = tmp_path_factory.mktemp("names")
    path = _write_named_runs(folder / "runs.jsonl", [*names, "zz-plain"])
    run_ids = _names_read(path)
    if run_ids is None:
        return
    capsys.readouterr()
    argv = [str(path), "--population", saved_population, "--horizon", "400", "--workers", "2"]
    assert main(["stop", *argv]) == 0
    out = _lines(capsys.readouterr().out)
    assert len([line for line in out if " at step " in line and not line.startswith(" ")]) == len(run_ids)
    assert main(["stop", *argv, "--json"]) == 0
    assert {row["run_id"] for row in json.loads(capsys.readouterr().out)} == set(run_ids)
    assert main(["forecast", *argv, "--output", str(folder / "out")]) == 0
    _lines(capsys.readouterr().out)
    _check_csv(folder / "out" / "final_reward.csv", len(run_ids))
    _check_files(folder)


@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(names=NAME_LISTS)
def test_drawn_names_stay_data_in_the_pooled_forecast(tmp_path_factory, capsys, mocked, names):
    folder = tmp_path_factory.mktemp("pooled")
    path = _write_named_runs(folder / "runs.jsonl", [*names, "zz-plain"])
    run_ids = _names_read(path)
    if run_ids is None:
        return
    capsys.readouterr()
    out_dir = folder / "out"
    argv = ["forecast", str(path), "--output", str(out_dir), "--horizon", "400", "--no-figure"]
    assert main([*argv, "--draws", "20", "--tune", "20", "--chains", "1", "--sampler", "pymc"]) == 0
    _lines(capsys.readouterr().out)
    _check_csv(out_dir / "final_reward.csv", len(run_ids))
    _check_files(folder)


@HOSTILE_SETTINGS
@pytest.mark.filterwarnings("ignore:Glyph .* missing from font")  # CJK names in figure titles
@given(names=NAME_LISTS)
def test_drawn_names_stay_data_in_the_fleet_report(tmp_path_factory, capsys, saved_population, names):
    folder = tmp_path_factory.mktemp("report")
    path = _write_named_runs(folder / "runs.jsonl", [*names, "zz-plain"])
    if _names_read(path) is None:
        return
    page = folder / "fleet.html"
    argv = ["report", str(path), "--population", saved_population, "-o", str(page), "--horizon", "400"]
    assert main([*argv, "--fleet", "--figures", "all", "--max-inline", "0"]) == 0
    _lines(capsys.readouterr().out)
    _lines(page.read_text(encoding="utf-8"))
    _check_files(folder)


def test_a_control_character_stays_out_of_the_report_page(tmp_path, capsys, saved_population):
    path = _write_named_runs(tmp_path / "runs.jsonl", ["form\x0cfeed", "zz-plain"])
    page = tmp_path / "report.html"
    argv = ["report", str(path), "--population", saved_population, "-o", str(page), "--horizon", "400"]
    assert main([*argv, "--history-points", "0", "--no-diagnose", "-q"]) == 0
    _lines(page.read_text(encoding="utf-8"))


# --- a real local Ray (slow lane) ----------------------------------------------------------------


def _ray_processes(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        try:
            if marker in " ".join(process.info["cmdline"] or []):
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _kill_when_seen(marker: str, deadline: float, killed: list[int], wait_for: str | None = None) -> None:
    """SIGKILL the first process whose command line holds ``marker`` (once one holding
    ``wait_for`` runs, when given: a busy worker).
    """
    while time.monotonic() < deadline and not killed:
        if wait_for is None or _ray_processes(wait_for):
            for process in _ray_processes(marker):
                try:
                    process.send_signal(signal.SIGKILL)
                except psutil.NoSuchProcess:
                    continue
                killed.append(process.pid)
                return
        time.sleep(0.05)


@pytest.fixture
def ray_fleet(tmp_path: Path) -> Path:
    """Forty verl logs and an unreadable one: a minute of work for two Ray workers."""
    root = tmp_path / "ray_fleet"
    root.mkdir()
    for i in range(40):
        _write_log(root / f"run_{i:02d}.log", 100 + i)
    (root / "empty.log").write_bytes(b"")
    return root


def _stop_on_ray(
    folder: Path, kill: str, wait_for: str | None
) -> tuple[subprocess.CompletedProcess[str], list[int]]:
    """``bayesgrpo stop FOLDER --workers 2 --json`` in a process of its own, one Ray process
    killed on the way.
    """
    command = [sys.executable, "-m", "bayesgrpo.interfaces.cli", "stop", str(folder) + os.sep]
    command += [str(folder)] * 3 + ["--workers", "2", "--json", "--quiet"]  # about a minute of work
    killed: list[int] = []
    killer = threading.Thread(target=_kill_when_seen, args=(kill, time.monotonic() + 180, killed, wait_for))
    killer.start()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=400)
    finally:
        killer.join(timeout=200)
    return done, killed


@pytest.mark.slow
@pytest.mark.usefixtures("ray_lock")
def test_a_killed_ray_worker_leaves_stdout_whole_json(ray_fleet):
    done, killed = _stop_on_ray(ray_fleet, "ray::run_batch", None)
    assert killed, "no worker was caught running a batch"
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout)  # Ray's "(raylet) A worker died" went to stderr
    assert len(rows) == 4 * 41 and sum(row["status"] == "error" for row in rows) == 4
    assert "(raylet)" not in done.stdout and "0 tasks retried" not in done.stderr


@pytest.mark.slow
@pytest.mark.usefixtures("ray_lock")
def test_a_killed_ray_agent_gives_a_clear_error_and_the_rows_finished(ray_fleet):
    done, killed = _stop_on_ray(ray_fleet, "ray::DashboardAgent", "ray::run_batch")
    assert killed, "no dashboard agent was found"
    # said on stderr as soon as the loss is seen (it was exit 1 after 13-143 s with no message)
    assert "Ray was lost under the work (its node, raylet or agent)" in done.stderr, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    if done.returncode == 1:
        # Ray's core worker ends the driver (status 1, no message) when it asks the dead raylet
        # from its own threads: it did so, before the rows were written, while the driver owned
        # the population in Ray's object store (it tried to recover it); shared by file, not seen
        pytest.xfail("Ray ended the process after the loss was said, before the rows were written")
    assert done.returncode == EXIT_INCOMPLETE, done.stderr[-3000:]
    rows = json.loads(done.stdout)  # a row for every log given: finished, or saying why not
    assert len(rows) == 4 * 41
    lost = [row for row in rows if str(row["error"]).startswith("not assessed: the engine was lost")]
    assert lost and "bayesgrpo: error: Ray was lost under the work" in done.stderr
