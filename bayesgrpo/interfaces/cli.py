"""The ``bayesgrpo`` command line.

Subcommands import what they need when they run, so ``bayesgrpo --help`` starts fast and never
imports PyMC.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXIT_OK = 0
EXIT_USER_ERROR = 2


def _parse_columns(text: str | None) -> dict[str, str] | None:
    if not text:
        return None
    mapping = {}
    for part in text.split(","):
        if "=" not in part:
            raise argparse.ArgumentTypeError(f"--columns wants name=column pairs, got {part!r}")
        key, value = part.split("=", 1)
        mapping[key.strip()] = value.strip()
    return mapping


def _format_number(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(number):
        return "-"
    return f"{number:.{digits}g}"


def _run_lines(summary: Any) -> list[str]:
    """One fixed-width line per run."""
    header = (
        f"{'run_id':<48} {'family':<8} {'size_b':>6} {'points':>6} {'steps':>11} {'reward range':>19}  "
        "metrics"
    )
    lines = [header]
    for row in summary.itertuples(index=False):
        run_id = row.run_id if len(row.run_id) <= 48 else row.run_id[:45] + "..."
        family = (
            "-"
            if row.family is None or (isinstance(row.family, float)) or str(row.family) == "<NA>"
            else str(row.family)
        )
        steps = "-" if row.n_points == 0 else f"{row.first_step}-{row.last_step}"
        reward_range = f"{_format_number(row.reward_min)} .. {_format_number(row.reward_max)}"
        shown = ", ".join(row.metrics[:4]) + (f" +{len(row.metrics) - 4}" if len(row.metrics) > 4 else "")
        lines.append(
            f"{run_id:<48} {family[:8]:<8} {_format_number(row.size_b):>6} {row.n_points:>6} {steps:>11} "
            f"{reward_range:>19}  {shown}"
        )
    return lines


def _summary_json(table: Any) -> dict[str, Any]:
    summary = table.summary()
    runs = []
    for record in summary.to_dict("records"):
        clean = {}
        for key, value in record.items():
            if isinstance(value, float) and math.isnan(value):
                value = None
            elif hasattr(value, "item"):
                value = value.item()
            elif value is not None and str(value) == "<NA>":
                value = None
            clean[key] = value
        runs.append(clean)
    return {"runs": runs, "report": table.report.to_dict()}


def _report_lines(table: Any, verbose: bool) -> list[str]:
    issues = [i for i in table.report.issues if verbose or i.action != "info"]
    report = table.report
    lines = [
        f"read {report.records_read} records from {len(report.sources)} source(s): kept "
        f"{report.records_kept}, dropped {report.records_dropped}"
        + ("" if report.balanced else "  (ACCOUNTING MISMATCH: please report this bug)")
    ]
    if not issues:
        lines.append("nothing repaired or skipped" + ("" if verbose else " (--verbose lists notes)"))
    lines.extend(f"  {issue}" for issue in issues)
    return lines


def cmd_runs(args: argparse.Namespace) -> int:
    """``bayesgrpo runs PATH...``: one line per run and the reader's report."""
    from bayesgrpo.logs.readers import load_runs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the report below says it all
        table = load_runs(
            args.paths,
            format=args.format,
            reward=args.reward,
            metadata=args.metadata,
            columns=_parse_columns(args.columns),
            logging_steps=args.logging_steps,
            strict=args.strict,
            skip_unreadable=args.skip_unreadable,
            warn=False,
        )
    _print_table(table, args)
    return EXIT_OK


def _print_table(table: Any, args: argparse.Namespace) -> None:
    if args.json:
        json.dump(_summary_json(table), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return
    for line in _run_lines(table.summary()):
        print(line)
    if not args.quiet:
        print()
        for line in _report_lines(table, args.verbose):
            print(line)


def _cut_table(table: Any, fraction: float) -> Any:
    """The first ``fraction`` of each run's logged steps (for forecasting what followed)."""
    import numpy as np

    from bayesgrpo.logs.table import RunsTable

    points = table.points
    last = points.groupby("run_id")["step"].transform("max")
    first = points.groupby("run_id")["step"].transform("min")
    keep = points["step"] <= first + fraction * (last - first)
    return RunsTable(
        points=points[keep.to_numpy(dtype=bool) & np.isfinite(points["step"])].reset_index(drop=True),
        runs=table.runs,
        report=table.report,
    )


def cmd_demo(args: argparse.Namespace) -> int:
    """``bayesgrpo demo``: the main job on the bundled real runs.

    Fits the pooled model on the first half of each bundled run, forecasts where each run ends
    (median and 90% interval), checks the forecast against what the run really did, says whether
    a plateau rule would have stopped it at the cut, and writes a figure.
    """
    args.paths = []
    args.bundled = True
    args.reward = None
    args.metadata = None
    return cmd_forecast(args)


def cmd_forecast(args: argparse.Namespace) -> int:
    """``bayesgrpo forecast``: fit the pooled model on logs (or the bundled runs), print each
    run's forecast final reward with its 90% interval, write a figure and the fitted model.
    """
    from bayesgrpo.model.reward_model import RewardModel

    table = _forecast_input(args)
    summary = table.summary()
    fitted_on = table
    horizon = None
    if args.cut is not None:
        if not 0 < args.cut < 1:
            raise SystemExit("--cut must be a fraction between 0 and 1")
        fitted_on = _cut_table(table, args.cut)
        horizon = {row.run_id: float(row.last_step) for row in summary.itertuples()}
    if not args.json:
        _print_fit_plan(args, table, summary)
    model = RewardModel(curve=args.curve).fit(
        fitted_on,
        horizon=horizon,
        sampler=args.sampler,
        draws=args.draws,
        tune=args.tune,
        chains=args.chains,
        random_seed=args.seed,
        progressbar=not args.json and not args.quiet,
    )
    final = _final_rewards(args, model, table, summary, fitted_on)
    written = _write_forecast(args, model, final, table)
    if args.json:
        import numpy as np

        json.dump(
            {"final_reward": final.replace({np.nan: None}).to_dict("records"), "fit": model.fit_summary()},
            sys.stdout,
            indent=2,
            default=str,
        )
        sys.stdout.write("\n")
        return EXIT_OK
    _print_final_rewards(args, final)
    print()
    diagnostics = model.diagnostics
    assert diagnostics is not None  # set by the fit above
    print(
        f"fit: {diagnostics.sampler}, {diagnostics.seconds:.0f} s, {diagnostics.divergences} divergences, "
        f"max r_hat {diagnostics.max_r_hat:.3f}, min bulk ESS {diagnostics.min_ess_bulk:.0f}"
    )
    for message in diagnostics.warnings:
        print(f"warning: {message}")
    print("wrote " + ", ".join(str(path) for path in written))
    return EXIT_OK


def _forecast_input(args: argparse.Namespace) -> Any:
    """The runs ``bayesgrpo forecast`` fits: the logs given, or the bundled runs."""
    if args.bundled or not args.paths:
        from bayesgrpo.model.datasets import load_bundled

        return load_bundled(warn=False)
    from bayesgrpo.logs.readers import load_runs

    return load_runs(args.paths, reward=args.reward, metadata=args.metadata, warn=False)


def _print_fit_plan(args: argparse.Namespace, table: Any, summary: Any) -> None:
    """What is about to be fitted, on what."""
    print(
        f"{len(summary)} runs, {int(summary['n_points'].sum())} reward points, families: "
        f"{', '.join(sorted(table.runs['family'].dropna().unique()))}"
    )
    what = "all logged points" if args.cut is None else f"the first {args.cut:.0%} of each run"
    print(
        f"fitting a {args.curve} reward-curve model with partial pooling on {what} ({args.sampler}, "
        f"{args.chains} chains x {args.draws} draws)...",
        flush=True,
    )


def _final_rewards(args: argparse.Namespace, model: Any, table: Any, summary: Any, fitted_on: Any) -> Any:
    """Each run's forecast final reward, and with ``--cut`` the stop decision at the cut."""
    final = model.final_reward(quantiles=(0.05, 0.5, 0.95))
    last = summary.set_index("run_id")
    final["family"] = final["run_id"].map(table.runs.set_index("run_id")["family"]).astype(str)
    final["size_b"] = final["run_id"].map(last["size_b"])
    final["last_logged"] = final["run_id"].map(_smoothed_last(table))
    if args.cut is not None:
        from bayesgrpo.questions.stopping import PlateauRule, decisions_table

        cut_step = fitted_on.points.groupby("run_id")["step"].max()
        rule = PlateauRule(eps=args.eps, prob=args.stop_prob, relative=True)
        decisions = decisions_table(
            rule.decide(model.curve_draws(), final["run_id"].map(cut_step).to_numpy(dtype=float))
        )
        final["cut_step"] = final["run_id"].map(cut_step)
        final["stop_at_cut"] = decisions["decision"].to_numpy()
        final["p_gain_below_eps"] = decisions["probability"].to_numpy()
        final["covered_90"] = (final["q05"] <= final["last_logged"]) & (final["last_logged"] <= final["q95"])
    return final


def _write_forecast(args: argparse.Namespace, model: Any, final: Any, table: Any) -> list[Path]:
    """The final rewards (CSV), the fitted model (netCDF) and the figure; the paths written."""
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    final.to_csv(out / "final_reward.csv", index=False)
    model.save(out / "model.nc")
    written = [out / "final_reward.csv", out / "model.nc"]
    if not args.no_figure:
        from bayesgrpo.interfaces.plotting import plot_forecast_grid

        figure = plot_forecast_grid(model, observed=table)
        figure.savefig(out / "forecast.png", dpi=70)
        written.append(out / "forecast.png")
    return written


def _print_final_rewards(args: argparse.Namespace, final: Any) -> None:
    """The forecast table, and with ``--cut`` how the forecasts and stop decisions fared."""
    print()
    cut = args.cut is not None
    header = (
        f"{'run_id':<44} {'family':<8} {'size_b':>6} {'horizon':>7} {'forecast final [90% interval]':>30}"
    )
    header += f" {'actual':>8} {'stop at cut?':>16}" if cut else f" {'last logged':>11}"
    print(header)
    for row in final.itertuples(index=False):
        run_id = row.run_id if len(row.run_id) <= 44 else row.run_id[:41] + "..."
        interval = f"{row.q50:8.3g} [{row.q05:.3g}, {row.q95:.3g}]"
        size = _format_number(row.size_b)
        line = f"{run_id:<44} {row.family[:8]:<8} {size:>6} {row.horizon_step:>7} {interval:>30}"
        if cut:
            mark = " " if row.covered_90 else "!"
            stop = f"{row.stop_at_cut} (P={row.p_gain_below_eps:.2f})"
            line += f" {_format_number(row.last_logged):>7}{mark} {stop:>16}"
        else:
            line += f" {_format_number(row.last_logged):>11}"
        print(line)
    if cut:
        print()
        print(
            "actual = mean of each run's last 10% of logged rewards; '!' = outside the 90% interval. "
            f"{int(final['covered_90'].sum())} of {len(final)} runs ({final['covered_90'].mean():.0%}) ended "
            "inside their interval."
        )
        print(
            f"stop at cut? = PlateauRule: stop when P(gain over the rest of the run < {args.eps:g} of the "
            f"reward range) >= {args.stop_prob:g}; {int((final['stop_at_cut'] == 'stop').sum())} of "
            f"{len(final)} runs would stop at the cut."
        )


def _stop_horizons(args: argparse.Namespace, table: Any, last_step: Any) -> dict[str, float]:
    """Each run's horizon: ``--horizon``, else the total steps its logs state; past it is an error."""
    import pandas as pd

    horizons: dict[str, float] = {}
    for run_id in table.run_ids:
        planned = table.runs.set_index("run_id").loc[run_id].get("total_steps")
        horizon = (
            args.horizon if args.horizon is not None else (float(planned) if pd.notna(planned) else None)
        )
        if horizon is None:
            raise SystemExit(f"run {run_id!r}: no --horizon given and its logs state no total_steps")
        if horizon < last_step[run_id]:
            raise SystemExit(
                f"run {run_id!r} is already at step {last_step[run_id]:.0f}, past the horizon {horizon:g}"
            )
        horizons[run_id] = float(horizon)
    return horizons


def _live_decisions(args: argparse.Namespace, table: Any, rule: Any, horizons: dict[str, float]) -> Any:
    """Each run conditioned live on the population (``--population`` or the shipped one), decided."""
    import pandas as pd

    from bayesgrpo.model.datasets import bundled_population
    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.questions.live import LiveForecaster
    from bayesgrpo.questions.stopping import decisions_table

    population = RewardModel.load(args.population) if args.population else bundled_population()
    live = LiveForecaster(population, random_seed=args.seed)
    rows = []
    for run_id in table.run_ids:
        update = live.update(table.select([run_id]), horizon=horizons[run_id])
        decision = rule.decide(update.curve_draws, update.step, horizons[run_id])[0]
        rows.append(decisions_table([decision]).assign(run_id=run_id, pareto_k=update.posterior.pareto_k))
    return pd.concat(rows, ignore_index=True)


def _fitted_decisions(
    args: argparse.Namespace, table: Any, rule: Any, horizons: dict[str, float], last_step: Any
) -> Any:
    """The pooled model fitted on the runs (with the bundled ones unless ``--no-bundled``), decided."""
    import numpy as np
    import pandas as pd

    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.questions.stopping import decisions_table

    fitted_on = table
    if not args.no_bundled:
        from bayesgrpo.logs.table import RunsTable
        from bayesgrpo.model.datasets import load_bundled

        bundled = load_bundled(warn=False)
        clash = set(bundled.run_ids) & set(table.run_ids)
        if clash:
            raise SystemExit(f"run ids {sorted(clash)[:3]} are also bundled run ids; pass --no-bundled")
        fitted_on = RunsTable(
            points=pd.concat([table.points, bundled.points], ignore_index=True),
            runs=pd.concat([table.runs, bundled.runs], ignore_index=True),
            report=table.report,
        )
    if not args.json:
        print(
            f"fitting the pooled model on {len(table.run_ids)} run(s)"
            + ("" if args.no_bundled else " and the 60 bundled runs")
            + "...",
            flush=True,
        )
    model = RewardModel(curve=args.curve).fit(
        fitted_on,
        horizon=horizons,
        draws=args.draws,
        tune=args.tune,
        random_seed=args.seed,
        progressbar=not args.json and not args.quiet,
    )
    steps = np.array([last_step[r] for r in table.run_ids], dtype=float)
    return decisions_table(rule.decide(model.curve_draws().select(table.run_ids), steps))


def _stop_rule(args: argparse.Namespace) -> Any:
    from bayesgrpo.questions.stopping import BudgetRule, PlateauRule, TargetRule

    if args.rule == "plateau":
        return PlateauRule(eps=args.eps, prob=args.prob, relative=not args.absolute)
    if args.rule == "budget":
        if args.cost_per_step is None or args.value_per_reward is None:
            raise SystemExit("--rule budget needs --cost-per-step and --value-per-reward")
        return BudgetRule(cost_per_step=args.cost_per_step, value_per_unit_reward=args.value_per_reward)
    if args.target is None:
        raise SystemExit("--rule target needs --target")
    return TargetRule(target=args.target, prob=args.prob)


def cmd_stop(args: argparse.Namespace) -> int:
    """``bayesgrpo stop``: for each run in the logs, stop now or go on, with the probability
    behind it, the expected remaining gain and a one-line reason.

    Each run is conditioned in milliseconds (``bayesgrpo.questions.live``) on a fitted population:
    ``--population model.nc`` (e.g. from ``bayesgrpo forecast``), else the population shipped
    with bayesgrpo (``bayesgrpo.model.datasets.bundled_population``). With ``--fit`` the pooled model
    is fitted instead, on the runs together with the bundled real runs (``--no-bundled``: the
    runs alone; it implies ``--fit``).
    """
    import numpy as np

    from bayesgrpo.logs.readers import load_runs

    table = load_runs(args.paths, reward=args.reward, metadata=args.metadata, warn=False)
    rule = _stop_rule(args)
    last_step = table.points.dropna(subset=["reward"]).groupby("run_id")["step"].max()
    horizons = _stop_horizons(args, table, last_step)
    if not (args.fit or args.no_bundled):
        frame = _live_decisions(args, table, rule, horizons)
    else:
        frame = _fitted_decisions(args, table, rule, horizons, last_step)
    if args.json:
        json.dump(frame.replace({np.nan: None}).to_dict("records"), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return EXIT_OK
    for row in frame.itertuples(index=False):
        print(
            f"{row.run_id}: {row.decision.upper()} at step {row.step:.0f} of {row.horizon_step:.0f} "
            f"(probability {row.probability:.2f}; expected remaining gain {row.expected_gain:.3g} "
            f"[{row.gain_lower:.3g}, {row.gain_upper:.3g}])"
        )
        print(f"    {row.reason}")
    return EXIT_OK


def cmd_watch(args: argparse.Namespace) -> int:
    """``bayesgrpo watch``: follow growing logs; per run, redraw its forecast and the rule's advice
    every few seconds (``bayesgrpo.interfaces.watch``).
    """
    from bayesgrpo.interfaces.watch import main_from_args

    return main_from_args(args, _stop_rule(args))


def cmd_diagnose(args: argparse.Namespace) -> int:
    """``bayesgrpo diagnose``: failure modes found in each run's logged signals, with evidence."""
    import numpy as np

    from bayesgrpo.questions.diagnostics import diagnose

    if args.bundled or not args.paths:
        from bayesgrpo.model.datasets import load_bundled

        table = load_bundled(warn=False)
    else:
        from bayesgrpo.logs.readers import load_runs

        table = load_runs(args.paths, reward=args.reward, metadata=args.metadata, warn=False)
    fitted = None
    if args.model:
        from bayesgrpo.model.reward_model import RewardModel

        fitted = RewardModel.load(args.model)
    findings = diagnose(table, fitted, oscillation=args.oscillation)
    if args.min_severity != "info":
        keep = ("warning", "high") if args.min_severity == "warning" else ("high",)
        findings = findings[findings["severity"].isin(keep)]
    if args.json:
        json.dump(findings.replace({np.nan: None}).to_dict("records"), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return EXIT_OK
    if findings.empty:
        print(f"{len(table.run_ids)} runs: no findings at severity {args.min_severity} or above")
        return EXIT_OK
    for run_id, frame in findings.groupby("run_id", sort=False):
        print(run_id)
        for row in frame.itertuples(index=False):
            evidence = ", ".join(
                f"{k}={_format_number(v) if isinstance(v, float) else v}"
                for k, v in dict(row.evidence).items()
            )
            print(
                f"  [{row.severity}] {row.name} (steps {row.first_step:.0f}-{row.last_step:.0f}): {evidence}"
            )
            print(f"      -> {row.action}")
    clean = len(table.run_ids) - findings["run_id"].nunique()
    print(f"\n{findings['run_id'].nunique()} of {len(table.run_ids)} runs with findings; {clean} without")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """``bayesgrpo report LOGS... -o report.html``: a self-contained HTML report.

    The page is written by :mod:`bayesgrpo.interfaces.html_report`.
    """
    from bayesgrpo.interfaces.html_report import run_cli

    path = run_cli(args)
    if not args.quiet:
        print(f"wrote {path}")
    return EXIT_OK


def _smoothed_last(table: Any) -> dict[str, float]:
    """Mean of each run's last 10% of logged rewards (at least 3 points): the level it ended at."""
    import numpy as np

    out = {}
    for run_id, frame in table.points.groupby("run_id", sort=False):
        reward = frame["reward"].dropna().to_numpy()
        tail = max(3, len(reward) // 10)
        out[str(run_id)] = float(np.mean(reward[-tail:])) if reward.size else float("nan")
    return out


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
        p.add_argument("--draws", type=int, default=500, help="posterior draws per chain")
        p.add_argument("--tune", type=int, default=500, help="tuning steps per chain")
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
        p.add_argument("--rule", choices=["plateau", "budget", "target"], default="plateau")
        p.add_argument(
            "--eps",
            type=float,
            default=0.01,
            help="plateau (and P(plateau)): gain that counts as nothing, share of the reward range (default "
            "0.01)",
        )
        p.add_argument("--absolute", action="store_true", help="plateau: --eps in reward units instead")
        p.add_argument(
            "--prob",
            type=float,
            default=0.9,
            help="plateau/target: probability the decision needs (default 0.9)",
        )
        p.add_argument("--cost-per-step", type=float, help="budget: cost of one more step")
        p.add_argument("--value-per-reward", type=float, help="budget: value of one unit of reward")
        p.add_argument("--target", type=float, help="target: the reward to reach")

    def output_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.add_argument("-q", "--quiet", action="store_true", help="no reader report")
        p.add_argument("-v", "--verbose", action="store_true", help="list notes as well as repairs")

    runs = sub.add_parser(
        "runs", help="summarise training logs: one line per run, and what was repaired or skipped"
    )
    runs.add_argument("paths", nargs="+", help="log files or folders (read recursively)")
    runs.add_argument(
        "--format",
        help="force a format (tensorboard, verl-console, verl-jsonl, trl-state, trl-console, notebook, "
        "wandb-csv, csv, jsonl, parquet)",
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
    output_flags(runs)
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
    stop.add_argument("--reward", help="metric to use as the reward")
    stop.add_argument("--metadata", help="CSV or YAML of run metadata keyed by run_id")
    stop.add_argument("--curve", default=DEFAULT_CURVE, help="with --fit: the curve family")
    stop.add_argument("--draws", type=int, default=500)
    stop.add_argument("--tune", type=int, default=500)
    stop.add_argument("--seed", type=int, default=1)
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
        "--draws", type=int, default=500, help="without --population: posterior draws per chain"
    )
    report.add_argument("--tune", type=int, default=500, help="without --population: tuning steps per chain")
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
        default=0.01,
        help="plateau rule: gain that counts as nothing, share of the reward range (default 0.01)",
    )
    report.add_argument(
        "--prob", type=float, default=0.9, help="plateau rule: probability the decision needs (default 0.9)"
    )
    report.add_argument(
        "--history-points", type=int, default=8, help="cuts of each run's stop-probability history (0: none)"
    )
    report.add_argument("--no-diagnose", action="store_true", help="leave out the diagnostics section")
    report.add_argument("--reward", help="metric to use as the reward")
    report.add_argument("--metadata", help="CSV or YAML of run metadata keyed by run_id")
    report.add_argument("--seed", type=int, default=1)
    report.add_argument("-q", "--quiet", action="store_true", help="print nothing")
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
    watch.add_argument("--logging-steps", type=int, help="TRL console logs: the trainer's logging_steps")
    watch.add_argument("--seed", type=int, default=1)
    watch.set_defaults(handler=cmd_watch)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bayesgrpo`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_OK
    from bayesgrpo.errors import BayesGRPOError

    try:
        return int(args.handler(args))
    except BayesGRPOError as exc:
        print(f"bayesgrpo: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
