"""The ``bayesgrpo stop`` verb: each run's stop-or-go-on decision, live on a fitted population or
from the pooled fit (``--fit``), or on the fleet's engines; and the stop rule the options name,
which ``watch`` asks too.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from bayesgrpo._text import printable
from bayesgrpo.interfaces.cli.common import (
    EXIT_OK,
    EXIT_USER_ERROR,
    fleet_exit,
    fleet_frame,
    read_every_log,
    say,
)
from bayesgrpo.interfaces.cli.interrupts import check_interrupted
from bayesgrpo.interfaces.text import format_interval


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


def stop_rule(args: argparse.Namespace) -> Any:
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
        return _fleet_stop(args, stop_rule(args))
    table, unread = read_every_log(args)
    rule = stop_rule(args)
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
        say(f"{Path(source).name}: ERROR {error}")
    for run_id, why in unanswered.items():
        say(f"{run_id}: no answer: {why}")
    for row in frame.itertuples(index=False):
        say(
            f"{row.run_id}: {row.decision.upper()} at step {row.step:.0f} of {row.horizon_step:.0f} "
            f"(probability {row.probability:.2f}; expected remaining gain "
            f"{format_interval(row.expected_gain, row.gain_lower, row.gain_upper)})"
        )
        say(f"    {row.reason}")
        print(
            f"    reward at step {row.horizon_step:.0f}: "
            f"{format_interval(row.final_median, row.final_lower, row.final_upper)} (90% {row.band} band"
            + (", a logged reward: noise included)" if row.band == "predictive" else ", the expected reward)")
        )
        note = getattr(row, "eps_range_note", None)
        if isinstance(note, str) and not args.absolute:
            say(f"    ({note})")
        if row.method == "ensemble_mcmc":
            print(
                f"    (Pareto k {row.pareto_k:.2f}: the importance weights were unreliable, so this "
                "answer comes from the MCMC fallback)"
            )
        if getattr(row, "departed", False) is True:
            say(f"    (the run has left its forecast: {row.departure_note})")
    return EXIT_OK


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
    frame = fleet_frame(args, args.paths, settings)
    if args.json:
        json.dump(frame.replace({np.nan: None}).to_dict("records"), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        for row in frame.itertuples(index=False):
            if row.status != "ok":
                say(f"{row.run_id}: ERROR {row.error}")
                continue
            if not isinstance(row.decision, str):  # no horizon, or past it (fleet.work.no_advice)
                say(f"{row.run_id}: no answer: {row.reason}")
                continue
            say(
                f"{row.run_id}: {str(row.decision).upper()} at step {row.step:.0f} of {row.horizon_step:.0f} "
                f"(probability {row.probability:.2f}); reward at step {row.horizon_step:.0f}: "
                f"{format_interval(row.final_median, row.final_lower, row.final_upper)} (90% {row.band} band)"
            )
            say(f"    {row.reason}")
            how = RANGE_SOURCE_PHRASES.get(row.eps_range_source, row.eps_range_source)
            print(
                f"    (eps is a share of the reward range {row.eps_range_lower:.3g} .. "
                f"{row.eps_range_upper:.3g}, {how})"
            )
    if not frame.attrs.get("incomplete") and not frame["decision"].map(lambda d: isinstance(d, str)).any():
        # as without --workers: an error only when no run can be answered (each row says why)
        print("bayesgrpo: error: no run could be answered; each row says why", file=sys.stderr)
        return EXIT_USER_ERROR
    return fleet_exit(frame)
