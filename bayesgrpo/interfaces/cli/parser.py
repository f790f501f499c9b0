"""The argument parser of the ``bayesgrpo`` command: every verb and option, kept free of heavy imports."""

from __future__ import annotations

import argparse

from bayesgrpo.interfaces.cli.commands import (
    cmd_demo,
    cmd_diagnose,
    cmd_forecast,
    cmd_report,
    cmd_runs,
    cmd_stop,
    cmd_watch,
)

#: The CLI's fit: ``RewardModel.fit``'s own draws and warm-up. With 1,000 warm-up iterations numpyro
#: estimates a dense mass matrix over the population's parameters; with the 500/500 the CLI had,
#: ``bayesgrpo demo`` gave 6 divergences and max r_hat 1.035 (issue 75), with 1000/1000 0
#: divergences, max r_hat 1.025 on two runs it names (2026-12-07).
FIT_DRAWS = 1000
FIT_TUNE = 1000


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (kept free of heavy imports).

    One function on purpose: it is the table of every verb and option, read top to bottom as
    ``bayesgrpo --help`` prints it.
    """
    parser = argparse.ArgumentParser(
        prog="bayesgrpo",
        description="Forecast, stop and transfer RL fine-tuning reward curves (GRPO, PPO, DAPO, RLOO).",
    )
    from bayesgrpo._version import __version__
    from bayesgrpo.model.curves import DEFAULT_CURVE

    parser.add_argument("--version", action="version", version=f"bayesgrpo {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def model_flags(p: argparse.ArgumentParser, cut: float | None, output: str) -> None:
        p.add_argument(
            "--curve",
            default=DEFAULT_CURVE,
            help=f"curve family (default {DEFAULT_CURVE}; weibull, exp, logistic, power, oscillator)",
        )
        p.add_argument(
            "--sampler", default="numpyro", help="numpyro (default), nutpie, pymc, advi, pathfinder"
        )
        p.add_argument("--draws", type=int, default=FIT_DRAWS, help="posterior draws per chain")
        p.add_argument("--tune", type=int, default=FIT_TUNE, help="tuning steps per chain")
        p.add_argument("--chains", type=int, default=2)
        p.add_argument("--seed", type=int, default=1)
        p.add_argument(
            "--cut",
            type=float,
            default=cut,
            help="fit on this fraction of each run and forecast the rest"
            + (f" (default {cut})" if cut else ""),
        )
        p.add_argument(
            "--eps",
            type=float,
            default=0.01,
            help="with --cut: plateau rule threshold, share of the reward range",
        )
        p.add_argument("--stop-prob", type=float, default=0.9, help="with --cut: plateau rule probability")
        p.add_argument(
            "--output",
            default=output,
            help=f"folder for final_reward.csv, model.nc and forecast.png (default {output})",
        )
        p.add_argument("--no-figure", action="store_true", help="skip the figure")

    def rule_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--rule",
            choices=["fixed-budget", "plateau", "budget", "target", "gain-rate", "guarded-budget"],
            help="the stop rule (default fixed-budget: stop at --budget of the horizon, the posterior's "
            "P(gain < 1%%) and expected gain shown beside it; no posterior rule beat it on held-out "
            "sources; plateau where --eps, --prob or --absolute is given without --rule)",
        )
        p.add_argument(
            "--eps",
            type=float,
            help="plateau (and P(plateau)): gain that counts as nothing, share of the reward range (default "
            "0.01); without --rule it asks the plateau rule",
        )
        p.add_argument(
            "--absolute",
            action="store_true",
            help="plateau: --eps in reward units instead; without --rule it asks the plateau rule",
        )
        p.add_argument(
            "--prob",
            type=float,
            help="plateau/target: probability the decision needs (default 0.9); without --rule it asks the "
            "plateau rule",
        )
        p.add_argument("--cost-per-step", type=float, help="budget: cost of one more step")
        p.add_argument("--value-per-reward", type=float, help="budget: value of one unit of reward")
        p.add_argument("--target", type=float, help="target: the reward to reach")
        p.add_argument(
            "--rate",
            type=float,
            default=0.03,
            help="gain-rate: stop when the expected remaining gain is below this share of the reward range "
            "per whole run, times the share of the run left (default 0.03; --absolute: reward units)",
        )
        p.add_argument(
            "--budget",
            type=float,
            help="fixed-budget: stop at this share of the horizon (default 0.65); guarded-budget: stop "
            "there unless P(gain < 2%% of the reward range) < 0.3 (the curve still rises: go on), before it "
            "only where P(gain < 1%%) >= 0.9, never while the logged reward rose by more than 1%% of the "
            "range over the run's latest 10%% (default 0.5)",
        )
        p.add_argument(
            "--flat-stop",
            type=float,
            metavar="EPS",
            help="guarded-budget, opt in: also stop, from 20%% of the horizon on, where the logged reward "
            "rose less than EPS of the reward range over the run's latest 20%% (at the rise's one-sided 95%% "
            "bound), whatever the curve expects: a flat run on a stated range stops instead of waiting for a "
            "late rise, and a late riser in its slow start stops too (e.g. 0.02; off by default)",
        )
        p.add_argument(
            "--confirm",
            type=int,
            default=1,
            help="stop only when the rule says so at this many checks in a row (stop: checks 5%% of the "
            "horizon apart; watch: a run's successive updates), so that a stop a dip in a noisy run made "
            "is asked again (default 1: at once)",
        )

    def fleet_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--workers",
            type=int,
            help="the runs on Ray with this many worker processes (a local Ray; pip install "
            "'bayesgrpo[ray]')",
        )
        p.add_argument("--address", help="the runs on this Ray cluster (ray://host:10001, auto)")

    def range_flag(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--reward-range",
            type=float,
            nargs=2,
            metavar=("LOW", "HIGH"),
            help="the range the reward of every run read really spans (an accuracy: --reward-range 0 1), "
            "not loose bounds: the population's runs on a stated range end high in it, and a run's "
            "forecast follows them; the same as reward_min/reward_max in --metadata, which a run's own "
            "row there overrides. Without it a run that states none is normalised by a range estimated "
            "from its logged points",
        )

    def band_flag(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--band",
            choices=["predictive", "curve"],
            default="predictive",
            help="the 90%% band of the final reward: of a logged reward, noise included (predictive, "
            "default), or of the expected curve (curve); stop decisions are made on the curve either way",
        )

    def output_flags(p: argparse.ArgumentParser, strict: bool = True) -> None:
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.add_argument("-q", "--quiet", action="store_true", help="no reader report")
        p.add_argument(
            "-v", "--verbose", action="store_true", help="list every repair and note of the log readers"
        )
        if strict:
            p.add_argument(
                "--strict",
                action="store_true",
                help="refuse logs with a record that would be repaired or dropped (default: repair, and "
                "say so on stderr)",
            )

    runs = sub.add_parser(
        "runs", help="summarise training logs: one line per run, and what was repaired or skipped"
    )
    runs.add_argument("paths", nargs="+", help="log files or folders (read recursively)")
    runs.add_argument(
        "--format",
        help="force a format (tensorboard, verl-console, verl-jsonl, trl-state, trl-console, notebook, "
        "wandb-csv, wandb-offline, csv, jsonl, parquet)",
    )
    runs.add_argument("--reward", help="metric to use as the reward (default: each format's train reward)")
    runs.add_argument("--metadata", help="CSV or YAML of run metadata keyed by run_id")
    runs.add_argument("--columns", help="plain tables: step=COL,reward=COL,run_id=COL")
    runs.add_argument("--logging-steps", type=int, help="TRL console logs: the trainer's logging_steps")
    runs.add_argument(
        "--strict", action="store_true", help="fail at the first record that would be repaired or dropped"
    )
    runs.add_argument(
        "--skip-unreadable", action="store_true", help="skip (and report) files that cannot be read"
    )
    output_flags(runs, strict=False)
    runs.set_defaults(handler=cmd_runs)

    demo = sub.add_parser(
        "demo",
        help="the main job: fit the bundled real runs on their first half, forecast where each ends, check "
        "it, say when to stop",
    )
    output_flags(demo)
    model_flags(demo, cut=0.5, output="bayesgrpo-demo")
    demo.set_defaults(handler=cmd_demo)

    forecast = sub.add_parser("forecast", help="fit the pooled model and forecast each run's final reward")
    forecast.add_argument("paths", nargs="*", help="log files or folders (default: the bundled runs)")
    forecast.add_argument("--bundled", action="store_true", help="use the bundled real runs")
    forecast.add_argument("--reward", help="metric to use as the reward")
    forecast.add_argument("--metadata", help="CSV or YAML of run metadata keyed by run_id")
    range_flag(forecast)
    forecast.add_argument(
        "--horizon",
        type=float,
        help="the step every run is planned to end at (default: the total steps its logs state, else "
        "its last logged step)",
    )
    forecast.add_argument(
        "--population",
        help="condition each run live on this fitted model (model.nc) instead of fitting the pooled "
        "model (seconds, not minutes; with --workers or --address without it: the shipped population)",
    )
    fleet_flags(forecast)
    band_flag(forecast)
    output_flags(forecast)
    model_flags(forecast, cut=None, output="out")
    forecast.set_defaults(handler=cmd_forecast)

    stop = sub.add_parser(
        "stop", help="should each run stop now? decision, probability, expected remaining gain, reason"
    )
    stop.add_argument("paths", nargs="+", help="log files or folders of the runs in progress")
    stop.add_argument(
        "--horizon", type=float, help="the step each run is planned to end at (default: its total_steps)"
    )
    rule_flags(stop)
    stop.add_argument(
        "--population",
        help="a fitted model (model.nc from `bayesgrpo forecast`); default the population shipped with "
        "bayesgrpo",
    )
    stop.add_argument(
        "--fit",
        action="store_true",
        help="fit the pooled model on the runs and the bundled runs instead of a live update (minutes)",
    )
    stop.add_argument(
        "--no-bundled", action="store_true", help="fit the pooled model on the runs alone (implies --fit)"
    )
    fleet_flags(stop)
    stop.add_argument("--reward", help="metric to use as the reward")
    stop.add_argument("--metadata", help="CSV or YAML of run metadata keyed by run_id")
    range_flag(stop)
    stop.add_argument("--curve", default=DEFAULT_CURVE, help="with --fit: the curve family")
    stop.add_argument("--draws", type=int, default=FIT_DRAWS)
    stop.add_argument("--tune", type=int, default=FIT_TUNE)
    stop.add_argument("--seed", type=int, default=1)
    band_flag(stop)
    output_flags(stop)
    stop.set_defaults(handler=cmd_stop)

    diag = sub.add_parser(
        "diagnose",
        help="failure modes in each run's signals: collapse, stall, degeneracy, entropy collapse, reward "
        "hacking, oscillation",
    )
    diag.add_argument("paths", nargs="*", help="log files or folders (default: the bundled runs)")
    diag.add_argument("--bundled", action="store_true", help="diagnose the bundled real runs")
    diag.add_argument("--model", help="a fitted model (model.nc): stall judged by its posterior")
    diag.add_argument(
        "--oscillation",
        action="store_true",
        help="also test each run for ringing (oscillator vs overdamped curves by LOO; a few seconds a run)",
    )
    diag.add_argument("--min-severity", choices=["info", "warning", "high"], default="info")
    fleet_flags(diag)
    diag.add_argument("--reward", help="metric to use as the reward")
    diag.add_argument("--metadata", help="CSV or YAML of run metadata keyed by run_id")
    output_flags(diag)
    diag.set_defaults(handler=cmd_diagnose)

    report = sub.add_parser(
        "report",
        help="a self-contained HTML report: forecasts, stop decisions, phases, pooling, transfer, "
        "diagnostics",
    )
    report.add_argument("paths", nargs="+", help="log files or folders")
    report.add_argument(
        "-o", "--output", default="report.html", help="the HTML file to write (default report.html)"
    )
    report.add_argument(
        "--population", help="a fitted model (model.nc): condition each run on it live instead of fitting"
    )
    report.add_argument(
        "--draws", type=int, default=FIT_DRAWS, help="without --population: posterior draws per chain"
    )
    report.add_argument(
        "--tune", type=int, default=FIT_TUNE, help="without --population: tuning steps per chain"
    )
    report.add_argument(
        "--horizon",
        type=float,
        help="the step each run is planned to end at (default: its total_steps, else its last step)",
    )
    report.add_argument(
        "--transfer-size",
        type=float,
        action="append",
        help="predict a new run of this size in B parameters (repeatable)",
    )
    report.add_argument(
        "--transfer-family", help="family of the transfer runs (default: the most common in the logs)"
    )
    report.add_argument(
        "--transfer-task", help="task of the transfer runs (default: the most common in the logs)"
    )
    report.add_argument(
        "--eps",
        type=float,
        help="decide with the plateau rule, this its gain that counts as nothing, share of the reward range "
        "(default: the default rule, fixed-budget 0.65; with --prob alone 0.01)",
    )
    report.add_argument(
        "--prob",
        type=float,
        help="decide with the plateau rule, this the probability it needs (with --eps alone 0.9)",
    )
    report.add_argument(
        "--history-points", type=int, default=8, help="cuts of each run's stop-probability history (0: none)"
    )
    report.add_argument("--no-diagnose", action="store_true", help="leave out the diagnostics section")
    report.add_argument(
        "--fleet",
        action="store_true",
        help="one sortable page for many runs (each conditioned live on --population, default the "
        "shipped one; figures only for runs to look at); the default above 50 logs",
    )
    fleet_flags(report)
    report.add_argument(
        "--figures",
        choices=["flagged", "all", "none"],
        default="flagged",
        help="fleet page: which runs get a figure (default: those advised to stop or with a high finding)",
    )
    report.add_argument(
        "--max-inline",
        type=int,
        default=60,
        help="fleet page: figures drawn in the page at most; the rest go to a folder beside it (default 60)",
    )
    report.add_argument("--reward", help="metric to use as the reward")
    report.add_argument("--metadata", help="CSV or YAML of run metadata keyed by run_id")
    report.add_argument("--seed", type=int, default=1)
    report.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    report.add_argument(
        "-v", "--verbose", action="store_true", help="list every repair and note of the log readers"
    )
    report.add_argument(
        "--strict", action="store_true", help="refuse logs with a record that would be repaired or dropped"
    )
    report.set_defaults(handler=cmd_report)

    watch = sub.add_parser(
        "watch",
        help="follow growing logs (verl/TRL console, trainer_state.json, TensorBoard): live forecast and "
        "stop advice per run",
    )
    watch.add_argument(
        "paths", nargs="+", help="log files or folders; they may still be empty or not exist yet"
    )
    watch.add_argument(
        "--population", help="a fitted model (model.nc); default the population shipped with bayesgrpo"
    )
    watch.add_argument(
        "--horizon", type=float, help="the step each run is planned to end at (default: its total_steps)"
    )
    rule_flags(watch)
    watch.add_argument("--interval", type=float, default=5.0, help="seconds between polls (default 5)")
    watch.add_argument("--once", action="store_true", help="print one table (or JSON object) and exit")
    watch.add_argument("--polls", type=int, help="stop after this many polls (default: until Ctrl-C)")
    watch.add_argument("--json", action="store_true", help="one JSON object per poll, one per line")
    watch.add_argument(
        "--smooth",
        type=int,
        default=10,
        help="current reward = mean of this many last logged rewards (default 10)",
    )
    watch.add_argument("--format", help="force a format (as `bayesgrpo runs --format`)")
    watch.add_argument("--reward", help="metric to use as the reward")
    watch.add_argument(
        "--metadata", help="CSV or YAML of run metadata keyed by run_id (family, size_b: a sharper prior)"
    )
    range_flag(watch)
    watch.add_argument("--logging-steps", type=int, help="TRL console logs: the trainer's logging_steps")
    watch.add_argument("--seed", type=int, default=1)
    fleet_flags(watch)
    band_flag(watch)
    watch.set_defaults(handler=cmd_watch)
    return parser
