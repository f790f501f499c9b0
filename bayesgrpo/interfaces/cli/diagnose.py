"""The ``bayesgrpo diagnose`` verb: failure modes found in each run's logged signals, in this
process or on the fleet's engines (``--workers``, ``--address``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bayesgrpo.interfaces.cli.common import (
    EXIT_OK,
    fleet_exit,
    fleet_paths,
    format_number,
    say,
    say_fleet,
)
from bayesgrpo.interfaces.logs_input import read_logs

#: Why a run of ``diagnose --workers`` has no findings when the engine was lost in its first pass.
NOT_DIAGNOSED = "not diagnosed: the engine was lost"


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
    done = fleet_exit(findings) if findings.attrs.get("incomplete") else EXIT_OK
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
        say(str(run_id))
        for row in frame.itertuples(index=False):
            evidence = ", ".join(
                f"{k}={format_number(v) if isinstance(v, float) else v}"
                for k, v in dict(row.evidence).items()
            )
            say(f"  [{row.severity}] {row.name} (steps {row.first_step:.0f}-{row.last_step:.0f}): {evidence}")
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
    paths = fleet_paths(args)
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
    say_fleet(frame, engine.retried_tasks, engine.name)  # both passes' retries
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
