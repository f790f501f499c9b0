"""Names are data, never control, in what the CLI, ``watch`` and the fleet report show and write
(issue 79, part 2): run names from logs with control characters, formulas, 5,000 characters or
long CJK. No sampling: the verbs answer by live updates on a saved population.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from rich.console import Console

from bayesgrpo._text import CONTROL_CHARACTERS, FORMULA_STARTS, printable
from bayesgrpo.errors import MetadataError
from bayesgrpo.interfaces.cli import EXIT_USER_ERROR, main
from bayesgrpo.interfaces.html_report.fleet import write_fleet_report
from bayesgrpo.interfaces.watch.terminal import render_table
from bayesgrpo.interfaces.watch.watcher import RunStatus
from bayesgrpo.logs.readers import load_runs
from bayesgrpo.logs.table import CONTROL_CHARACTERS_KIND
from tests.test_text import RUN_NAMES

SPOOF = "good\x1b[2K\rgood: CONTINUE"


def _write_runs(path: Path, names: list[str], n_steps: int = 40) -> Path:
    """One JSON Lines table of rising runs, one per name (JSON carries any character)."""
    with path.open("w", encoding="utf-8") as file:
        for i, name in enumerate(names):
            for step in range(1, n_steps + 1):
                reward = 0.2 + 0.5 * (1 - np.exp(-step / (15.0 + i))) + 0.01 * np.sin(step)
                file.write(json.dumps({"run_id": name, "step": step * 5, "reward": round(reward, 4)}) + "\n")
    return path


@pytest.fixture(scope="module")
def saved_population(population, tmp_path_factory):
    model, _ = population
    return model.save(tmp_path_factory.mktemp("population") / "population.nc", live_summary=True)


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    assert not any(CONTROL_CHARACTERS.search(line) for line in lines), text
    return lines


def test_a_control_character_in_a_run_name_is_escaped_when_read_and_reported(tmp_path):
    path = _write_runs(tmp_path / "runs.jsonl", [SPOOF, "nul\x00name", "plain"])
    table = load_runs([path], warn=False)
    assert sorted(table.run_ids) == sorted(["good\\x1b[2K\\rgood: CONTINUE", "nul\\x00name", "plain"])
    assert set(table.points["run_id"]) == set(table.run_ids)  # the points follow the runs
    (issue,) = [i for i in table.report.issues if i.kind == CONTROL_CHARACTERS_KIND]
    assert issue.action == "repaired" and issue.count == 2 and table.report.balanced


def test_strict_refuses_run_names_with_control_characters(tmp_path, capsys, saved_population):
    path = _write_runs(tmp_path / "runs.jsonl", [SPOOF])
    code = main(["stop", str(path), "--population", str(saved_population), "--horizon", "400", "--strict"])
    assert code == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "control characters" in err and not CONTROL_CHARACTERS.search(err.replace("\n", ""))


def test_an_escaped_name_that_is_another_run_s_name_is_a_clear_error(tmp_path):
    path = _write_runs(tmp_path / "runs.jsonl", ["a\x1bb", "a\\x1bb"])
    with pytest.raises(MetadataError, match="escaped name of a run"):
        load_runs([path], warn=False)


def test_the_spoofing_name_prints_escaped_on_one_line_in_runs_stop_and_forecast(
    tmp_path, capsys, saved_population
):
    path = _write_runs(tmp_path / "runs.jsonl", [SPOOF, '=HYPERLINK("http://x","y")', "plain"])
    assert main(["runs", str(path)]) == 0
    out = _lines(capsys.readouterr().out)
    assert sum(line.startswith("good\\x1b[2K\\rgood: CONTINUE ") for line in out) == 1
    assert main(["stop", str(path), "--population", str(saved_population), "--horizon", "400"]) == 0
    out = _lines(capsys.readouterr().out)
    assert not any(line.startswith("good: CONTINUE") for line in out)
    assert sum(line.startswith("good\\x1b[2K\\rgood: CONTINUE: ") for line in out) == 1
    out_dir = tmp_path / "out"
    args = ["forecast", str(path), "--population", str(saved_population), "--horizon", "400"]
    assert main([*args, "--output", str(out_dir)]) == 0
    _lines(capsys.readouterr().out)
    final = pd.read_csv(out_dir / "final_reward.csv")
    assert '\'=HYPERLINK("http://x","y")' in set(final["run_id"])  # quoted, not a formula
    assert (final["final_median"].dropna() > 0).all()  # numbers stay numbers


def test_watch_shows_a_spoofing_name_escaped():
    status = RunStatus(SPOOF, "a.log", "ok", 10, 10.0, 0.5, 100.0, 0.6, 0.55, 0.65, 0.95, "stop", "r\x1b[31m")
    console = Console(width=200, record=True, force_terminal=False)
    console.print(render_table([status], title="t"))
    text = console.export_text()
    assert "good\\x1b[2K\\rgood: CONTINUE" in text
    assert "\x1b" not in text and "\r" not in text and "r\\x1b[31m" in text


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(name=RUN_NAMES)
def test_any_run_name_is_shown_as_data_by_runs_stop_and_forecast(
    tmp_path_factory, capsys, saved_population, name
):
    folder = tmp_path_factory.mktemp("hostile")
    path = _write_runs(folder / "runs.jsonl", [name, "zz-plain"])
    try:
        run_ids = load_runs([path], warn=False).run_ids
    except MetadataError:  # the name escaped is "zz-plain": no such name drawn, but said clearly
        return
    capsys.readouterr()
    assert main(["runs", str(path), "-q"]) == 0
    out = _lines(capsys.readouterr().out)
    assert len([line for line in out if line]) == 1 + len(run_ids)  # a header, then one line a run
    assert main(["stop", str(path), "--population", str(saved_population), "--horizon", "400"]) == 0
    out = _lines(capsys.readouterr().out)
    decisions = [line for line in out if not line.startswith(" ") and " at step " in line]
    assert len(decisions) == len(run_ids)
    out_dir = folder / "out"
    args = ["forecast", str(path), "--population", str(saved_population), "--horizon", "400"]
    assert main([*args, "--output", str(out_dir)]) == 0
    _lines(capsys.readouterr().out)
    final = pd.read_csv(out_dir / "final_reward.csv", keep_default_na=False, dtype={"run_id": str})
    for cell in final["run_id"]:
        assert not cell.startswith(FORMULA_STARTS) or cell.lstrip("+-").replace(".", "", 1).isdigit()
    assert len(final) == len(run_ids)
    assert {printable(r) for r in run_ids} == set(run_ids)  # escaped when read


@pytest.mark.filterwarnings("ignore:Glyph .* missing from font")  # the CJK name in the title
def test_a_fleet_page_draws_runs_with_names_too_long_for_a_file_name(tmp_path):
    names = ["x" * 5000, "漢" * 52]
    path = _write_runs(tmp_path / "runs.jsonl", names, n_steps=30)
    page = write_fleet_report([path], tmp_path / "fleet.html", figures="all", max_inline=0)
    figures = sorted((tmp_path / "fleet_figures").iterdir())
    assert page.is_file() and len(figures) == 2
    assert all(len(f.name.encode("utf-8")) <= 120 and f.suffix == ".png" for f in figures)
    text = page.read_text(encoding="utf-8")
    assert all(f"fleet_figures/{f.name}" in text for f in figures)
