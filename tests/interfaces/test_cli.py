"""The command line: help without PyMC, runs summaries, JSON, errors."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesgrpo.model.datasets
from bayesgrpo.errors import FitWarning
from bayesgrpo.interfaces.cli import EXIT_USER_ERROR, build_parser, main
from bayesgrpo.interfaces.text import distinguishing_digits, format_interval
from bayesgrpo.logs.writers.verl import write_verl_console
from bayesgrpo.model import reward_model
from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.model.simulate import simulate_runs
from bayesgrpo.questions.stopping import default_rule, rules
from tests.conftest import fake_sample


def test_help_does_not_import_pymc_or_pandas():
    code = (
        "import sys, contextlib, io\n"
        "from bayesgrpo.interfaces.cli import main\n"
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
    out = subprocess.run(
        [str(Path(sys.executable).parent / "bayesgrpo"), "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "bayesgrpo" in out.stdout


def _write_simulated_runs(folder: Path) -> Path:
    """Three simulated runs as one CSV per run, with a metadata file of bounds and families."""
    sim = simulate_runs(3, n_steps=60, random_seed=2)
    logs = folder / "logs"
    logs.mkdir()
    for run_id, frame in sim.table.points.groupby("run_id"):
        frame[["step", "reward"]].to_csv(logs / f"{run_id}.csv", index=False)
    sim.table.runs[["run_id", "family", "size_b", "reward_min", "reward_max", "total_steps"]].to_csv(
        folder / "meta.csv", index=False
    )
    return folder


def test_forecast_with_a_cut_prints_forecast_truth_and_stop_decision(tmp_path, capsys, mocked):
    folder = _write_simulated_runs(tmp_path)
    out_dir = tmp_path / "out"
    code = main(
        [
            "forecast",
            str(folder / "logs"),
            "--metadata",
            str(folder / "meta.csv"),
            "--cut",
            "0.5",
            "--output",
            str(out_dir),
            "--no-figure",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "reward at horizon [90% predictive]" in out and "stop at cut?" in out
    assert "ended inside it" in out and "would stop at the cut" in out
    # issue 75: '!' was judged against a band the table did not print; it prints it beside
    assert (
        "expected [90% curve]" in out and "'!' = outside the 90% band of the expected reward printed" in out
    )
    final = pd.read_csv(out_dir / "final_reward.csv")
    assert len(final) == 3
    assert {"q05", "q50", "q95", "stop_at_cut", "p_gain_below_eps", "covered_90", "cut_step"} <= set(
        final.columns
    )
    inside = (final["expected_q05"] <= final["last_logged"]) & (final["last_logged"] <= final["expected_q95"])
    assert (inside == final["covered_90"]).all()
    assert (final["q05"] <= final["q95"]).all()
    assert set(final["stop_at_cut"]) <= {"stop", "continue", "undecided"}
    assert (out_dir / "model.nc").exists()


def test_forecast_json_is_machine_readable(tmp_path, capsys, mocked):
    folder = _write_simulated_runs(tmp_path)
    assert (
        main(
            [
                "forecast",
                str(folder / "logs"),
                "--metadata",
                str(folder / "meta.csv"),
                "--json",
                "--output",
                str(tmp_path / "o"),
                "--no-figure",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert len(data["final_reward"]) == 3 and data["fit"]["n_runs"] == 3


def test_demo_takes_the_forecast_options():
    args = build_parser().parse_args(["demo"])
    assert args.cut == 0.5 and args.output == "bayesgrpo-demo" and args.sampler == "numpyro"
    assert build_parser().parse_args(["forecast"]).cut is None


def test_stop_fits_the_runs_and_says_stop_or_continue_with_a_reason(tmp_path, capsys, mocked):
    folder = _write_simulated_runs(tmp_path)
    code = main(
        [
            "stop",
            str(folder / "logs"),
            "--metadata",
            str(folder / "meta.csv"),
            "--horizon",
            "120",
            "--no-bundled",
            "--json",
        ]
    )
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 3
    for row in rows:
        assert row["decision"] in ("stop", "continue", "undecided")
        assert 0 <= row["probability"] <= 1
        assert row["horizon_step"] == 120 and row["step"] == 60
        assert row["reason"]


def test_stop_with_a_saved_population_answers_by_live_update(tmp_path, capsys, mocked):
    population = RewardModel().fit(simulate_runs(6, n_steps=80, random_seed=5).table, random_seed=1)
    population.save(tmp_path / "population.nc")
    folder = _write_simulated_runs(tmp_path)
    code = main(
        [
            "stop",
            str(folder / "logs"),
            "--metadata",
            str(folder / "meta.csv"),
            "--horizon",
            "200",
            "--population",
            str(tmp_path / "population.nc"),
            "--rule",
            "target",
            "--target",
            "0.5",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert out.count("at step 60 of 200") == 3
    assert "STOP" in out or "CONTINUE" in out


def test_stop_without_a_population_uses_the_shipped_one(tmp_path, capsys, monkeypatch, population):
    model, _ = population
    monkeypatch.setattr(bayesgrpo.model.datasets, "bundled_population", lambda: model)
    folder = _write_simulated_runs(tmp_path)
    code = main(
        ["stop", str(folder / "logs"), "--metadata", str(folder / "meta.csv"), "--horizon", "200", "--json"]
    )
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 3 and all(row["step"] == 60 and row["horizon_step"] == 200 for row in rows)
    assert all(row["pareto_k"] is not None for row in rows)  # answered by a live update, not a fit


@pytest.mark.parametrize(
    ("values", "digits"),
    [
        ((0.577, 0.137, 0.994), 3),  # an ordinary band: three digits, as before
        ((1_101_300.0, 1_097_100.0, 1_110_000.0), 4),  # a band far narrower than its level
        ((0.982, 0.956, 1.01), 3),  # across a power of ten, still told apart at 3
        ((0.5, 0.5, 0.5), 3),  # nothing to tell apart
        ((1.0, float("nan"), 2.0), 3),  # non-finite values are left out
        ((1.0, 1.0 + 1e-12, 2.0), 10),  # capped
    ],
)
def test_distinguishing_digits_tell_a_band_apart(values, digits):
    assert distinguishing_digits(*values) == digits


def test_format_interval_keeps_the_ends_of_a_narrow_band_apart():
    text = format_interval(1_101_300.0, 1_097_100.0, 1_110_000.0)
    median, lower, upper = (float(x) for x in text.replace("[", "").replace("]", "").replace(",", "").split())
    assert lower < median < upper  # with 3 digits the median and the lower end read 1.1e+06
    assert format_interval(0.577, 0.137, 0.994, width=8) == "   0.577 [0.137, 0.994]"


def test_stop_prints_a_band_far_from_zero_with_digits_that_tell_its_ends_apart(tmp_path, capsys):
    steps = np.arange(1, 101)
    rng = np.random.default_rng(0)
    reward = 1e6 + 1e5 * (1.0 - np.exp(-steps / 20.0)) + rng.normal(0.0, 1e3, steps.size)
    path = tmp_path / "big.csv"
    pd.DataFrame({"step": steps, "reward": reward}).to_csv(path, index=False)
    assert main(["stop", str(path), "--horizon", "200"]) == 0
    line = next(text for text in capsys.readouterr().out.splitlines() if "reward at step 200:" in text)
    numbers = line.split(":", 1)[1].split("(")[0].replace("[", "").replace("]", "").replace(",", "").split()
    median, lower, upper = (float(x) for x in numbers)
    assert lower < median < upper


def test_stop_with_the_gain_rate_rule(tmp_path, capsys, monkeypatch, population):
    model, _ = population
    monkeypatch.setattr(bayesgrpo.model.datasets, "bundled_population", lambda: model)
    folder = _write_simulated_runs(tmp_path)
    argv = ["stop", str(folder / "logs"), "--metadata", str(folder / "meta.csv"), "--horizon", "200"]
    assert main([*argv, "--rule", "gain-rate", "--rate", "0.05", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 3
    assert all(row["rule"] == "GainRateRule(rate=0.05 of the reward range per run)" for row in rows)
    assert all("of the run" in row["reason"] for row in rows)
    # a rate no run's expected gain reaches stops every run
    assert main([*argv, "--rule", "gain-rate", "--rate", "100", "--json"]) == 0
    assert all(row["decision"] == "stop" for row in json.loads(capsys.readouterr().out))


def test_stop_with_the_guarded_budget_rule(tmp_path, capsys, monkeypatch, population):
    model, _ = population
    monkeypatch.setattr(bayesgrpo.model.datasets, "bundled_population", lambda: model)
    folder = _write_simulated_runs(tmp_path)
    argv = ["stop", str(folder / "logs"), "--metadata", str(folder / "meta.csv"), "--horizon", "200"]
    # the runs are at step 60 of 200: 30% of the horizon, before a budget of 0.5 and past one of 0.25
    assert main([*argv, "--rule", "guarded-budget", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 3 and all(row["rule"].startswith("GuardedBudgetRule(stop at 0.5") for row in rows)
    assert all("before the budget of 50%" in row["reason"] for row in rows)
    assert main([*argv, "--rule", "guarded-budget", "--budget", "0.25", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all("past the budget of 25%" in row["reason"] for row in rows)
    with pytest.raises(SystemExit, match="--budget"):
        main([*argv, "--rule", "guarded-budget", "--budget", "1.5"])
    # the opt-in flat stop: named in the rule, its evidence in every row, refused by other rules
    assert main([*argv, "--rule", "guarded-budget", "--flat-stop", "0.02", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all("stop where the logged reward rose < 0.02" in row["rule"] for row in rows)
    assert all(np.isfinite(row["flat_rise_upper"]) and row["stopped_flat"] in (0.0, 1.0) for row in rows)
    assert all((row["stopped_flat"] == 1.0) == ("no longer climbs" in row["reason"]) for row in rows)
    # every run rose less than its whole range: each stops unless the rise guard holds it
    assert main([*argv, "--rule", "guarded-budget", "--flat-stop", "1.0", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert any(row["stopped_flat"] == 1.0 for row in rows)
    for row in rows:
        rising = row["recent_rise_lower"] > 0.01 * (row["eps_range_upper"] - row["eps_range_lower"])
        assert (row["decision"] == "stop") != rising, row
    with pytest.raises(SystemExit, match="--flat-stop goes with --rule guarded-budget"):
        main([*argv, "--rule", "plateau", "--flat-stop", "0.02"])
    with pytest.raises(SystemExit, match="--flat-stop"):
        main([*argv, "--flat-stop", "-1"])


def test_stop_decides_with_the_default_rule_unless_a_plateau_option_is_given(
    tmp_path, capsys, monkeypatch, population
):
    model, _ = population
    monkeypatch.setattr(bayesgrpo.model.datasets, "bundled_population", lambda: model)
    folder = _write_simulated_runs(tmp_path)
    argv = ["stop", str(folder / "logs"), "--metadata", str(folder / "meta.csv"), "--horizon", "200"]
    argv.append("--json")
    assert main(argv) == 0
    rules_named = {row["rule"] for row in json.loads(capsys.readouterr().out)}
    assert rules_named == {str(default_rule())} and str(default_rule()).startswith("FixedBudgetRule")
    # the runs are at step 60 of 200: before the budget of 65%, and past one of 25%
    assert main([*argv, "--budget", "0.25"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(row["decision"] == "stop" and "past the budget of 25%" in row["reason"] for row in rows)
    assert all("as information: P(gain <" in row["reason"] for row in rows)
    # a plateau option without --rule asks the plateau rule it sets: no option is ignored
    for options, named in (
        (["--eps", "0.02"], "PlateauRule(eps=0.02 of the reward range, prob=0.9)"),
        (["--prob", "0.8"], "PlateauRule(eps=0.01 of the reward range, prob=0.8)"),
        (["--absolute", "--eps", "0.05"], "PlateauRule(eps=0.05, prob=0.9)"),
    ):
        assert main([*argv, *options]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert all(row["rule"] == named for row in rows), (options, rows[0]["rule"])
    # with --rule the plateau options keep their old meaning, and the budget rule still refuses --absolute
    assert main([*argv, "--rule", "guarded-budget", "--budget", "0.25"]) == 0
    with pytest.raises(SystemExit, match="drop --absolute"):
        main([*argv, "--rule", "guarded-budget", "--absolute"])


def test_stop_needs_a_horizon(tmp_path, capsys):
    folder = _write_simulated_runs(tmp_path)
    try:
        main(["stop", str(folder / "logs"), "--no-bundled"])
    except SystemExit as exc:
        assert "no --horizon" in str(exc)
    else:
        raise AssertionError("expected SystemExit")


def test_stop_answers_every_run_it_can_and_says_why_not_for_the_others(tmp_path, capsys):
    folder = _write_simulated_runs(tmp_path)
    runs = sorted(path.stem for path in (folder / "logs").glob("*.csv"))
    planned = pd.DataFrame({"run_id": runs, "total_steps": [100.0] + [float("nan")] * (len(runs) - 1)})
    planned.to_csv(folder / "planned.csv", index=False)
    argv = ["stop", str(folder / "logs"), "--metadata", str(folder / "planned.csv")]
    assert main([*argv, "--json"]) == 0
    rows = {row["run_id"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == set(runs)
    assert rows[runs[0]]["decision"] in ("stop", "continue") and rows[runs[0]]["horizon_step"] == 100
    for run_id in runs[1:]:
        assert rows[run_id]["decision"] is None and "give --horizon" in rows[run_id]["reason"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"{runs[1]}: no answer: no --horizon given" in out and f"{runs[0]}: " in out


def test_diagnose_names_the_collapsed_bundled_run(capsys):
    assert main(["diagnose", "--bundled", "--min-severity", "high"]) == 0
    out = capsys.readouterr().out
    assert "Gemma4_E2B_Reinforcement_Learning_Sudoku_Game_d5e51b2" in out and "[high] collapse" in out
    assert "verl_asyncRA_q7b_fsdp_base" not in out
    assert main(["diagnose", "--bundled", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {"run_id", "name", "severity", "evidence", "action"} <= set(rows[0])


def test_stop_refuses_a_horizon_the_run_has_passed(tmp_path):
    folder = _write_simulated_runs(tmp_path)
    try:
        main(["stop", str(folder / "logs"), "--horizon", "10", "--no-bundled"])
    except SystemExit as exc:
        assert "past the horizon 10" in str(exc)
    else:
        raise AssertionError("expected SystemExit")


def test_forecast_of_plain_csvs_without_metadata_prints_every_run(tmp_path, capsys, mocked):
    folder = _write_simulated_runs(tmp_path)  # the metadata file is not passed: no family, no size
    common = ["forecast", str(folder / "logs"), "--output", str(tmp_path / "out"), "--no-figure"]
    with pytest.raises(SystemExit, match="give --horizon"):  # no run states its end: none to forecast
        main(common)
    code = main([*common, "--horizon", "60"])
    assert code == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("sim")]
    assert len(rows) == 3
    final = pd.read_csv(tmp_path / "out" / "final_reward.csv")
    assert len(final) == 3 and final["q50"].notna().all()
    assert "reward at horizon [90% predictive]" in out and "families: none stated" in out


def test_forecast_answers_each_run_with_a_horizon_and_says_why_not_of_the_others(tmp_path, capsys, mocked):
    # issue 75: a run with no horizon got its last logged point as its "final" forecast
    folder = _write_simulated_runs(tmp_path)
    meta = pd.read_csv(folder / "meta.csv")
    meta.loc[meta["run_id"] == "sim001", "total_steps"] = np.nan
    meta.to_csv(folder / "meta.csv", index=False)
    common = ["forecast", str(folder / "logs"), "--metadata", str(folder / "meta.csv"), "--no-figure"]
    assert main([*common, "--output", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "sim001: no answer: no --horizon given and its logs state no total_steps: give --horizon" in out
    final = pd.read_csv(tmp_path / "out" / "final_reward.csv")
    assert sorted(final["run_id"]) == ["sim000", "sim002"] and (final["horizon_step"] == 60).all()
    assert main([*common, "--output", str(tmp_path / "o"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [row["run_id"] for row in data["no_answer"]] == ["sim001"]
    assert sorted(row["run_id"] for row in data["final_reward"]) == ["sim000", "sim002"]


def test_forecast_fits_every_readable_log_and_lists_the_others(tmp_path, capsys, mocked):
    # issue 79: one unreadable file in the folder stopped the pooled fit of every other run
    folder = _write_simulated_runs(tmp_path)
    (folder / "logs" / "broken.csv").write_bytes(b"\x00\xff\x00garbage\n\x01\x02")
    common = ["forecast", str(folder / "logs"), "--metadata", str(folder / "meta.csv"), "--no-figure"]
    assert main([*common, "--output", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "broken.csv: ERROR" in out
    assert sorted(pd.read_csv(tmp_path / "out" / "final_reward.csv")["run_id"]) == [
        "sim000",
        "sim001",
        "sim002",
    ]
    assert main([*common, "--output", str(tmp_path / "o"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (unreadable,) = data["unreadable"]
    assert unreadable["path"].endswith("broken.csv") and unreadable["error"]


def test_forecast_takes_a_horizon_and_names_its_band(tmp_path, capsys, mocked):
    folder = _write_simulated_runs(tmp_path)
    out_dir = tmp_path / "out"
    common = ["forecast", str(folder / "logs"), "--output", str(out_dir), "--no-figure", "--seed", "3"]
    assert main([*common, "--horizon", "150"]) == 0
    predictive = pd.read_csv(out_dir / "final_reward.csv")
    assert (predictive["horizon_step"] == 150).all() and (predictive["band"] == "predictive").all()
    assert main([*common, "--horizon", "150", "--band", "curve"]) == 0
    curve = pd.read_csv(out_dir / "final_reward.csv")
    assert (curve["band"] == "curve").all()
    # the same fit (same seed): the noise only widens the band
    assert ((predictive["q95"] - predictive["q05"]) > (curve["q95"] - curve["q05"])).all()
    assert "reward at horizon [90% curve]" in capsys.readouterr().out


def _bad_csv(tmp_path):
    """A user's CSV with a text value and a NaN in the reward column."""
    path = tmp_path / "bad.csv"
    rows = ["step,reward", "1,0.1", "2,abc", "3,0.3", "4,nan"] + [
        f"{s},{0.3 + 0.01 * s}" for s in range(5, 30)
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("verb", ["stop", "diagnose"])
def test_every_command_says_what_reading_the_logs_repaired(tmp_path, capsys, monkeypatch, population, verb):
    model, _ = population
    monkeypatch.setattr(bayesgrpo.model.datasets, "bundled_population", lambda: model)
    path = _bad_csv(tmp_path)
    extra = ["--horizon", "100"] if verb == "stop" else []
    assert main([verb, str(path), *extra]) == 0
    err = capsys.readouterr().err
    assert err.count("bayesgrpo: reading the logs repaired or dropped records") == 1
    assert "non_numeric" in err and "kept 27 of 29" in err
    assert main([verb, str(path), *extra, "-v"]) == 0
    assert "line 3" in capsys.readouterr().err  # -v: every issue, where it was
    assert main([verb, str(path), *extra, "-q"]) == 0
    assert "repaired" not in capsys.readouterr().err
    assert main([verb, str(path), *extra, "--strict"]) != 0  # refused, with where and what
    assert "line 3" in capsys.readouterr().err


def _rising_run_on_shipped(tmp_path, monkeypatch, population):
    """A 40-step run rising from 0.2 to 0.5 (``run.csv``), with the test population as the shipped one."""
    model, _ = population
    monkeypatch.setattr(bayesgrpo.model.datasets, "bundled_population", lambda: model)
    path = tmp_path / "run.csv"
    path.write_text("step,reward\n" + "".join(f"{s},{0.2 + 0.3 * s / 40}\n" for s in range(1, 41)))
    return path


def _wide_rising_run(tmp_path):
    """A 40-step run rising from 1.2 to 2.4 (``wide.csv``): outside 0 .. 1, so its range is estimated."""
    path = tmp_path / "wide.csv"
    path.write_text("step,reward\n" + "".join(f"{s},{1.2 + 1.2 * s / 40}\n" for s in range(1, 41)))
    return path


def test_stop_says_which_range_eps_is_taken_against(tmp_path, capsys, monkeypatch, population):
    _rising_run_on_shipped(tmp_path, monkeypatch, population)
    wide = _wide_rising_run(tmp_path)
    assert main(["stop", str(wide), "--horizon", "100", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (
        row["eps_range_source"] == "estimated" and row["eps_range_lower"] < 1.2 < 2.4 < row["eps_range_upper"]
    )
    assert row["decision"] in ("stop", "continue", "undecided")
    assert main(["stop", str(wide), "--horizon", "100"]) == 0
    assert "estimated from the run's logged points" in capsys.readouterr().out
    # rewards inside 0 .. 1 and no range stated: estimated too (a noisy accuracy need not near 1)
    path = tmp_path / "run.csv"
    assert main(["stop", str(path), "--horizon", "100", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["eps_range_source"] == "estimated" and "read as a score" not in row["eps_range_note"]
    meta = tmp_path / "meta.csv"
    meta.write_text("run_id,reward_min,reward_max\nrun,0,1\n")
    assert main(["stop", str(path), "--horizon", "100", "--metadata", str(meta), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["eps_range_source"], row["eps_range_lower"], row["eps_range_upper"]) == ("stated", 0.0, 1.0)


def test_reward_range_states_the_range_of_every_run(tmp_path, capsys, monkeypatch, population):
    """``--reward-range LOW HIGH`` is a stated range for every run read; a run's own metadata row
    wins over it; without it, a run whose rewards all lie in 0..1 has its range estimated from its
    points, like any other.
    """
    path = _rising_run_on_shipped(tmp_path, monkeypatch, population)
    assert main(["stop", str(path), "--horizon", "100"]) == 0
    out = capsys.readouterr().out
    assert "estimated from the run's logged points" in out and "read as a score" not in out
    assert main(["stop", str(path), "--horizon", "100", "--reward-range", "0", "1", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["eps_range_source"], row["eps_range_lower"], row["eps_range_upper"]) == ("stated", 0.0, 1.0)
    assert "lies in 0 .. 1" not in row["eps_range_note"]
    meta = tmp_path / "meta.csv"
    meta.write_text("run_id,reward_min,reward_max\nrun,-1,2\n")
    argv = ["stop", str(path), "--horizon", "100", "--reward-range", "0", "1", "--metadata", str(meta)]
    argv.append("--json")
    assert main(argv) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["eps_range_lower"], row["eps_range_upper"]) == (-1.0, 2.0)  # the run's own row wins
    assert main(["stop", str(path), "--horizon", "100", "--reward-range", "1", "0"]) == EXIT_USER_ERROR
    assert "--reward-range needs LOW < HIGH" in capsys.readouterr().err
    wide = tmp_path / "wide.csv"
    wide.write_text("step,reward\n" + "".join(f"{s},{-1 + 3 * s / 40}\n" for s in range(1, 41)))
    assert main(["stop", str(wide), "--horizon", "100"]) == 0
    assert "lies in 0 .. 1" not in capsys.readouterr().out


def test_a_fit_that_did_not_mix_is_said_once(tmp_path, capsys, monkeypatch, fast_compile):
    """The fit's own warnings reach the user once: in the CLI's fit summary, not also as a
    Python warning and a log line.
    """
    message = "chains disagree (max r_hat 1.200 > 1.01): run more draws"

    def poorly_mixed(model, **kwargs):
        idata, diagnostics = fake_sample(model, **kwargs)
        diagnostics.warnings.append(message)
        return idata, diagnostics

    monkeypatch.setattr(reward_model, "sample_model", poorly_mixed)
    folder = _write_simulated_runs(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(
            [
                "forecast",
                str(folder / "logs"),
                "--horizon",
                "60",
                "--output",
                str(tmp_path / "out"),
                "--no-figure",
            ]
        )
    assert code == 0
    captured = capsys.readouterr()
    assert (captured.out + captured.err).count("chains disagree") == 1
    assert not [w for w in caught if "chains disagree" in str(w.message)]
    # in Python, the same fit warns once, as a FitWarning
    with pytest.warns(FitWarning, match="chains disagree") as record:
        RewardModel().fit(load_bundled(warn=False).select(load_bundled(warn=False).run_ids[:3]), draws=10)
    assert sum("chains disagree" in str(w.message) for w in record) == 1


def test_stop_confirm_asks_the_earlier_checks_and_stops_only_when_all_say_so(tmp_path, capsys, monkeypatch):
    steps = list(range(1, 181))
    flat = [0.6 + 0.01 * ((7 * s) % 5 - 2) for s in steps]  # long done rising: on its plateau
    write_verl_console(
        tmp_path / "flat.log",
        pd.DataFrame({"step": steps, "critic/score/mean": flat}),
        total_training_steps=200,
    )
    asked: list[float] = []
    original = rules.PlateauRule.decide

    def recording(self, cd, step_now, horizon_step=None):
        asked.append(float(step_now))
        return original(self, cd, step_now, horizon_step)

    monkeypatch.setattr(rules.PlateauRule, "decide", recording)
    assert main(["stop", str(tmp_path / "flat.log"), "--rule", "plateau", "--confirm", "3", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert asked == [160.0, 170.0, 180.0]  # 10 and 5 steps of 200 earlier, then now
    assert row["decision"] == "stop" and "confirmed at 3 checks" in row["rule"]

    asked.clear()
    short = pd.DataFrame({"step": [179, 180], "critic/score/mean": [0.6, 0.6]})
    write_verl_console(tmp_path / "short.log", short, total_training_steps=200)
    assert main(["stop", str(tmp_path / "short.log"), "--rule", "plateau", "--confirm", "2", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert asked == [180.0]  # no earlier check with two points: the run cannot stop yet
    assert row["decision"] != "stop"
    for bad in (["--confirm", "0"], ["--confirm", "2", "--workers", "2"], ["--confirm", "2", "--fit"]):
        with pytest.raises(SystemExit, match="--confirm"):
            main(["stop", str(tmp_path / "flat.log"), *bad])


def test_an_empty_population_path_is_a_clear_error_not_a_traceback(tmp_path, capsys):
    _curve_log = pd.DataFrame({"step": [1, 2, 3], "critic/score/mean": [0.1, 0.2, 0.3]})
    write_verl_console(tmp_path / "run.log", _curve_log, total_training_steps=10)
    assert main(["forecast", str(tmp_path / "run.log"), "--population", ""]) == 2  # "" is the folder "."
    assert "is a folder, not a saved model" in capsys.readouterr().err
