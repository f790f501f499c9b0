"""A fleet of simulated runs on disk, assessed serially and on Ray with 1 and 2 workers.

``--runs`` simulated GRPO runs (mixed families and sizes, 40-200 logged steps, partly observed:
runs still in progress) are written to disk as real logs in four formats by the package's own
writers: TRL ``trainer_state.json`` (in ``checkpoint-N/`` folders), verl console logs, TensorBoard
event files and plain CSV tables; one log in fifty is damaged (a CSV whose reward column holds
text) to show the error rows. Then :func:`bayesgrpo.interfaces.fleet.assess` answers for every run
(live update on the shipped population, plateau rule, forecast, diagnostics), serially in this
process, on a local Ray with 1 worker, and with 2. Measured: wall time, runs per second, speed-up
over serial, the peak memory of the driver and of each Ray worker process, and whether every row
equals the serial one (same seeds: it must).

Usage::

    python benchmarks/fleet.py                 # 10,000 runs (about 25 minutes on 2 cores)
    python benchmarks/fleet.py --runs 500      # quicker

Resumable: the logs are written once into ``benchmarks/_scratch/fleet_<runs>/`` and each engine's
table is kept there as Parquet (``--fresh`` redoes them). Writes ``benchmarks/results/fleet.md``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _markdown import machine_line, markdown_table

RESULTS = HERE / "results"
FORMATS = ("trl-state", "verl-console", "tensorboard", "csv")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fresh", action="store_true", help="rewrite the logs and rerun every engine")
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    return parser.parse_args(argv)


def write_fleet(folder: Path, n_runs: int, seed: int) -> dict[str, int]:
    """Write ``n_runs`` simulated runs as logs in mixed formats; the count of each format."""
    from bayesgrpo.logs.writers.tensorboard import write_tensorboard
    from bayesgrpo.logs.writers.trl import write_trainer_state
    from bayesgrpo.logs.writers.verl import write_verl_console
    from bayesgrpo.model.simulate import simulate_runs

    marker = folder / "written.json"
    if marker.exists() and json.loads(marker.read_text())["runs"] == n_runs:
        return json.loads(marker.read_text())["formats"]
    simulated = simulate_runs(
        n_runs,
        curve="weibull",
        families=("qwen", "llama", "gemma", "mistral"),
        n_steps=[40, 80, 120, 200],
        observed_fraction=[1.0, 0.6, 0.3, 0.8],
        noise=[0.02, 0.04, 0.08],
        random_seed=seed,
    )
    points = dict(tuple(simulated.table.points.groupby("run_id", sort=False)))
    runs = simulated.table.runs.set_index("run_id")
    counts = dict.fromkeys(FORMATS, 0)
    for i, run_id in enumerate(simulated.table.run_ids):
        run = points[run_id][["step", "reward"]].reset_index(drop=True)
        horizon = int(runs.loc[run_id, "total_steps"])
        kind = FORMATS[i % len(FORMATS)]
        counts[kind] += 1
        if kind == "trl-state":
            target = folder / run_id / f"checkpoint-{int(run['step'].max())}"
            target.mkdir(parents=True, exist_ok=True)
            write_trainer_state(target / "trainer_state.json", run, max_steps=horizon)
        elif kind == "verl-console":
            renamed = run.rename(columns={"reward": "critic/score/mean"})
            write_verl_console(folder / f"{run_id}.log", renamed, total_training_steps=horizon)
        elif kind == "tensorboard":
            write_tensorboard(folder / run_id, run.rename(columns={"reward": "critic/score/mean"}))
        else:
            table = run.assign(reward=run["reward"].astype(object))
            if i % 50 == 3:  # a damaged log: text where the rewards belong, all of them
                table["reward"] = "n/a"
            table.to_csv(folder / f"{run_id}.csv", index=False)
    marker.write_text(json.dumps({"runs": n_runs, "formats": counts}))
    return counts


class PeakMemory:
    """The largest resident memory of this process and of each Ray worker, sampled every 0.2 s."""

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil
        self.driver = 0
        self.workers: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _sample(self) -> None:
        me = self._psutil.Process()
        while not self._stop.is_set():
            self.driver = max(self.driver, me.memory_info().rss)
            for process in self._psutil.process_iter(["pid", "name", "cmdline"]):
                try:
                    line = " ".join(process.info["cmdline"] or [])
                    if "run_batch" in (process.info["name"] or "") or "ray::" in line:
                        rss = process.memory_info().rss
                        pid = process.info["pid"]
                        self.workers[pid] = max(self.workers.get(pid, 0), rss)
                except (self._psutil.NoSuchProcess, self._psutil.AccessDenied):
                    continue
            time.sleep(0.2)


def run_engine(
    folder: Path, workers: int | None, cache: Path, fresh: bool
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One engine's table (cached as Parquet) and its measurements."""
    from bayesgrpo.interfaces.fleet import assess

    table_path, info_path = cache.with_suffix(".parquet"), cache.with_suffix(".json")
    if table_path.exists() and info_path.exists() and not fresh:
        table = pd.read_parquet(table_path)
        if "findings" in table.columns:  # a table of this version
            return table, json.loads(info_path.read_text())
    with PeakMemory() as memory:
        start = time.perf_counter()
        table = assess([folder], workers=workers)
        seconds = time.perf_counter() - start
    info = {
        "engine": "serial" if workers is None else f"ray, {workers} worker{'s' if workers > 1 else ''}",
        "seconds": seconds,
        "runs": len(table),
        "errors": int((table["status"] != "ok").sum()),
        "retried_tasks": int(table.attrs.get("retried_tasks", 0)),
        "driver_peak_mib": memory.driver / 2**20,
        "worker_peak_mib": max(memory.workers.values(), default=0) / 2**20,
    }
    # every finding kept, as JSON text (its evidence mixes numbers and text: not a Parquet struct)
    table["findings"] = [json.dumps(found, default=str, sort_keys=True) for found in table["findings"]]
    table.to_parquet(table_path)
    info_path.write_text(json.dumps(info))
    return table, info


def main(argv: list[str] | None = None) -> None:
    """Write the fleet, assess it with each engine, compare and report."""
    args = parse_args(argv)
    warnings.simplefilter("ignore")
    command = "python benchmarks/fleet.py" + "".join(
        " " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )
    folder = HERE / "_scratch" / f"fleet_{args.runs}"
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    counts = write_fleet(folder / "logs", args.runs, args.seed)
    write_seconds = time.perf_counter() - start
    tables, rows = {}, []
    for workers in (None, 1, 2):
        name = "serial" if workers is None else f"ray{workers}"
        table, info = run_engine(folder / "logs", workers, folder / name, args.fresh)
        tables[name] = table
        rows.append(info)
        print(info, flush=True)
    serial = tables["serial"].drop(columns="seconds").reset_index(drop=True)
    for row, name in zip(rows, tables, strict=True):
        other = tables[name].drop(columns="seconds").reset_index(drop=True)
        row["equals_serial"] = bool(serial.equals(other))
        row["runs_per_s"] = row["runs"] / row["seconds"]
        row["speed_up"] = rows[0]["seconds"] / row["seconds"]
    columns = ["engine", "runs", "errors", "seconds", "runs_per_s", "speed_up"]
    columns += ["driver_peak_mib", "worker_peak_mib", "retried_tasks", "equals_serial"]
    frame = pd.DataFrame(rows)[columns]
    machine = machine_line()
    serial_ok = tables["serial"]
    lines = [
        "# A fleet of runs: serial and on Ray",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine}.  ",
        f"Logs: {args.runs} simulated runs written as {json.dumps(counts)} ({write_seconds:.0f} s to write, "
        "or reused); one CSV in fifty damaged (text where the rewards belong).",
        "",
        "Each engine assesses every run (read, live update on the shipped population, plateau rule "
        "eps 1% p 0.9 with its expected gain, phase, forecast with its 90% predictive band, every "
        "diagnostic finding). Ray starts a local instance with as many CPUs as workers (its start is "
        "in the time).",
        "",
        markdown_table(frame),
        "",
        f"Decisions (serial): {serial_ok['decision'].value_counts().to_dict()}; error rows: "
        f"{int((serial_ok['status'] != 'ok').sum())}, each naming its file and the reader's error.",
        "",
        "The same engine runs the backtest harness (`fleet_backtest.md`: its wall time before and after) "
        "and the fleet's HTML page (`fleet_report.md`: 1,000 runs).",
        "",
    ]
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "fleet.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
