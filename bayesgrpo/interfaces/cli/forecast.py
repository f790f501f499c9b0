"""The ``bayesgrpo forecast`` and ``bayesgrpo demo`` verbs: the pooled fit of the runs (or live
forecasts on a fitted population with ``--population``, ``--workers`` or ``--address``), each run's
final reward with its interval, and with ``--cut`` how the forecasts fared.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from bayesgrpo._text import csv_safe, printable
from bayesgrpo.interfaces.cli.common import (
    EXIT_OK,
    fleet_exit,
    fleet_frame,
    fleet_paths,
    format_number,
    read_every_log,
    say,
    short_name,
)
from bayesgrpo.interfaces.cli.interrupts import check_interrupted
from bayesgrpo.interfaces.text import NO_HORIZON, format_interval


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
            say(f"{path}: ERROR {error}")
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
        say(f"{run_id}: no answer: {why}")
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
    frame = fleet_frame(args, fleet_paths(args), settings)
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
        return fleet_exit(frame)
    print(f"{'run_id':<44} {'step':>7} {'horizon':>7} {f'reward at horizon [90% {args.band}]':>32} phase")
    for row in frame.itertuples(index=False):
        run_id = short_name(row.run_id, 44)
        if row.status != "ok":
            say(f"{run_id:<44} ERROR {row.error}")
            continue
        interval = format_interval(row.final_median, row.final_lower, row.final_upper, width=8)
        say(
            f"{run_id:<44} {row.step:>7.0f} {row.horizon_step:>7.0f} {interval:>32} {row.phase} "
            f"(P={row.phase_probability:.2f})"
        )
    print(f"wrote {out / 'final_reward.csv'}")
    return fleet_exit(frame)


def _forecast_input(args: argparse.Namespace) -> tuple[Any, list[tuple[str, str]]]:
    """The runs ``bayesgrpo forecast`` fits (the logs given, or the bundled runs), and
    ``(path, error)`` of each log it cannot read (:func:`read_every_log`).
    """
    if args.bundled or not args.paths:
        from bayesgrpo.model.datasets import load_bundled

        return load_bundled(warn=False), []
    return read_every_log(args)


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
        run_id = short_name(row.run_id, 44)
        interval = format_interval(row.q50, row.q05, row.q95, width=8)
        size = format_number(row.size_b)
        family = printable(row.family)[:8] if isinstance(row.family, str) else "-"  # none in the metadata
        line = f"{run_id:<44} {family:<8} {size:>6} {row.horizon_step:>7} {interval:>30}"
        if cut:
            mark = " " if row.covered_90 else "!"
            stop = f"{row.stop_at_cut} (P={row.p_gain_below_eps:.2f})"
            expected = f"[{format_number(row.expected_q05)}, {format_number(row.expected_q95)}]"
            line += f" {expected:>20} {format_number(row.last_logged):>7}{mark} {stop:>16}"
        else:
            line += f" {format_number(row.last_logged):>11}"
        say(line)
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


def _smoothed_last(table: Any) -> dict[str, float]:
    """Mean of each run's last 10% of logged rewards (at least 3 points): the level it ended at."""
    import numpy as np

    out = {}
    for run_id, frame in table.points.groupby("run_id", sort=False):
        reward = frame["reward"].dropna().to_numpy()
        tail = max(3, len(reward) // 10)
        out[str(run_id)] = float(np.mean(reward[-tail:])) if reward.size else float("nan")
    return out
