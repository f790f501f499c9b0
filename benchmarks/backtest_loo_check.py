"""Strict leave-one-run-out against the 5-fold populations of the backtests, on the same runs.

The backtests (``benchmarks/backtest.py``) score every run from a population fitted on the other
folds of a 5-fold split by run: it never saw the run, but it saw only 48 of the 60 runs. Strict
leave-one-run-out (a population of 59 runs per scored run) costs one fit per run. The transfer
evaluation's ``leave_one_run_out`` split (``benchmarks/transfer_eval.py --splits
leave_one_run_out --cache DIR``) already fits exactly those populations for the 24 runs with a
stated reward range, with the backtests' sampler settings. This script reuses them: the
forecast backtest (bayesgrpo, cuts 10/25/50%) and the plateau rules of the stopping backtest are
run on those 24 runs from their leave-one-run-out populations, and set beside the committed
5-fold rows of the same runs (``results/backtest_forecast_runs.csv``,
``results/backtest_stopping_runs.csv``).

``--fit-missing DIR`` fits the leave-one-run-out populations of the other runs too (the 36 runs
normalised by their own range; one fit each, about 75 s on two cores), saving each to ``DIR`` as
soon as it is fitted (a rerun reuses them), so that every bundled run is checked.

Writes ``results/backtest_loo_check.md``.

Usage::

    python benchmarks/backtest_loo_check.py --cache /tmp/transfer_eval_pops/leave_one_run_out
    python benchmarks/backtest_loo_check.py --cache /tmp/transfer_eval_pops/leave_one_run_out --fit-missing
    /tmp/loo_rest
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
import time
import warnings
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _markdown import machine_line, markdown_table
from backtest import run_kinds, stopping_rules

RESULTS = HERE / "results"


def load_run_out_populations(cache: Path) -> dict:
    """``run_id -> RewardModel`` from a transfer-evaluation cache of the leave-one-run-out split."""
    from bayesgrpo.model.reward_model import RewardModel

    settings = json.loads((cache / "settings.json").read_text())
    if settings.get("split") != "leave_one_run_out":
        raise SystemExit(f"{cache} holds the {settings.get('split')!r} split, not leave_one_run_out")
    mapping = json.loads((cache / "runs.json").read_text())
    models = {i: RewardModel.load(cache / f"population{i}.nc") for i in sorted(set(mapping.values()))}
    populations = {run_id: models[i] for run_id, i in mapping.items()}
    for run_id, model in populations.items():
        if run_id in model.data.run_ids:
            raise SystemExit(f"the population for {run_id} saw it: not a leave-one-run-out cache")
    return populations


def fit_missing_populations(table, have: set[str], folder: Path, seed: int) -> dict:
    """Leave-one-run-out populations for the runs of ``table`` not in ``have``, one fit per run
    with the backtests' settings, each saved to ``folder`` when fitted and reused on a rerun.
    """
    from bayesgrpo.evaluate.transfer_eval import run_out_populations
    from bayesgrpo.model.reward_model import RewardModel

    folder.mkdir(parents=True, exist_ok=True)
    index_path = folder / "runs.json"
    saved = json.loads(index_path.read_text()) if index_path.exists() else {}
    populations = {}
    for k, run_id in enumerate(r for r in table.run_ids if r not in have):
        if run_id not in saved:
            model = run_out_populations(
                table, [run_id], {"draws": 500, "tune": 500, "chains": 2}, random_seed=seed + 1000 + k
            )[run_id]
            name = f"population_{len(saved)}.nc"
            model.save(folder / name)
            saved[run_id] = name
            index_path.write_text(json.dumps(saved, indent=1))
            print(f"fitted the population without {run_id} ({len(saved)} in {folder})", flush=True)
        populations[run_id] = RewardModel.load(folder / saved[run_id])
    return populations


def forecast_comparison(loo: pd.DataFrame, kfold: pd.DataFrame, kinds: dict[str, str]) -> pd.DataFrame:
    """Per kind of run (all, stated range, own range) and cut: the scores of both protocols on the
    same runs.
    """
    rows = []
    for name, frame in (("leave-one-run-out (59 runs)", loo), ("5-fold (48 runs)", kfold)):
        frame = frame.assign(kind=frame["run_id"].map(kinds))
        groups = [("all", frame)] + [(kind, part) for kind, part in frame.groupby("kind", sort=True)]
        for kind, of_kind in groups if frame["kind"].nunique() > 1 else groups[:1]:
            for cut, part in of_kind.groupby("cut", sort=True):
                rows.append(
                    {
                        "runs_of": kind,
                        "populations": name,
                        "cut": cut,
                        "runs": part["run_id"].nunique(),
                        "crps_median": part["crps"].median(),
                        "crps_mean": part["crps"].mean(),
                        "final_err_mean": part["final_abs_error"].mean(),
                        "cover50_mean": part["cover50"].mean(),
                        "cover90_mean": part["cover90"].mean(),
                        "width90_median": part["width90"].median(),
                    }
                )
    return pd.DataFrame(rows).sort_values(["runs_of", "cut", "populations"]).reset_index(drop=True)


def stopping_comparison(loo: pd.DataFrame, kfold: pd.DataFrame) -> pd.DataFrame:
    """Per plateau rule: steps saved and reward given up under both protocols, same runs."""

    def summary(frame: pd.DataFrame, label: str) -> pd.DataFrame:
        grouped = frame.groupby("rule")
        return pd.DataFrame(
            {
                f"saved_{label}": grouped["steps_saved"].mean(),
                f"given_up_{label}": grouped["reward_given_up"].mean(),
                f"vs_end_{label}": grouped["reward_vs_end"].mean(),
            }
        )

    both = summary(loo, "loo").join(summary(kfold, "5fold"), how="inner")
    both["same_stop_share"] = (
        loo.set_index(["run_id", "rule"])["stop_step"]
        .eq(kfold.set_index(["run_id", "rule"])["stop_step"])
        .groupby("rule")
        .mean()
    )
    return both.reset_index().sort_values("rule").reset_index(drop=True)


def main(argv: list[str] | None = None) -> None:
    """Check the backtests under strict leave-one-run-out populations and write the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cache", type=Path, required=True, help="transfer_eval cache folder of leave_one_run_out"
    )
    parser.add_argument(
        "--fit-missing", type=Path, default=None, help="fit (and keep here) the populations of the other runs"
    )
    parser.add_argument("--forecast-draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=RESULTS / "backtest_loo_check.md")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    warnings.simplefilter("ignore")

    from bayesgrpo.evaluate.backtest import forecast_backtest, stopping_backtest
    from bayesgrpo.model.datasets import load_bundled

    command = "python benchmarks/backtest_loo_check.py" + "".join(
        " " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )
    table = load_bundled(warn=False)
    populations = load_run_out_populations(args.cache)
    if args.fit_missing is not None:
        populations |= fit_missing_populations(table, set(populations), args.fit_missing, args.seed)
    for run_id, model in populations.items():
        if run_id in model.data.run_ids or len(model.data.run_ids) != len(table.run_ids) - 1:
            raise SystemExit(f"the population for {run_id} is not the other {len(table.run_ids) - 1} runs")
    runs = sorted(populations)
    sub = table.select(runs)

    start = time.perf_counter()
    forecasts = forecast_backtest(
        sub, populations, methods=("bayesgrpo",), n_draws=args.forecast_draws, random_seed=args.seed
    )
    rules = {name: rule for name, rule in stopping_rules().items() if name.startswith("plateau")}
    stops = stopping_backtest(sub, populations, rules, n_draws=args.forecast_draws, random_seed=args.seed)
    seconds = time.perf_counter() - start

    committed_forecasts = pd.read_csv(RESULTS / "backtest_forecast_runs.csv")
    committed_forecasts = committed_forecasts[
        (committed_forecasts["method"] == "bayesgrpo") & committed_forecasts["run_id"].isin(runs)
    ]
    committed_stops = pd.read_csv(RESULTS / "backtest_stopping_runs.csv")
    committed_stops = committed_stops[
        committed_stops["run_id"].isin(runs) & committed_stops["rule"].isin(rules)
    ]
    forecast_table = forecast_comparison(forecasts, committed_forecasts, run_kinds(sub))
    stopping_table = stopping_comparison(stops, committed_stops)

    fits = pd.DataFrame(
        [
            {
                "run_id": run_id,
                "runs_fitted": len(model.data.run_ids),
                "max_r_hat": model.diagnostics.max_r_hat if model.diagnostics else float("nan"),
                "divergences": model.diagnostics.divergences if model.diagnostics else -1,
            }
            for run_id, model in populations.items()
        ]
    )
    machine = machine_line()
    lines = [
        "# Strict leave-one-run-out against the backtests' 5-fold populations",
        "",
        f"Command: `{command}`  ",
        (
            f"Machine: {machine}. Forecasts and stopping replays {seconds:.0f} s (the populations of the "
            "runs with a stated reward range were fitted by `benchmarks/transfer_eval.py --splits "
            "leave_one_run_out`, the others by `--fit-missing`; 2 chains x 500 draws + 500 tuning steps "
            f"each; max r_hat over the {len(fits)} fits {fits['max_r_hat'].max():.3f}, "
            f"{int(fits['divergences'].sum())} divergences)."
        ),
        "",
        (
            f"{len(runs)} bundled runs, each scored from a population fitted on the other "
            f"{int(fits['runs_fitted'].iloc[0])} runs, beside the committed 5-fold rows of the same runs "
            "(populations of 48 runs). Same cuts, scores, rules and checks as `backtest_forecast.md` and "
            "`backtest_stopping.md`. `same_stop_share`: share of runs where a rule stopped at the same step "
            "under both."
        ),
        "",
        "## Forecasts (bayesgrpo)",
        "",
        markdown_table(forecast_table),
        "",
        "## Plateau rules",
        "",
        markdown_table(stopping_table),
        "",
    ]
    args.output.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
