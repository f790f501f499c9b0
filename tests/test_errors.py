"""One errors module: every exception and warning bayesgrpo raises on purpose is defined in
``bayesgrpo/errors.py``, exported from ``bayesgrpo`` and listed in ``docs/API.md``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import warnings
from pathlib import Path

import pytest

import bayesgrpo
from bayesgrpo import errors

ROOT = Path(__file__).resolve().parents[1]
ERROR_TYPES = [
    obj
    for _, obj in inspect.getmembers(errors, inspect.isclass)
    if obj.__module__ == errors.__name__ and issubclass(obj, (Exception, Warning))
]


def test_every_error_and_warning_is_exported_and_documented():
    api = (ROOT / "docs" / "API.md").read_text()
    for cls in ERROR_TYPES:
        assert getattr(bayesgrpo, cls.__name__) is cls
        assert f"`{cls.__name__}`" in api, f"{cls.__name__} is not listed in docs/API.md"


def test_errors_derive_from_the_package_bases():
    for cls in ERROR_TYPES:
        assert issubclass(cls, (errors.BayesGRPOError, errors.BayesGRPOWarning)), cls


def test_no_module_defines_its_own_error_or_warning():
    bases = {
        "Exception",
        "ValueError",
        "KeyError",
        "UserWarning",
        "Warning",
        "RuntimeError",
        "BayesGRPOError",
        "BayesGRPOWarning",
        "LogReadError",
    }
    found = []
    for path in (ROOT / "bayesgrpo").rglob("*.py"):
        if path.name == "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                names = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                if names & bases:
                    found.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert not found, found


@pytest.mark.parametrize(
    ("old_module", "name"),
    [
        ("bayesgrpo.model.reward_model", "ModelConfigError"),
        ("bayesgrpo.model.reward_model", "NotFittedError"),
        ("bayesgrpo.questions.live", "LiveUpdateWarning"),
        ("bayesgrpo.evaluate.backtest", "BacktestError"),
        ("bayesgrpo.evaluate.baselines", "BaselineInputError"),
        ("bayesgrpo.evaluate.scores", "ScoreInputError"),
    ],
)
def test_old_import_paths_of_errors_keep_working(old_module, name):
    assert getattr(importlib.import_module(old_module), name) is getattr(errors, name)


def test_one_filter_silences_every_package_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore", errors.BayesGRPOWarning)
        warnings.warn("repaired", errors.ReadWarning, stacklevel=1)
        warnings.warn("unreliable", errors.LiveUpdateWarning, stacklevel=1)
    assert caught == []
