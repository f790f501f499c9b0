"""A levelled-off run on 0 .. 1 (issue 75): what ``bayesgrpo stop`` shows may not exclude the
plateau its own points show.

The run is exactly the issue's: ``0.2 + 0.5 (1 - exp(-step / 15))`` with noise sd 0.05, 40 steps of
a 100-step run, a plain ``step,reward`` CSV. Its true remaining gain is 0.034 and its expected
reward at step 100 is 0.699.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bayesgrpo.interfaces.cli import main
from bayesgrpo.logs.readers import load_runs
from bayesgrpo.model.datasets import bundled_population
from bayesgrpo.model.draws import band_draws
from bayesgrpo.questions.live import LiveForecaster

HORIZON = 100
LAST_STEP = 40


def _truth(step: float) -> float:
    return 0.2 + 0.5 * (1.0 - np.exp(-step / 15.0))


TRUE_GAIN = _truth(HORIZON) - _truth(LAST_STEP)  # 0.034


def _plateau_csv(folder: Path) -> Path:
    steps = np.arange(1, LAST_STEP + 1)
    rewards = _truth(steps) + 0.05 * np.random.default_rng(0).standard_normal(steps.size)
    path = folder / "bad.csv"
    pd.DataFrame({"step": steps, "reward": rewards}).to_csv(path, index=False)
    return path


#: How far the 90% gain band's lower edge may sit above the true gain: the truth lies near that
#: edge, which moves by about 0.006 between seeds of the update (0.030 / 0.035 / 0.030 at seeds
#: 0 / 1 / 2); the issue's band, [0.141, 0.287], missed it by 0.1.
EDGE_SEED_SPREAD = 0.006


def test_stop_shows_no_band_or_gain_that_excludes_the_plateau(tmp_path, capsys):
    log = _plateau_csv(tmp_path)
    assert main(["stop", str(log), "--horizon", str(HORIZON), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["gain_lower"] - EDGE_SEED_SPREAD <= TRUE_GAIN <= row["gain_upper"]
    assert row["final_lower"] <= _truth(HORIZON) <= row["final_upper"]


def test_the_plateau_is_covered_when_the_range_is_read_from_the_run(tmp_path):
    # read as a score on 0 .. 1 (the reading since removed) it was not: expected remaining gain
    # 0.242 [0.141, 0.287], curve at step 100 [0.818, 0.989]
    run = load_runs([_plateau_csv(tmp_path)])
    live = LiveForecaster(bundled_population(), random_seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        update = live.update(run, horizon=HORIZON)
    curve = band_draws(update.curve_draws, [float(LAST_STEP), float(HORIZON)], "curve", 0)[:, 0, :]
    low, high = np.quantile(curve[:, 1] - curve[:, 0], [0.05, 0.95])
    assert low <= TRUE_GAIN <= high
    low, high = np.quantile(curve[:, 1], [0.05, 0.95])
    assert low <= _truth(HORIZON) <= high
