"""Saves are atomic, and a model read lazily notices its file replaced (issue 79, part 1).

A process saving a model over an older one is killed (SIGKILL) at random moments; after each
kill the file loads and is the old model or the new one, never neither and never half of one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bayesgrpo._files import atomic_path, atomic_write_text
from bayesgrpo.errors import ModelConfigError
from bayesgrpo.model.live_summary import live_summary_path
from bayesgrpo.model.reward_model import RewardModel

ROOT = Path(__file__).resolve().parents[2]

#: A process that loads two saved models, then, for each line read (``old`` or ``new``), forks a
#: child that saves that model over the target and says the child's pid; at the next line it reaps
#: the child and says how it ended. Forking
#: spares 20 imports of ArviZ (4 s each); the parent holds no HDF5 file open when it forks. Its
#: first line is how long a save takes in a forked child.
_SAVER = """
import os, sys, time
from bayesgrpo.model.reward_model import RewardModel
old, new, target, scratch = sys.argv[1:5]
models = {"new": RewardModel.load(new), "old": RewardModel.load(old)}
for model in models.values():
    model.idata  # read whole, nothing left to read lazily

def save_in_child(name, path):
    pid = os.fork()
    if pid == 0:
        try:
            models[name].save(path, live_summary=True)
        finally:
            os._exit(0)
    return pid

start = time.perf_counter()
os.waitpid(save_in_child("new", scratch), 0)  # every import a save needs, done before a fork
print(time.perf_counter() - start, flush=True)
while line := sys.stdin.readline().strip():
    pid = save_in_child(line, target)
    print(pid, flush=True)
    sys.stdin.readline()  # killed: a child that had ended stays a zombie, its pid not reused, till then
    print(os.waitpid(pid, 0)[1], flush=True)
"""


def _max_r_hat(loaded: RewardModel) -> float:
    """The model's r-hat as its diagnostics say, checked against the attributes of the posterior read
    from the file (a live summary of another file would disagree).
    """
    assert loaded.diagnostics is not None and loaded.posterior is not None
    in_file = json.loads(loaded.posterior.attrs["bayesgrpo_diagnostics"])["max_r_hat"]
    assert in_file == loaded.diagnostics.max_r_hat
    return float(in_file)


@pytest.fixture
def two_models(population, tmp_path):
    """The population saved twice, told apart by their diagnostics' r-hat (1.0 and 9.0)."""
    model, _ = population
    old = dataclasses.replace(model.diagnostics, max_r_hat=1.0)
    new = dataclasses.replace(model.diagnostics, max_r_hat=9.0)
    paths = {}
    for name, diagnostics in (("old", old), ("new", new)):
        copy = RewardModel.load(model.save(tmp_path / f"{name}.nc"))
        copy.diagnostics = diagnostics
        paths[name] = copy.save(tmp_path / f"{name}.nc")
    return model, paths


@pytest.mark.slow  # 20 saves of 0.6 s, killed or not, after 5 s of imports
@pytest.mark.skipif(not hasattr(os, "fork"), reason="the saving process forks its children")
def test_a_save_killed_at_random_moments_leaves_the_old_model_or_the_new_one(two_models, tmp_path):
    model, paths = two_models
    folder = tmp_path / "target"
    folder.mkdir()
    target = folder / "model.nc"
    RewardModel.load(paths["old"]).save(target, live_summary=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    arguments = [str(p) for p in (paths["old"], paths["new"], target, tmp_path / "s.nc")]
    saver = subprocess.Popen(
        [sys.executable, "-c", _SAVER, *arguments],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert saver.stdin is not None and saver.stdout is not None
    r_hat = {"old": 1.0, "new": 9.0}
    rng = np.random.default_rng(79)
    there, killed, partial_left = "old", 0, 0
    try:
        save_seconds = float(saver.stdout.readline())
        for _ in range(20):
            saving = "new" if there == "old" else "old"
            saver.stdin.write(saving + "\n")
            saver.stdin.flush()
            child = int(saver.stdout.readline())
            time.sleep(rng.uniform(0.0, 1.2 * save_seconds))  # now and then after the save ended
            os.kill(child, signal.SIGKILL)
            saver.stdin.write("killed\n")
            saver.stdin.flush()
            status = int(saver.stdout.readline())
            loaded = _max_r_hat(RewardModel.load(target))
            if os.WIFSIGNALED(status):  # killed: the old model or the new one
                killed += 1
                assert loaded in (r_hat[there], r_hat[saving])
            else:  # the save had ended
                assert loaded == r_hat[saving]
            there = saving if loaded == r_hat[saving] else there
            reread = RewardModel.load(target).posterior  # the whole file, read lazily
            np.testing.assert_array_equal(reread["nu"].to_numpy(), model.posterior["nu"].to_numpy())
            for leftover in folder.glob(".*.partial"):  # a kill mid-write leaves its temporary file
                partial_left += 1
                leftover.unlink()
    finally:
        saver.kill()
        saver.wait()
    assert sorted(p.name for p in folder.iterdir()) == ["model.live.npz", "model.nc"]
    assert killed > 0 and partial_left > 0  # kills landed mid-write


def test_a_lazily_loaded_model_whose_file_was_replaced_says_so(two_models, tmp_path):
    _, paths = two_models
    target = tmp_path / "model.nc"
    RewardModel.load(paths["old"]).save(target, live_summary=True)
    lazy = RewardModel.load(target)
    assert lazy._unread == target  # read from its live summary, the posterior not yet
    RewardModel.load(paths["new"]).save(target)  # the same configuration: the old check let it by
    with pytest.raises(ModelConfigError, match="replaced, changed or removed after this model was loaded"):
        _ = lazy.posterior
    again = RewardModel.load(target)  # loaded again, the new file is read
    assert _max_r_hat(again) == 9.0


def test_a_lazily_loaded_model_whose_file_is_unchanged_reads_it(two_models, tmp_path):
    _, paths = two_models
    target = tmp_path / "model.nc"
    RewardModel.load(paths["old"]).save(target, live_summary=True)
    lazy = RewardModel.load(target)
    assert lazy._unread == target
    assert _max_r_hat(lazy) == 1.0


def test_an_atomic_write_that_fails_leaves_the_target_and_no_temporary_file(tmp_path):
    target = atomic_write_text(tmp_path / "page.html", "old")
    with pytest.raises(RuntimeError), atomic_path(target) as partial:
        partial.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old" and sorted(tmp_path.iterdir()) == [target]
    atomic_write_text(target, "new")
    assert target.read_text() == "new" and sorted(tmp_path.iterdir()) == [target]


def test_a_live_summary_is_written_atomically(population, tmp_path):
    model, _ = population
    path = model.save(tmp_path / "model.nc", live_summary=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.live.npz", "model.nc"]
    assert live_summary_path(path).stat().st_size > 0
