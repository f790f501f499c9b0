"""Every notebook in notebooks/ runs top to bottom on the bundled runs (slow lane, few draws)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("BAYESGRPO_NOTEBOOK_FAST", "1")
    notebook = nbformat.read(path, as_version=4)
    # executed in memory: the committed outputs (full settings) stay as they are
    nbclient.NotebookClient(
        notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    errors = [o for c in notebook.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    assert os.environ["BAYESGRPO_NOTEBOOK_FAST"] == "1"


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no notebook"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebook_is_executed_without_errors(path):
    """The committed file is read on GitHub: every code cell ran, and none raised."""
    nbformat = pytest.importorskip("nbformat")
    notebook = nbformat.read(path, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(c.get("execution_count") for c in code), f"{path.name} has cells that never ran"
    errors = [o.get("ename") for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{path.name} was committed with errors: {errors}"
