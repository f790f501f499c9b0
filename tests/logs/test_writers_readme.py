"""The README's writers example runs as shown and reads back what it wrote."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_writers_example_writes_runs_the_readers_read(tmp_path, monkeypatch):
    section = README.read_text().split("### Write a run in any supported format", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)  # the README's own block, as a user runs it
    table = namespace["table"]
    assert sorted(table.run_ids) == ["grpo-qwen", "verl_qwen"]
    assert table.runs["total_steps"].tolist() == [200.0, 200.0]
    assert len(table.points) == 200
    assert table.points.groupby("run_id")["reward"].last().round(3).tolist() == [0.771, 0.771]
