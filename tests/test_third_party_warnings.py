"""Warnings of the libraries under bayesgrpo that a user cannot act on do not reach them."""

from __future__ import annotations

import os
import subprocess
import sys


def _stderr_of(code: str, cache: str) -> str:
    env = {**os.environ, "XDG_CACHE_HOME": cache, "PYTHONWARNINGS": "default"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=120
    )
    return result.stderr


def test_arviz_refactor_notice_is_not_shown_through_bayesgrpo(tmp_path):
    # ArviZ shows its notice once a day per cache folder: fresh folders make it due in both runs
    assert "major refactor" in _stderr_of("import arviz", str(tmp_path / "plain"))
    assert "major refactor" not in _stderr_of("import bayesgrpo.model.reward_model", str(tmp_path / "ours"))
