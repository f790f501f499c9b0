"""The fleet: many runs at once, serially (fast lane) and on a real local Ray (slow lane)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest

from bayesgrpo.interfaces.cli import main
from bayesgrpo.interfaces.fleet import (
    FLEET_COLUMNS,
    FleetSettings,
    Population,
    SerialEngine,
    assess,
    batches,
    fleet_sources,
    open_engine,
)
from bayesgrpo.interfaces.fleet.ray_engine import interrupts_held
from bayesgrpo.interfaces.watch import Watcher
from bayesgrpo.logs.writers.trl import write_trainer_state
from bayesgrpo.logs.writers.verl import write_verl_console
from bayesgrpo.model.datasets import POPULATION_FILE
from bayesgrpo.questions.stopping import PlateauRule

pytestmark = pytest.mark.usefixtures("ray_lock")  # this module starts Ray: one at a time (conftest)


def _curve(n: int, seed: int, level: float) -> pd.DataFrame:
    steps = np.arange(1, n + 1)
    rng = np.random.default_rng(seed)
    reward = 0.2 + (level - 0.2) * (1 - np.exp(-steps / 15)) + rng.normal(0, 0.03, n)
    return pd.DataFrame({"step": steps, "reward": reward.round(4)})


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """Eight runs in three formats and one broken log, in one folder tree."""
    root = tmp_path / "fleet"
    for i in range(4):
        folder = root / f"trl_{i}"
        folder.mkdir(parents=True)
        write_trainer_state(folder / "trainer_state.json", _curve(60, i, 0.6 + 0.05 * i), max_steps=200)
    for i in range(3):
        points = _curve(50, 10 + i, 0.7).rename(columns={"reward": "critic/score/mean"})
        write_verl_console(root / f"verl_{i}.log", points, total_training_steps=150)
    _curve(40, 20, 0.5).to_csv(root / "plain.csv", index=False)
    (root / "broken.csv").write_text("step,reward\n1,0.2\n2,0.3\n3,0.4\n", encoding="utf-8")
    (root / "broken.csv").write_bytes(b"\x00\x01garbage")  # a file the CSV reader cannot read
    return root


def test_every_run_gets_a_row_and_a_broken_log_gets_its_error(fleet):
    table = assess([fleet], settings=FleetSettings(horizon=None))
    assert list(table.columns) == list(FLEET_COLUMNS)
    ok = table[table["status"] == "ok"]
    assert len(ok) == 8
    advised = ok[ok["run_id"] != "plain"]  # plain.csv states no total steps: no advice (issue 79)
    assert set(advised["decision"]) <= {"stop", "continue", "undecided"}
    (plain,) = ok[ok["run_id"] == "plain"].itertuples()
    assert not isinstance(plain.decision, str) and "give --horizon" in plain.reason
    assert set(ok["eps_range_source"]) <= {"stated", "score", "estimated"}  # every answer says its eps range
    assert (ok["eps_range_lower"] < ok["eps_range_upper"]).all()
    assert (ok["final_lower"] <= ok["final_median"]).all() and (ok["final_median"] <= ok["final_upper"]).all()
    assert set(ok.loc[ok["run_id"].str.startswith("trl_"), "horizon_step"]) == {200.0}
    errors = table[table["status"] == "error"]
    assert len(errors) == 1 and errors["source"].iloc[0].endswith("broken.csv") and errors["error"].iloc[0]
    assert table.attrs == {"retried_tasks": 0, "engine": "serial"}


def test_a_path_that_does_not_exist_is_a_row_not_the_end(fleet):
    table = assess([fleet / "verl_0.log", fleet / "missing.log"])
    assert table["status"].tolist() == ["ok", "error"]
    assert "no such file" in table["error"].iloc[1]


def test_batches_cover_every_source_once_about_four_a_worker():
    for n, workers in [(1, 2), (7, 2), (100, 2), (1000, 8)]:
        chunks = batches(n, workers)
        covered = [i for chunk in chunks for i in chunk]
        assert covered == list(range(n))
        assert len(chunks) <= max(1, 4 * workers)
    assert [len(c) for c in batches(10, 2, batch_size=3)] == [3, 3, 3, 1]
    assert batches(0, 4) == []


def test_fleet_sources_are_those_load_runs_reads(fleet):
    sources = fleet_sources([fleet])
    assert len(sources) == 9  # 4 trainer states, 3 verl logs, 2 CSV files


def test_stop_with_workers_takes_the_fleet_path(fleet, capsys, monkeypatch):
    seen = {}

    def fake_assess(paths, population, *, settings, workers, address, progress):
        seen.update(paths=paths, workers=workers, address=address, rule=settings.rule)
        frame = assess(paths, population, settings=settings)
        return frame

    monkeypatch.setattr("bayesgrpo.interfaces.fleet.assess", fake_assess)  # what cli imports
    assert main(["stop", str(fleet), "--workers", "2", "--json", "--eps", "0.02"]) == 0
    out = capsys.readouterr()
    rows = json.loads(out.out)
    assert len(rows) == 9 and seen["workers"] == 2 and seen["rule"].eps == 0.02
    assert "9 runs, 1 with errors, 0 tasks retried" in out.err


def test_the_serial_engine_maps_in_order_and_builds_a_forecaster_once(monkeypatch):
    built = []
    model = object()

    class Forecaster:
        def __init__(self, population, n_draws, random_seed):
            built.append((population, n_draws, random_seed))

    monkeypatch.setattr("bayesgrpo.interfaces.fleet.work.LiveForecaster", Forecaster)
    with open_engine([Population(model, 100, 7)]) as engine:  # type: ignore[arg-type]
        assert isinstance(engine, SerialEngine)
        out = engine.map(_square_with_forecaster, [3, 1, 2], 10)
    assert [value for value, _ in out] == [19, 11, 14]
    assert len({id(forecaster) for _, forecaster in out}) == 1 and built == [(model, 100, 7)]
    with pytest.raises(ValueError, match="workers must be at least 1"):
        open_engine([Population(model)], workers=0)  # type: ignore[arg-type]


def _square_with_forecaster(item, forecaster_of, settings):
    return item * item + settings, forecaster_of(0)


def test_diagnose_only_settings_skip_the_live_update(fleet):
    table = assess([fleet], settings=FleetSettings(forecast=False))
    ok = table[table["status"] == "ok"]
    assert ok["decision"].isna().all() and ok["final_median"].isna().all()
    assert all(isinstance(found, list) for found in table["findings"])
    assert (ok["worst_finding"] == [f[0]["name"] if f else "" for f in ok["findings"]]).all()


def test_forecast_with_a_population_answers_live_run_by_run(fleet, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["forecast", str(fleet), "--population", str(POPULATION_FILE), "--output", str(out)]) == 0
    printed = capsys.readouterr()
    assert "9 runs, 1 with errors" in printed.err and "ERROR" in printed.out
    written = pd.read_csv(out / "final_reward.csv")
    ok = written[written["status"] == "ok"]
    assert len(written) == 9 and len(ok) == 8
    assert (ok["final_lower"] <= ok["final_median"]).all() and (ok["final_median"] <= ok["final_upper"]).all()
    with pytest.raises(SystemExit, match="--cut"):
        main(["forecast", str(fleet), "--workers", "2", "--cut", "0.5"])


def test_diagnose_with_workers_lists_every_run_and_the_unreadable_one(fleet, capsys, monkeypatch):
    seen = {}

    def serial_engine(populations, *, workers, address):
        seen.update(workers=workers, populations=populations)
        return SerialEngine(populations)

    monkeypatch.setattr("bayesgrpo.interfaces.fleet.open_engine", serial_engine)  # what cli imports
    assert main(["diagnose", str(fleet), "--workers", "2", "--json"]) == 0
    findings = pd.DataFrame(json.loads(capsys.readouterr().out))
    assert seen == {"workers": 2, "populations": []}  # no population: nothing is forecast
    unreadable = findings[findings["name"] == "unreadable_log"]
    assert len(unreadable) == 1 and unreadable["evidence"].iloc[0]["source"].endswith("broken.csv")
    readable = sorted(str(p) for p in fleet.iterdir() if p.name != "broken.csv")
    assert main(["diagnose", *readable, "--json"]) == 0  # without Ray, the logs it can read: the same
    serial = json.loads(capsys.readouterr().out)
    assert findings[findings["name"] != "unreadable_log"].to_dict("records") == serial
    with pytest.raises(SystemExit, match="--model"):
        main(["diagnose", str(fleet), "--workers", "2", "--model", "model.nc"])


@pytest.mark.slow
def test_forecast_diagnose_and_watch_on_ray_equal_their_serial_answers(fleet, tmp_path, capsys):
    population = str(POPULATION_FILE)
    answers = []
    for extra in ([], ["--workers", "2"]):
        assert (
            main(
                [
                    "forecast",
                    str(fleet),
                    "--population",
                    population,
                    "--output",
                    str(tmp_path),
                    "--json",
                    *extra,
                ]
            )
            == 0
        )
        answers.append(json.loads(capsys.readouterr().out))
    assert answers[0] == answers[1]

    assert main(["diagnose", str(fleet), "--workers", "2", "--json"]) == 0
    on_ray = [f for f in json.loads(capsys.readouterr().out) if f["name"] != "unreadable_log"]
    readable = sorted(str(p) for p in fleet.iterdir() if p.name != "broken.csv")
    assert main(["diagnose", *readable, "--json"]) == 0
    assert on_ray == json.loads(capsys.readouterr().out)
    # the bundled runs: stalls judged against family/task peers, found alike on Ray
    assert main(["diagnose", "--workers", "2", "--json"]) == 0
    on_ray = json.loads(capsys.readouterr().out)
    assert main(["diagnose", "--json"]) == 0
    serial = json.loads(capsys.readouterr().out)
    by_run = lambda f: (f["run_id"], f["name"])  # noqa: E731
    assert sorted(on_ray, key=by_run) == sorted(serial, key=by_run)
    assert any(f["name"] == "stall" for f in serial)

    watched = Watcher([fleet], rule=PlateauRule(eps=0.02))
    with Watcher([fleet], rule=PlateauRule(eps=0.02), workers=2) as watched_on_ray:
        for _ in range(2):  # the second poll: every run cached, nothing sent to Ray
            rows = [s.to_dict() | {"seconds": 0} for s in watched.poll()]
            assert rows == [s.to_dict() | {"seconds": 0} for s in watched_on_ray.poll()]
        assert watched_on_ray._engine is not None and watched_on_ray._engine.name == "ray"
    assert watched_on_ray._engine is None


@pytest.mark.slow
def test_ray_gives_the_serial_answers_with_one_and_two_workers(fleet):
    settings = FleetSettings(rule=PlateauRule(eps=0.02, prob=0.9, relative=True))
    serial = assess([fleet], settings=settings)
    for workers in (1, 2):
        on_ray = assess([fleet], settings=settings, workers=workers)
        assert on_ray.attrs["engine"] == "ray" and on_ray.attrs["retried_tasks"] == 0
        pd.testing.assert_frame_equal(serial.drop(columns="seconds"), on_ray.drop(columns="seconds"))


def _busy_ray_workers() -> list[int]:
    """Ray worker processes running a batch (Ray titles one "ray::run_batch" while it runs it)."""
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        try:
            if "ray::run_batch" in " ".join(process.info["cmdline"] or []):
                found.append(process.info["pid"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.fixture
def big_fleet(tmp_path: Path) -> Path:
    """Forty verl logs: enough work per batch for a worker to be caught in the middle of one."""
    root = tmp_path / "big"
    root.mkdir()
    for i in range(40):
        points = _curve(80, 100 + i, 0.6 + 0.01 * (i % 10)).rename(columns={"reward": "critic/score/mean"})
        write_verl_console(root / f"run_{i:02d}.log", points, total_training_steps=200)
    return root


@pytest.mark.slow
def test_a_worker_killed_mid_batch_costs_a_retry_not_a_run(big_fleet):
    killed: list[int] = []

    def kill_one_busy_worker(deadline: float) -> None:
        while time.monotonic() < deadline and not killed:
            for pid in _busy_ray_workers():
                try:
                    psutil.Process(pid).send_signal(signal.SIGKILL)
                except psutil.NoSuchProcess:  # its batch ended between the scan and the kill
                    continue
                killed.append(pid)
                return
            time.sleep(0.02)

    serial = assess([big_fleet])
    killer = threading.Thread(target=kill_one_busy_worker, args=(time.monotonic() + 120,), daemon=True)
    killer.start()
    on_ray = assess([big_fleet], workers=2, batch_size=10)
    killer.join(timeout=5)
    assert killed, "no worker was caught running a batch"
    assert on_ray.attrs["retried_tasks"] >= 1
    assert len(on_ray) == 40 and on_ray["run_id"].is_unique
    pd.testing.assert_frame_equal(serial.drop(columns="seconds"), on_ray.drop(columns="seconds"))


def _ray_processes() -> list[int]:
    found = []
    for process in psutil.process_iter(["pid", "name", "cmdline"]):
        try:
            line = " ".join(process.info["cmdline"] or [])
            if "raylet" in (process.info["name"] or "") or "ray::" in line or "gcs_server" in line:
                found.append(process.info["pid"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


#: Ctrl-C as ray.init starts: the interrupt comes before the real ray.init runs, so unless it is
#: held, it is raised there (and "ray is up" is never printed).
_CTRL_C_AS_RAY_STARTS = """
import os, signal, sys
import ray
real_init = ray.init
def interrupted_init(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    context = real_init(*args, **kwargs)
    print("ray is up", file=sys.stderr, flush=True)
    return context
ray.init = interrupted_init
"""


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["during the work", "as ray starts"])
def test_ctrl_c_cancels_and_leaves_no_ray_process_behind(big_fleet, moment):
    assert not _ray_processes(), "a Ray from elsewhere is running: this test cannot tell them apart"
    code = (
        (_CTRL_C_AS_RAY_STARTS if moment == "as ray starts" else "") + "import sys\n"
        "from bayesgrpo.interfaces.fleet import assess\n"
        "try:\n"
        f"    assess([{str(big_fleet)!r}] * 40, workers=2, batch_size=2)\n"  # about a minute of work
        "except KeyboardInterrupt:\n"
        "    sys.exit(130)\n"
    )
    # SIGINT as a terminal delivers it (a disposition inherited as ignored would hide the test)
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        stderr=subprocess.PIPE,
        text=True,
    )
    if moment == "during the work":
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not _busy_ray_workers():  # a worker runs a batch
            time.sleep(0.05)
        assert _busy_ray_workers(), "no worker was seen running a batch"
        process.send_signal(signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 130, f"the fleet was not interrupted cleanly:\n{stderr[-3000:]}"
    if moment == "as ray starts":
        assert "ray is up" in stderr, "the interrupt broke into ray.init instead of waiting for it"
    deadline = time.monotonic() + 90  # measured: over 30 s on a slow, busy 2-core machine
    while _ray_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _ray_processes()


def test_an_interrupt_held_while_ray_starts_is_raised_when_the_block_ends():
    # Python's own handler, whatever an earlier test in this worker process left (Ray may set
    # SIGINT to be ignored in a process it started in)
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        reached = []
        with pytest.raises(KeyboardInterrupt):
            with interrupts_held():
                signal.raise_signal(signal.SIGINT)
                reached.append("after the signal")
        assert reached == ["after the signal"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, outer)


def test_an_ignored_interrupt_stays_ignored_and_other_threads_are_left_alone():
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts_held():
            signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
    seen = []

    def in_a_thread() -> None:
        with interrupts_held():  # signal.signal would raise ValueError outside the main thread
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join(timeout=10)
    assert seen == [before]
