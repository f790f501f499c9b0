"""What every reader is given: a source's label names its file, or the folder of its files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bayesgrpo.logs.readers.base import Source
from bayesgrpo.logs.readers.load import discover
from bayesgrpo.logs.writers.tensorboard import write_tensorboard


def test_a_one_file_source_is_labelled_by_its_file():
    assert Source("csv", (Path("runs/a.csv"),), "a").label == "runs/a.csv"


def test_a_several_file_source_is_labelled_by_its_folder():
    paths = (Path("tb/run1/events.out.tfevents.1"), Path("tb/run1/events.out.tfevents.2"))
    assert Source("tensorboard", paths, "run1").label == "tb/run1"


def test_a_tensorboard_run_of_two_event_files_reads_under_its_folder(tmp_path):
    folder = tmp_path / "run1"
    write_tensorboard(folder, pd.DataFrame({"step": [1], "train/reward": [0.1]}), file_time=1_700_000_000)
    write_tensorboard(folder, pd.DataFrame({"step": [2], "train/reward": [0.2]}), file_time=1_700_000_100)
    sources, _, _ = discover([folder])
    assert [s.label for s in sources] == [str(folder)]
