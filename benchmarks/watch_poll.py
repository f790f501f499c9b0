"""Poll cost of `bayesgrpo watch` on the largest bundled logs (median of 5 repeats).

Usage::

    python benchmarks/watch_poll.py bayesgrpo/_data/bundled_population.nc > benchmarks/results/watch_poll.md
"""

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from bayesgrpo.interfaces.watch import Watcher
from bayesgrpo.logs.writers.trl import write_trainer_state
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.questions.stopping import PlateauRule

pop = RewardModel.load(sys.argv[1])
tmp = Path(tempfile.mkdtemp())
verl = Path("data/verl-console/verl_gpg_qwen2-7b_math.log")
text = verl.read_text(encoding="utf-8")
cut = text.index("step:200 - ")
tb_src = Path("data/tensorboard/verl_asyncRA_gsm8k_qwen2_7b_off_ppl_behav")
shutil.copytree(tb_src, tmp / "tb")
csv = pd.read_csv(
    "data/csv/nb_unslothai_notebooks_gpt_oss_20B_Reinforcement_Learning_2048_Game_DGX_S_c4dcd30_n1000.csv"
)
write_trainer_state(tmp / "trainer_state.json", csv.iloc[:900], max_steps=1000)
(tmp / "run.log").write_text(text[:cut], encoding="utf-8")


def timed(f, n=5):
    """Median seconds of ``n`` calls of ``f``."""
    out = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1000


print(
    "| log | first poll ms | unchanged poll ms | poll after growth ms | of which live update ms | steps | "
    "state |"
)
print("|---|---|---|---|---|---|---|")
for name, path, horizon, grow in [
    ("verl console log, 604 KB, +1 step line per poll", tmp / "run.log", None, "verl"),
    ("trainer_state.json, 900 -> 1000 entries, +20 per poll", tmp / "trainer_state.json", None, "trl"),
    ("TensorBoard folder, 360 KB, touched (re-read, data unchanged)", tmp / "tb", 105, None),
]:
    w = Watcher(path, rule=PlateauRule(eps=0.01, relative=True), population=pop, horizon=horizon)
    t = time.perf_counter()
    s = w.poll()
    first = (time.perf_counter() - t) * 1000
    unchanged = timed(w.poll, 20)
    grown, updates = [], []
    for k in range(5):
        if grow == "verl":
            start = text.index(f"step:{200 + k} - ")
            end = text.index("\n", start) + 1
            with open(path, "a", encoding="utf-8") as h:
                h.write(text[text.rindex("\n", 0, start) + 1 : end])
        elif grow == "trl":
            write_trainer_state(path, csv.iloc[: 900 + 20 * (k + 1)], max_steps=1000)
        else:
            for p in path.iterdir():
                p.touch()  # same data, new mtime: re-read, forecast cached
        t = time.perf_counter()
        st = w.poll()
        grown.append((time.perf_counter() - t) * 1000)
        updates.append(st[0].seconds * 1000)
    print(
        f"| {name} | {first:.0f} | {unchanged:.2f} | {statistics.median(grown):.0f} | "
        f"{statistics.median(updates):.0f} | {st[0].n_steps} | {st[0].state} |"
    )
