"""The package's layers import one way and old import paths keep working.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``): the layers of
``docs/ARCHITECTURE.md`` and no loop between sibling modules at any depth. import-linter reads
every import, those inside functions and under ``TYPE_CHECKING`` included.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from importlinter import api as importlinter_api

import bayesgrpo
from bayesgrpo import _moved

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept():
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
            "--config",
            str(ROOT / "pyproject.toml"),
            "--no-cache",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_the_contracts_name_every_layer_folder():
    config = importlinter_api.read_configuration(str(ROOT / "pyproject.toml"))
    layers = next(c for c in config["contracts_options"] if c["type"] == "layers")["layers"]
    named = {name.strip() for layer in layers for name in layer.split("|")}
    folders = {f"bayesgrpo.{p.name}" for p in (ROOT / "bayesgrpo").iterdir() if (p / "__init__.py").is_file()}
    assert folders <= named, f"layer folders missing from the contract: {sorted(folders - named)}"


@pytest.mark.parametrize("old", sorted(_moved.MOVED_MODULES))
def test_an_old_path_is_the_module_at_its_new_path(old):
    new = importlib.import_module(_moved.MOVED_MODULES[old])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sys.modules.pop(old, None)
        aliased = importlib.import_module(old)
    assert aliased is new
    assert aliased.__spec__.name == new.__name__  # the module keeps its own spec
    assert any(issubclass(w.category, DeprecationWarning) and new.__name__ in str(w.message) for w in caught)


def test_old_submodule_paths_and_attributes_resolve_to_the_same_objects():
    from bayesgrpo.logs.readers.trl.columns import TRL_ALIASES
    from bayesgrpo.questions.stopping import PlateauRule

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from bayesgrpo.readers.trl import TRL_ALIASES as old_aliases
        from bayesgrpo.stopping import PlateauRule as OldPlateauRule

        assert bayesgrpo.datasets is importlib.import_module("bayesgrpo.model.datasets")
    assert old_aliases is TRL_ALIASES
    assert OldPlateauRule is PlateauRule


def test_python_dash_m_runs_a_module_by_its_old_path():
    result = subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-m", "bayesgrpo.datasets", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "--population" in result.stdout


def test_the_public_names_still_import():
    for name in bayesgrpo.__all__:
        assert getattr(bayesgrpo, name) is not None


def test_all_lists_exactly_the_lazy_names():
    assert sorted(bayesgrpo.__all__) == sorted([*bayesgrpo._LAZY, "__version__"])
