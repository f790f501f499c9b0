"""The verbs of the ``bayesgrpo`` command: ``runs``, ``demo``, ``forecast``, ``stop``, ``watch``,
``diagnose`` and ``report``.

Each verb imports what it needs when it runs, so ``bayesgrpo --help`` starts fast and never
imports PyMC (``benchmarks/cli_startup.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

from bayesgrpo._text import csv_safe, printable
from bayesgrpo.interfaces.cli.interrupts import check_interrupted
from bayesgrpo.interfaces.logs_input import read_logs, report_lines
from bayesgrpo.interfaces.text import NO_HORIZON, format_interval

EXIT_OK = 0
EXIT_USER_ERROR = 2
#: The fleet lost its engine (a Ray node, its raylet or agent) before every log was answered: the
#: rows finished were written, the others say why they were not.
EXIT_INCOMPLETE = 3
#: Why a run of ``diagnose --workers`` has no findings when the engine was lost in its first pass.
NOT_DIAGNOSED = "not diagnosed: the engine was lost"
#: Ctrl-C (SIGINT): the shell's 128 + 2.
EXIT_INTERRUPTED = 130


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


def _say(line: str) -> None:
    """Print one line with the control characters of any name in it escapes (``bayesgrpo._text``):
    run names and messages from logs never act on the terminal.
    """
    print(printable(line))


def _short_name(run_id: Any, width: int) -> str:
    """A run name escaped (``printable``), cut to ``width`` characters with ``...``."""
    name = printable(run_id)
    return name if len(name) <= width else name[: width - 3] + "..."


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
        run_id = _short_name(row.run_id, 48)
        family = (
            "-"
            if row.family is None or (isinstance(row.family, float)) or str(row.family) == "<NA>"
            else str(row.family)
        )
        steps = "-" if row.n_points == 0 else f"{row.first_step}-{row.last_step}"
        reward_range = f"{_format_number(row.reward_min)} .. {_format_number(row.reward_max)}"
        shown = ", ".join(row.metrics[:4]) + (f" +{len(row.metrics) - 4}" if len(row.metrics) > 4 else "")
        lines.append(
            printable(
                f"{run_id:<48} {family[:8]:<8} {_format_number(row.size_b):>6} {row.n_points:>6} {steps:>11} "
                f"{reward_range:>19}  {shown}"
            )
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
        _say(line)
    if not args.quiet:
        print()
        for line in report_lines(table, args.verbose):
            _say(line)


def cut_table(table: Any, fraction: float) -> Any:
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

    if any(getattr(args, name, None) is not None for name in ("population", "workers", "address")):
        return _fleet_forecast(args)
    table, unread = _forecast_input(args)
    summary = table.summary()
    fitted_on = table
    horizon: Any = getattr(args, "horizon", None)  # None: each run's stated total steps, else its last
    if args.cut is not None:
        if not 0 < args.cut < 1:
            raise SystemExit("--cut must be a fraction between 0 and 1")
        fitted_on = cut_table(table, args.cut)
        if horizon is None:  # forecast the run's real end, to compare with what it did
            horizon = {row.run_id: float(row.last_step) for row in summary.itertuples()}
    # a run with no horizon is fitted with the others (it informs them) but has no reward at its
    # horizon to forecast: its last logged step is no end it was planned to reach
    unanswered = _no_horizon_runs(table) if horizon is None else {}
    if len(unanswered) == len(table.run_ids):
        reasons = [f"run {printable(run_id)!r}: {why}" for run_id, why in unanswered.items()]
        raise SystemExit("; ".join(reasons + [f"{printable(path)}: {error}" for path, error in unread]))
    if not args.json:
        for path, error in unread:
            _say(f"{path}: ERROR {error}")
        _print_fit_plan(args, table, summary)
    from bayesgrpo.errors import FitWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)  # printed once, in the fit summary below
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
    check_interrupted()  # PyMC's samplers end early on Ctrl-C: no forecast of half a fit
    final = _final_rewards(args, model, table, summary, fitted_on)
    final = final[~final["run_id"].isin(list(unanswered))].reset_index(drop=True)
    written = _write_forecast(args, model, final, table)
    if args.json:
        import numpy as np

        json.dump(
            {
                "final_reward": final.replace({np.nan: None}).to_dict("records"),
                "no_answer": [{"run_id": run_id, "reason": why} for run_id, why in unanswered.items()],
                "unreadable": [{"path": path, "error": error} for path, error in unread],
                "fit": model.fit_summary(),
            },
            sys.stdout,
            indent=2,
            default=str,
        )
        sys.stdout.write("\n")
        return EXIT_OK
    _print_final_rewards(args, final)
    for run_id, why in unanswered.items():
        _say(f"{run_id}: no answer: {why}")
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


def _fleet_forecast(args: argparse.Namespace) -> int:
    """``bayesgrpo forecast --population model.nc`` / ``--workers N`` / ``--address``: each run
    conditioned live on a fitted population (the shipped one by default), serially or on Ray; no
    pooled fit. A run whose log cannot be read is a row with its error.
    """
    import numpy as np

    from bayesgrpo.interfaces.fleet import FleetSettings

    if args.cut is not None:
        raise SystemExit(
            "--cut fits the pooled model on part of each run; it does not go with --population, --workers "
            "or --address (live forecasts of the runs as logged)"
        )
    settings = FleetSettings(
        horizon=args.horizon,
        band=args.band,
        reward=args.reward,
        metadata=args.metadata,
        random_seed=args.seed,
        diagnose=False,
    )
    frame = _fleet_frame(args, _fleet_paths(args), settings)
    columns = [
        "run_id", "source", "status", "error", "n_points", "step", "horizon_step", "final_median",
        "final_lower", "final_upper", "band", "phase", "phase_probability", "method", "repairs",
    ]  # fmt: skip
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    csv_safe(frame[columns]).to_csv(out / "final_reward.csv", index=False)
    if args.json:
        records = frame[columns].replace({np.nan: None}).to_dict("records")
        json.dump({"final_reward": records}, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return _fleet_exit(frame)
    print(f"{'run_id':<44} {'step':>7} {'horizon':>7} {f'reward at horizon [90% {args.band}]':>32} phase")
    for row in frame.itertuples(index=False):
        run_id = _short_name(row.run_id, 44)
        if row.status != "ok":
            _say(f"{run_id:<44} ERROR {row.error}")
            continue
        interval = format_interval(row.final_median, row.final_lower, row.final_upper, width=8)
        _say(
            f"{run_id:<44} {row.step:>7.0f} {row.horizon_step:>7.0f} {interval:>32} {row.phase} "
            f"(P={row.phase_probability:.2f})"
        )
    print(f"wrote {out / 'final_reward.csv'}")
    return _fleet_exit(frame)


def _fleet_paths(args: argparse.Namespace) -> list[Any]:
    """The logs a fleet verb reads: the paths given, or the bundled runs' folder."""
    if args.bundled or not args.paths:
        from bayesgrpo.model.datasets import data_dir

        return [data_dir()]
    return list(args.paths)


def _fleet_frame(args: argparse.Namespace, paths: Any, settings: Any) -> Any:
    """The fleet's table of ``paths`` for a CLI verb, and a line on stderr of how it went."""
    from bayesgrpo.interfaces.fleet import assess

    frame = assess(
        paths,
        getattr(args, "population", None),
        settings=settings,
        workers=args.workers,
        address=args.address,
        progress=not args.json and not getattr(args, "quiet", False),
    )
    _say_fleet(frame, frame.attrs.get("retried_tasks", 0), frame.attrs.get("engine"))
    return frame


def _fleet_exit(frame: Any) -> int:
    """A fleet verb's exit status once its rows are written: :data:`EXIT_INCOMPLETE`, with the
    reason on stderr, when the engine was lost before every log was answered
    (``frame.attrs["incomplete"]``, :func:`bayesgrpo.interfaces.fleet.assess`).
    """
    incomplete = frame.attrs.get("incomplete")
    if not incomplete:
        return EXIT_OK
    print(f"bayesgrpo: error: {printable(incomplete)}", file=sys.stderr)
    return EXIT_INCOMPLETE


def _say_fleet(frame: Any, retried: int, engine: Any) -> None:
    """One stderr line: how many runs the fleet assessed, with errors, retried, on which engine."""
    errors = int((frame["status"] != "ok").sum())
    print(f"{len(frame)} runs, {errors} with errors, {retried} tasks retried ({engine})", file=sys.stderr)


def _forecast_input(args: argparse.Namespace) -> tuple[Any, list[tuple[str, str]]]:
    """The runs ``bayesgrpo forecast`` fits (the logs given, or the bundled runs), and
    ``(path, error)`` of each log it cannot read (:func:`_read_every_log`).
    """
    if args.bundled or not args.paths:
        from bayesgrpo.model.datasets import load_bundled

        return load_bundled(warn=False), []
    return _read_every_log(args)


def _print_fit_plan(args: argparse.Namespace, table: Any, summary: Any) -> None:
    """What is about to be fitted, on what."""
    families = sorted(str(f) for f in table.runs["family"].dropna().unique())
    print(
        f"{len(summary)} runs, {int(summary['n_points'].sum())} reward points, families: "
        f"{', '.join(families) if families else 'none stated'}"
    )
    what = "all logged points" if args.cut is None else f"the first {args.cut:.0%} of each run"
    print(
        f"fitting a {args.curve} reward-curve model with "
        f"{'partial pooling' if len(summary) > 1 else 'no pooling (one run)'} on {what} ({args.sampler}, "
        f"{args.chains} chains x {args.draws} draws)...",
        flush=True,
    )


def _final_rewards(args: argparse.Namespace, model: Any, table: Any, summary: Any, fitted_on: Any) -> Any:
    """Each run's forecast final reward, and with ``--cut`` the stop decision at the cut."""
    band = getattr(args, "band", "predictive")
    final = model.final_reward(quantiles=(0.05, 0.5, 0.95), include_noise=band == "predictive")
    final["band"] = band
    last = summary.set_index("run_id")
    final["family"] = final["run_id"].map(table.runs.set_index("run_id")["family"])  # missing stays missing
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
        # the actual is a mean of many logged points: it is compared with the expected reward's band
        curve = model.final_reward(quantiles=(0.05, 0.95)).set_index("run_id").reindex(final["run_id"])
        actual = final["last_logged"].to_numpy()
        final["covered_90"] = (curve["q05"].to_numpy() <= actual) & (actual <= curve["q95"].to_numpy())
        # the band '!' is judged against is printed beside it
        final["expected_q05"], final["expected_q95"] = curve["q05"].to_numpy(), curve["q95"].to_numpy()
    return final


def _write_forecast(args: argparse.Namespace, model: Any, final: Any, table: Any) -> list[Path]:
    """The final rewards (CSV), the fitted model (netCDF) and the figure; the paths written."""
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    csv_safe(final).to_csv(out / "final_reward.csv", index=False)
    model.save(out / "model.nc")
    written = [out / "final_reward.csv", out / "model.nc"]
    if not args.no_figure:
        from bayesgrpo.interfaces.plotting import plot_forecast_grid

        figure = plot_forecast_grid(model, observed=table, band=getattr(args, "band", "predictive"))
        figure.savefig(out / "forecast.png", dpi=90)
        written.append(out / "forecast.png")
    return written


def _print_final_rewards(args: argparse.Namespace, final: Any) -> None:
    """The forecast table, and with ``--cut`` how the forecasts and stop decisions fared."""
    print()
    cut = args.cut is not None
    band = str(final["band"].iloc[0]) if len(final) else "predictive"
    column = f"reward at horizon [90% {band}]"
    header = f"{'run_id':<44} {'family':<8} {'size_b':>6} {'horizon':>7} {column:>30}"
    header += (
        f" {'expected [90% curve]':>20} {'actual':>8} {'stop at cut?':>16}"
        if cut
        else f" {'last logged':>11}"
    )
    print(header)
    for row in final.itertuples(index=False):
        run_id = _short_name(row.run_id, 44)
        interval = format_interval(row.q50, row.q05, row.q95, width=8)
        size = _format_number(row.size_b)
        family = printable(row.family)[:8] if isinstance(row.family, str) else "-"  # none in the metadata
        line = f"{run_id:<44} {family:<8} {size:>6} {row.horizon_step:>7} {interval:>30}"
        if cut:
            mark = " " if row.covered_90 else "!"
            stop = f"{row.stop_at_cut} (P={row.p_gain_below_eps:.2f})"
            expected = f"[{_format_number(row.expected_q05)}, {_format_number(row.expected_q95)}]"
            line += f" {expected:>20} {_format_number(row.last_logged):>7}{mark} {stop:>16}"
        else:
            line += f" {_format_number(row.last_logged):>11}"
        _say(line)
    if cut:
        print()
        print(
            "actual = mean of each run's last 10% of logged rewards; '!' = outside the 90% band of the "
            "expected reward printed beside it (the curve band: a mean of many points is compared with the "
            "curve, not with the wider band of one logged reward). "
            f"{int(final['covered_90'].sum())} of {len(final)} runs ({final['covered_90'].mean():.0%}) ended "
            "inside it."
        )
        print(
            f"stop at cut? = PlateauRule: stop when P(gain over the rest of the run < {args.eps:g} of the "
            f"reward range) >= {args.stop_prob:g}; {int((final['stop_at_cut'] == 'stop').sum())} of "
            f"{len(final)} runs would stop at the cut."
        )


def _no_horizon_runs(table: Any) -> dict[str, str]:
    """Why each run whose logs state no ``total_steps`` gets no forecast of its end (no
    ``--horizon`` given): ``run_id -> why``.
    """
    import pandas as pd

    planned = table.runs.set_index("run_id").get("total_steps")
    out = {}
    for run_id in table.run_ids:
        value = pd.to_numeric(planned, errors="coerce").get(run_id) if planned is not None else None
        if value is None or pd.isna(value) or float(value) <= 0:
            out[run_id] = NO_HORIZON
    return out


def _stop_horizons(
    args: argparse.Namespace, table: Any, last_step: Any
) -> tuple[dict[str, float], dict[str, str]]:
    """Each run's horizon (``--horizon``, else the total steps its logs state), and why each run
    that has none, or has passed it, gets no answer. No run with a horizon is an error.
    """
    import pandas as pd

    from bayesgrpo.interfaces.fleet.work import no_advice  # the fleet says the same of such runs

    horizons: dict[str, float] = {}
    unanswered: dict[str, str] = {}
    for run_id in table.run_ids:
        planned = table.runs.set_index("run_id").loc[run_id].get("total_steps")
        horizon = (
            args.horizon if args.horizon is not None else (float(planned) if pd.notna(planned) else None)
        )
        why = no_advice(horizon, float(last_step[run_id]))
        if why is not None:
            unanswered[run_id] = why
        else:
            horizons[run_id] = float(horizon)  # type: ignore[arg-type]  # no_advice: not None
    if not horizons:
        raise SystemExit("; ".join(f"run {printable(run_id)!r}: {why}" for run_id, why in unanswered.items()))
    return horizons, unanswered


def _live_decisions(args: argparse.Namespace, table: Any, rule: Any, horizons: dict[str, float]) -> Any:
    """Each run conditioned live on the population (``--population`` or the shipped one), decided."""
    import pandas as pd

    from bayesgrpo.errors import ForecastDepartureWarning
    from bayesgrpo.model.datasets import bundled_population
    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.questions.live import LiveForecaster
    from bayesgrpo.questions.stopping import decisions_table

    population = RewardModel.load(args.population) if args.population else bundled_population()
    live = LiveForecaster(population, random_seed=args.seed)
    rows = []
    for run_id in table.run_ids:
        run = table.select([run_id])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ForecastDepartureWarning)  # the run's row says it
            _ask_earlier_checks(live, run, rule, horizons[run_id], getattr(args, "confirm", 1))
            update = live.update(run, horizon=horizons[run_id])
        decision = rule.decide(update.curve_draws, update.step, horizons[run_id])[0]
        lower, median, upper = update.final_interval(0.9, band=args.band)
        rows.append(
            decisions_table([decision]).assign(
                run_id=run_id,
                final_median=median,
                final_lower=lower,
                final_upper=upper,
                band=args.band,
                band_note=update.band_note(args.band),
                pareto_k=update.posterior.pareto_k,
                method=update.method,
                eps_range_lower=update.reward_range[0],
                eps_range_upper=update.reward_range[1],
                eps_range_source=update.reward_range[2],
                eps_range_note=update.range_note(),
                departed=update.departed,
                departure_note=update.departure.note() if update.departure is not None else "",
            )
        )
    return pd.concat(rows, ignore_index=True)


def _ask_earlier_checks(live: Any, run: Any, rule: Any, horizon: float, confirm: int) -> None:
    """``--confirm K``: ask the (``Confirmed``) rule at the K - 1 checks before the last logged
    step, each :data:`CONFIRM_SPACING` of the horizon earlier, on the points logged by then, so
    that its answer at the last step counts them. A check with fewer than two points is not asked
    (so the run cannot stop yet).
    """
    if confirm <= 1:
        return
    import numpy as np

    from bayesgrpo.logs.table import RunsTable

    points = run.points[np.isfinite(run.points["reward"].to_numpy(dtype=float))]
    last = float(points["step"].max())
    for j in range(confirm - 1, 0, -1):
        prefix = points[points["step"] <= last - j * CONFIRM_SPACING * horizon]
        if len(prefix) < 2:
            continue
        earlier = live.update(RunsTable(points=prefix, runs=run.runs, report=run.report), horizon=horizon)
        rule.decide(earlier.curve_draws, earlier.step, horizon)


def _fitted_decisions(
    args: argparse.Namespace, table: Any, rule: Any, horizons: dict[str, float], last_step: Any
) -> Any:
    """The pooled model fitted on the runs (with the bundled ones unless ``--no-bundled``), decided."""
    import numpy as np
    import pandas as pd

    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.questions.stopping import decisions_table
    from bayesgrpo.questions.stopping.momentum import with_recent_rise

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
    check_interrupted()  # PyMC's samplers end early on Ctrl-C: no advice from half a fit
    steps = np.array([last_step[r] for r in table.run_ids], dtype=float)
    # the runs' own latest rise rides along, as on the live path (a rule may hold a stop on it)
    draws = with_recent_rise(model.curve_draws().select(table.run_ids), table.points)
    frame = decisions_table(rule.decide(draws, steps))
    # the fit's horizon of each run is the one asked for: its final reward is the forecast there
    final = model.final_reward(include_noise=args.band == "predictive", random_seed=args.seed)
    final = final.set_index("run_id").loc[list(table.run_ids)]
    data = model.data
    assert data is not None  # fitted above
    index = [list(data.run_ids).index(run_id) for run_id in table.run_ids]
    how = ["stated" if data.bounds_source[i] == "metadata" else "estimated" for i in index]
    return frame.assign(
        final_median=final["q50"].to_numpy(),
        final_lower=final["q05"].to_numpy(),
        final_upper=final["q95"].to_numpy(),
        band=args.band,
        method="nuts",
        eps_range_lower=data.lower[index],
        eps_range_upper=data.upper[index],
        eps_range_source=how,
        eps_range_note=[
            f"eps is a share of the reward range {data.lower[i]:.3g} .. {data.upper[i]:.3g}, "
            + ("stated for the run" if h == "stated" else "the run's logged range widened as in the fit")
            for i, h in zip(index, how, strict=True)
        ],
    )


#: ``--confirm``: the checks a stop is asked at, as a share of the horizon apart.
CONFIRM_SPACING = 0.05


def _resolve_rule_options(args: argparse.Namespace) -> None:
    """Fill in ``--rule``, ``--eps`` and ``--prob`` where they were not given.

    Without ``--rule`` the rule is :func:`bayesgrpo.questions.stopping.default_rule`
    (``fixed-budget``), unless a plateau option (``--eps``, ``--prob``, ``--absolute``) was given:
    then the plateau rule those set, as before the default changed, so that no option is ignored.
    """
    if args.rule is None:
        plateau_asked = args.eps is not None or args.prob is not None or args.absolute
        args.rule = "plateau" if plateau_asked else "fixed-budget"
    from bayesgrpo.questions.stopping import DEFAULT_PLATEAU_EPS, DEFAULT_PLATEAU_PROB

    if args.eps is None:
        args.eps = DEFAULT_PLATEAU_EPS
    if args.prob is None:
        args.prob = DEFAULT_PLATEAU_PROB


def _stop_rule(args: argparse.Namespace) -> Any:
    """The rule the options name; with ``--confirm K`` (K > 1) wrapped in ``Confirmed``.

    Fills in the options not given first (:func:`_resolve_rule_options`).
    """
    from bayesgrpo.errors import BayesGRPOError
    from bayesgrpo.questions.stopping import (
        BudgetRule,
        Confirmed,
        FixedBudgetRule,
        GainRateRule,
        GuardedBudgetRule,
        PlateauRule,
        TargetRule,
    )

    _resolve_rule_options(args)
    flat_eps = getattr(args, "flat_stop", None)
    if flat_eps is not None and args.rule != "guarded-budget":
        raise SystemExit(f"--flat-stop goes with --rule guarded-budget, not --rule {args.rule}")
    confirm = getattr(args, "confirm", 1)
    if confirm < 1:
        raise SystemExit(f"--confirm must be 1 or more (checks in a row); got {confirm}")
    if confirm > 1 and (getattr(args, "workers", None) is not None or getattr(args, "address", None)):
        raise SystemExit(
            "--confirm counts each run's checks in this process; it does not go with --workers or --address"
        )
    if confirm > 1 and (getattr(args, "fit", False) or getattr(args, "no_bundled", False)):
        raise SystemExit("--confirm asks the live update at earlier checks; it does not go with --fit")
    if args.rule == "plateau":
        rule: Any = PlateauRule(eps=args.eps, prob=args.prob, relative=not args.absolute)
    elif args.rule == "gain-rate":
        rule = GainRateRule(rate=args.rate, relative=not args.absolute)
    elif args.rule == "fixed-budget":
        try:
            rule = FixedBudgetRule() if args.budget is None else FixedBudgetRule(fraction=args.budget)
        except BayesGRPOError as exc:
            raise SystemExit(f"--budget: {exc}") from None
    elif args.rule == "guarded-budget":
        if args.absolute:
            raise SystemExit(
                "--rule guarded-budget takes its gains as shares of the reward range; drop --absolute"
            )
        try:
            rule = GuardedBudgetRule(fraction=0.5 if args.budget is None else args.budget, flat_eps=flat_eps)
        except BayesGRPOError as exc:
            raise SystemExit(f"--budget / --flat-stop: {exc}") from None
    elif args.rule == "budget":
        if args.cost_per_step is None or args.value_per_reward is None:
            raise SystemExit("--rule budget needs --cost-per-step and --value-per-reward")
        rule = BudgetRule(cost_per_step=args.cost_per_step, value_per_unit_reward=args.value_per_reward)
    else:
        if args.target is None:
            raise SystemExit("--rule target needs --target")
        rule = TargetRule(target=args.target, prob=args.prob)
    return Confirmed(rule, confirm) if confirm > 1 else rule


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

    if args.workers is not None or args.address is not None:
        return _fleet_stop(args, _stop_rule(args))
    table, unread = _read_every_log(args)
    rule = _stop_rule(args)
    last_step = table.points.dropna(subset=["reward"]).groupby("run_id")["step"].max()
    horizons, unanswered = _stop_horizons(args, table, last_step)
    if unanswered:  # every run that can be answered is; the others are listed with why
        table = table.select(list(horizons))
    if not (args.fit or args.no_bundled):
        frame = _live_decisions(args, table, rule, horizons)
    else:
        frame = _fitted_decisions(args, table, rule, horizons, last_step)
    if args.json:
        rows = frame.assign(status="ok", error="").replace({np.nan: None}).to_dict("records")
        rows += [
            {"run_id": run_id, "status": "ok", "error": "", "decision": None, "reason": why}
            for run_id, why in unanswered.items()
        ]
        rows += [
            {"run_id": Path(path).name, "source": path, "status": "error", "error": error, "decision": None}
            for path, error in unread
        ]
        json.dump(rows, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return EXIT_OK
    for source, error in unread:
        _say(f"{Path(source).name}: ERROR {error}")
    for run_id, why in unanswered.items():
        _say(f"{run_id}: no answer: {why}")
    for row in frame.itertuples(index=False):
        _say(
            f"{row.run_id}: {row.decision.upper()} at step {row.step:.0f} of {row.horizon_step:.0f} "
            f"(probability {row.probability:.2f}; expected remaining gain "
            f"{format_interval(row.expected_gain, row.gain_lower, row.gain_upper)})"
        )
        _say(f"    {row.reason}")
        print(
            f"    reward at step {row.horizon_step:.0f}: "
            f"{format_interval(row.final_median, row.final_lower, row.final_upper)} (90% {row.band} band"
            + (", a logged reward: noise included)" if row.band == "predictive" else ", the expected reward)")
        )
        note = getattr(row, "eps_range_note", None)
        if isinstance(note, str) and not args.absolute:
            _say(f"    ({note})")
        if row.method == "ensemble_mcmc":
            print(
                f"    (Pareto k {row.pareto_k:.2f}: the importance weights were unreliable, so this "
                "answer comes from the MCMC fallback)"
            )
        if getattr(row, "departed", False) is True:
            _say(f"    (the run has left its forecast: {row.departure_note})")
    return EXIT_OK


def _read_every_log(args: argparse.Namespace) -> tuple[Any, list[tuple[str, str]]]:
    """The runs of every log ``stop`` or ``forecast`` can read, and ``(path, error)`` of each it cannot.

    A path that does not exist or that no reader recognises, a file a reader fails on and a log
    under a folder that no reader recognises (``fleet.work.unread_logs``) is an error row, not the
    end of the command, as on the fleet's engines. With ``--strict`` the first of them is an error.
    """
    from bayesgrpo.errors import BayesGRPOError
    from bayesgrpo.interfaces.fleet.work import unread_logs
    from bayesgrpo.logs.readers import discover

    if getattr(args, "strict", False):
        return read_logs(args), []
    paths, unread = [], []
    for path in args.paths:
        try:
            discover(path)
        except (BayesGRPOError, OSError) as exc:
            unread.append((str(path), f"{type(exc).__name__}: {exc}"))
            continue
        paths.append(path)
    if not paths:
        raise BayesGRPOError("no log could be read: " + "; ".join(f"{p}: {e}" for p, e in unread))
    table = read_logs(args, paths, skip_unreadable=True)
    return table, unread + unread_logs(table.report.issues)


def _fleet_stop(args: argparse.Namespace, rule: Any) -> int:
    """``bayesgrpo stop --workers N`` / ``--address``: the fleet path (one task batch per worker
    share, the population sent once), one row per run; a run whose log cannot be read is a row
    with its error, not the end of the command.
    """
    import numpy as np

    from bayesgrpo.interfaces.fleet import FleetSettings
    from bayesgrpo.questions.live import RANGE_SOURCE_PHRASES

    settings = FleetSettings(
        rule=rule, horizon=args.horizon, band=args.band, reward=args.reward, metadata=args.metadata
    )
    frame = _fleet_frame(args, args.paths, settings)
    if args.json:
        json.dump(frame.replace({np.nan: None}).to_dict("records"), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        for row in frame.itertuples(index=False):
            if row.status != "ok":
                _say(f"{row.run_id}: ERROR {row.error}")
                continue
            if not isinstance(row.decision, str):  # no horizon, or past it (fleet.work.no_advice)
                _say(f"{row.run_id}: no answer: {row.reason}")
                continue
            _say(
                f"{row.run_id}: {str(row.decision).upper()} at step {row.step:.0f} of {row.horizon_step:.0f} "
                f"(probability {row.probability:.2f}); reward at step {row.horizon_step:.0f}: "
                f"{format_interval(row.final_median, row.final_lower, row.final_upper)} (90% {row.band} band)"
            )
            _say(f"    {row.reason}")
            how = RANGE_SOURCE_PHRASES.get(row.eps_range_source, row.eps_range_source)
            print(
                f"    (eps is a share of the reward range {row.eps_range_lower:.3g} .. "
                f"{row.eps_range_upper:.3g}, {how})"
            )
    if not frame.attrs.get("incomplete") and not frame["decision"].map(lambda d: isinstance(d, str)).any():
        # as without --workers: an error only when no run can be answered (each row says why)
        print("bayesgrpo: error: no run could be answered; each row says why", file=sys.stderr)
        return EXIT_USER_ERROR
    return _fleet_exit(frame)


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

    if args.workers is not None or args.address is not None:
        findings, run_ids = _fleet_findings(args)
    else:
        if args.bundled or not args.paths:
            from bayesgrpo.model.datasets import load_bundled

            table = load_bundled(warn=False)
        else:
            table = read_logs(args)
        fitted = None
        if args.model:
            from bayesgrpo.model.reward_model import RewardModel

            fitted = RewardModel.load(args.model)
        findings, run_ids = diagnose(table, fitted, oscillation=args.oscillation), table.run_ids
    # the engine lost under diagnose --workers: the rows finished, and exit 3 with the reason
    done = _fleet_exit(findings) if findings.attrs.get("incomplete") else EXIT_OK
    if args.min_severity != "info":
        keep = ("warning", "high") if args.min_severity == "warning" else ("high",)
        findings = findings[findings["severity"].isin(keep)]
    if args.json:
        json.dump(findings.replace({np.nan: None}).to_dict("records"), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return done
    if findings.empty:
        print(f"{len(run_ids)} runs: no findings at severity {args.min_severity} or above")
        return done
    for run_id, frame in findings.groupby("run_id", sort=False):
        _say(str(run_id))
        for row in frame.itertuples(index=False):
            evidence = ", ".join(
                f"{k}={_format_number(v) if isinstance(v, float) else v}"
                for k, v in dict(row.evidence).items()
            )
            _say(
                f"  [{row.severity}] {row.name} (steps {row.first_step:.0f}-{row.last_step:.0f}): {evidence}"
            )
            print(f"      -> {row.action}")
    clean = len(run_ids) - findings["run_id"].nunique()
    print(f"\n{findings['run_id'].nunique()} of {len(run_ids)} runs with findings; {clean} without")
    return done


def _fleet_findings(args: argparse.Namespace) -> tuple[Any, list[str]]:
    """``bayesgrpo diagnose --workers N`` / ``--address``: each run diagnosed on Ray (the ringing
    test's fits are where the time goes), in two passes: what the stall test needs of each run to
    compare it with its family and task peers, then every run's findings with those references,
    so the findings are those of ``bayesgrpo diagnose`` without Ray. A run whose log cannot be read
    is an ``unreadable_log`` finding.
    """
    import dataclasses

    import pandas as pd

    from bayesgrpo.errors import EngineLostError
    from bayesgrpo.interfaces.fleet import FLEET_COLUMNS, FleetSettings, assess, fleet_sources, open_engine
    from bayesgrpo.interfaces.fleet.work import error_row, peer_summaries_work, source_label
    from bayesgrpo.questions.diagnostics.by_run import peer_references
    from bayesgrpo.questions.diagnostics.finding import FINDING_COLUMNS

    if args.model:
        raise SystemExit(
            "--model judges stall by a fitted posterior of the runs read together; it does not go with "
            "--workers or --address"
        )
    settings = FleetSettings(
        reward=args.reward,
        metadata=args.metadata,
        forecast=False,
        diagnose=True,
        oscillation=args.oscillation,
    )
    paths = _fleet_paths(args)
    sources = fleet_sources(paths)
    with open_engine([], workers=args.workers, address=args.address) as engine:  # no population needed
        try:
            found = engine.map(peer_summaries_work, sources, settings)
        except EngineLostError as lost:  # no reference of the peers: no run can be judged as without Ray
            frame = pd.DataFrame(
                [error_row(source_label(source), f"{NOT_DIAGNOSED} ({lost})") for source in sources],
                columns=list(FLEET_COLUMNS),
            )
            frame.attrs["incomplete"] = str(lost)
        else:
            references = peer_references([summary for per_source in found for summary in per_source])
            with_peers = dataclasses.replace(settings, references=references)
            frame = assess(paths, settings=with_peers, engine=engine)
    _say_fleet(frame, engine.retried_tasks, engine.name)  # both passes' retries
    rows = [finding for found in frame["findings"] for finding in found if isinstance(found, list)]
    for row in frame[frame["status"] != "ok"].itertuples(index=False):
        engine_lost = str(row.error).startswith(("not assessed: the engine was lost", NOT_DIAGNOSED))
        rows.append(
            {
                "run_id": row.run_id,
                "name": "not_diagnosed" if engine_lost else "unreadable_log",
                "severity": "high",
                "first_step": float("nan"),
                "last_step": float("nan"),
                "evidence": {"source": row.source, "error": row.error},
                "action": "run diagnose again: the engine was lost before this run was diagnosed"
                if engine_lost
                else "fix or replace the log; the other runs were diagnosed",
            }
        )
    findings = pd.DataFrame(rows, columns=list(FINDING_COLUMNS))
    findings.attrs["incomplete"] = frame.attrs.get("incomplete")
    return findings, frame["run_id"].tolist()


def cmd_report(args: argparse.Namespace) -> int:
    """``bayesgrpo report LOGS... -o report.html``: a self-contained HTML report.

    The page is written by :mod:`bayesgrpo.interfaces.html_report`.
    """
    from bayesgrpo.interfaces.html_report import run_cli

    path, unanswered = run_cli(args)
    if not args.quiet:
        print(f"wrote {path}")
    if unanswered:  # as stop and forecast: an error only when no run can be answered
        for run_id, why in unanswered.items():
            _say(f"{run_id}: no answer: {why}")
        print("bayesgrpo: error: no run could be answered; each row of the page says why", file=sys.stderr)
        return EXIT_USER_ERROR
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
