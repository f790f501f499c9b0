"""The README's main job, for real: ``bayesgrpo demo`` on the bundled runs (slow lane)."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest


@pytest.mark.slow
def test_demo_fits_forecasts_checks_and_draws(tmp_path):
    out = tmp_path / "demo"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "bayesgrpo.interfaces.cli",
            "demo",
            "--draws",
            "200",
            "--tune",
            "200",
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    text = completed.stdout
    assert "reward at horizon [90% predictive]" in text and "ended inside it" in text
    final = pd.read_csv(out / "final_reward.csv")
    assert len(final) == 60
    assert (final["q05"] <= final["q50"]).all() and (final["q50"] <= final["q95"]).all()
    # the forecasts are checked against where the runs really ended; measured 2026-11-21: 35 of 60
    # runs inside their 90% interval (the verl runs keep climbing slowly after a fast start,
    # which one Weibull term under-predicts: README "Where bayesgrpo loses"). A collapse of
    # this number is a regression.
    assert final["covered_90"].mean() >= 0.4
    assert (out / "forecast.png").stat().st_size > 10_000
    assert (out / "model.nc").exists()
