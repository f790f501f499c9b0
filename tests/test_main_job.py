"""The README's main job, for real: ``bayesgrpo demo`` on the bundled runs (slow lane), with the
CLI's own draws, checked against what the README quotes of it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def quoted_demo_lines() -> str:
    """The README's block of what ``bayesgrpo demo`` prints (the one holding its fit line)."""
    text = README.read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"^```text\n(.*?)^```", text, re.S | re.M) if "fit: numpyro, " in b]
    return block


def fit_numbers(text: str) -> tuple[int, float]:
    """Divergences and max r_hat of a demo's ``fit:`` line."""
    match = re.search(r"^fit: \w+, [\d.]+ s, (\d+) divergences, max r_hat ([\d.]+)", text, re.M)
    assert match, text[-2000:]
    return int(match.group(1)), float(match.group(2))


def covered(text: str) -> int:
    """How many runs ended inside their band, as the demo says it."""
    match = re.search(r"(\d+) of 60 runs \(\d+%\) ended inside it", text)
    assert match, text[-2000:]
    return int(match.group(1))


def test_the_readme_quotes_a_demo_that_says_what_did_not_mix():
    quoted = quoted_demo_lines()
    divergences, r_hat = fit_numbers(quoted)
    assert divergences == 0
    # a fit whose chains disagree says so in one plain line, naming the runs and what it means
    assert (r_hat > 1.01) == ("warning: chains disagree" in quoted)
    assert r_hat <= 1.01 or re.search(r"on runs \S+.*less certain than their intervals say", quoted)


@pytest.mark.slow
def test_demo_fits_forecasts_checks_and_draws_as_the_readme_says(tmp_path):
    out = tmp_path / "demo"
    completed = subprocess.run(
        [sys.executable, "-m", "bayesgrpo.interfaces.cli", "demo", "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=3000,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    text = completed.stdout
    assert "reward at horizon [90% predictive]" in text and "ended inside it" in text
    assert "expected [90% curve]" in text  # the band '!' is judged against, beside it
    # what the README quotes of the demo (its fit at the CLI's default draws), up to sampling:
    # no divergence, and where the chains disagree the fit names the runs in one line
    quoted = quoted_demo_lines()
    divergences, r_hat = fit_numbers(text)
    assert divergences == fit_numbers(quoted)[0] == 0
    assert r_hat <= 1.01 or re.search(r"^warning: chains disagree .* on runs \S+", text, re.M)
    assert abs(covered(text) - covered(quoted)) <= 6
    final = pd.read_csv(out / "final_reward.csv")
    assert len(final) == 60
    assert (final["q05"] <= final["q50"]).all() and (final["q50"] <= final["q95"]).all()
    # the forecasts are checked against where the runs really ended (README: 44 of 60 on
    # 2026-12-07, 43 on 2026-11-26); a collapse of this number is a regression
    assert final["covered_90"].mean() >= 0.5
    assert (out / "forecast.png").stat().st_size > 10_000
    assert (out / "model.nc").exists()
