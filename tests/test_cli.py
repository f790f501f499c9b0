"""The command line: help without PyMC, runs summaries, JSON, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from bayesgrpo.cli import main


def test_help_does_not_import_pymc_or_pandas():
    code = (
        "import sys, contextlib, io\n"
        "from bayesgrpo.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['--help']) if False else None\n"
        "    try:\n"
        "        main(['--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(sorted(m for m in ('pymc', 'pytensor', 'pandas', 'arviz') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_runs_prints_one_line_per_run_and_the_report(tmp_path, capsys):
    (tmp_path / "a.csv").write_text("step,reward,kl\n1,0.1,0\n2,0.2,0.1\n2,0.3,0.1\n")
    pd.DataFrame({"step": [1, 2, 3], "reward": [0.5, 0.6, 0.7]}).to_csv(tmp_path / "b.csv", index=False)
    assert main(["runs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "a " in out and "b " in out
    assert "duplicate_step" in out
    assert "0.5 .. 0.7" in out


def test_runs_json(tmp_path, capsys):
    pd.DataFrame({"step": [1, 2, 3], "reward": [0.5, 0.6, 0.7]}).to_csv(tmp_path / "b.csv", index=False)
    assert main(["runs", "--json", str(tmp_path / "b.csv")]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["runs"][0]["n_points"] == 3
    assert payload["report"]["records_read"] == 3


def test_user_errors_exit_2_with_a_message(tmp_path, capsys):
    assert main(["runs", str(tmp_path / "missing.log")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "b.csv").write_text("step,reward\n1,0.1\n")
    assert main(["runs", "--reward", "rewrd", str(tmp_path / "b.csv")]) == 2
    assert "Did you mean 'reward'" in capsys.readouterr().err


def test_console_script_is_installed():
    out = subprocess.run([str(Path(sys.executable).parent / "bayesgrpo"), "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and "bayesgrpo" in out.stdout
