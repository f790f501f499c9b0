"""Ctrl-C to a fleet on a local Ray at chosen moments of its start: exit code, and Ray left behind.

CI saw the fleet's Ctrl-C test end with the driver dead of SIGSEGV (-11) instead of exit 130. This
script is that test's own run at chosen delays: forty verl logs assessed by ``assess(workers=2,
batch_size=2)`` in a fresh process (SIGINT as a terminal delivers it), SIGINT sent ``delay`` seconds
after Ray's first process appears; then how the process ended, how long it took, and for how long
Ray processes (raylet, GCS, ``ray::`` workers and agents) outlived it (at most 90 s watched).

Usage::

    python benchmarks/experiments/fleet_ctrl_c.py --delays 3 4 5 5 5 6 4.5 5.5   # -> results/fleet_ctrl_c.md

``--label`` names the code measured (a row per try is appended under it, so runs on two commits
sit in one file).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

from bayesgrpo.logs.writers.verl import write_verl_console

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from _markdown import markdown_table  # noqa: E402

RESULTS = HERE / "results" / "fleet_ctrl_c.md"


def write_fleet(root: Path) -> None:
    """The test's forty verl console logs (80 steps each, a noisy saturating reward)."""
    for i in range(40):
        steps = np.arange(1, 81)
        rng = np.random.default_rng(100 + i)
        level = 0.6 + 0.01 * (i % 10)
        reward = 0.2 + (level - 0.2) * (1 - np.exp(-steps / 15)) + rng.normal(0, 0.03, 80)
        points = pd.DataFrame({"step": steps, "critic/score/mean": reward.round(4)})
        write_verl_console(root / f"run_{i:02d}.log", points, total_training_steps=200)


def ray_processes() -> list[int]:
    found = []
    for process in psutil.process_iter(["pid", "name", "cmdline"]):
        try:
            line = " ".join(process.info["cmdline"] or [])
            if "raylet" in (process.info["name"] or "") or "ray::" in line or "gcs_server" in line:
                found.append(process.info["pid"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def one_try(root: Path, delay: float) -> dict[str, object]:
    code = (
        "import sys\nfrom bayesgrpo.interfaces.fleet import assess\ntry:\n"
        f"    assess([{str(root)!r}] * 40, workers=2, batch_size=2)\n"
        "except KeyboardInterrupt:\n    sys.exit(130)\n"
    )
    start = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while not ray_processes() and time.monotonic() - start < 120:
        time.sleep(0.1)
    ray_up = time.monotonic() - start
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    process.wait(timeout=120)
    ended = time.monotonic()
    while ray_processes() and time.monotonic() - ended < 90:
        time.sleep(0.5)
    return {
        "delay_s": delay,
        "exit_code": process.returncode,
        "ray_up_after_s": round(ray_up, 1),
        "exit_after_signal_s": round(ended - start - ray_up - delay, 1),
        "ray_left_for_s": round(time.monotonic() - ended, 1),
        "ray_left_at_end": len(ray_processes()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delays", type=float, nargs="+", default=[3, 4, 5, 5, 5, 6, 4.5, 5.5])
    parser.add_argument("--label", default="this checkout")
    args = parser.parse_args()
    if ray_processes():
        sys.exit("a Ray is running: stop it first (this script counts Ray's processes)")
    with tempfile.TemporaryDirectory() as folder:
        write_fleet(Path(folder))
        rows = [one_try(Path(folder), delay) for delay in args.delays]
    table = pd.DataFrame(rows)
    new = not RESULTS.exists()
    with RESULTS.open("a") as out:
        if new:
            out.write("# Ctrl-C to a fleet on a local Ray as it starts\n\n")
            out.write("Command: `python benchmarks/experiments/fleet_ctrl_c.py --delays ... --label ...`\n")
        out.write(f"\n## {args.label}\n\n{markdown_table(table, floatfmt='.1f')}\n")
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
