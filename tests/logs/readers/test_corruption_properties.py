"""Property: random corruptions of valid logs never crash a reader with a foreign error type,
and never lose a record unaccounted for.

For each format a valid log is written from random points by the package's own writers (which
write what the real tools write), then corrupted at random: cut at any byte, bytes overwritten,
lines duplicated, swapped or deleted, a number replaced by text. Reading it must either return a
table whose report balances (records read = kept + dropped) or raise a ``BayesGRPOError``.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bayesgrpo
from bayesgrpo.errors import BayesGRPOError


def _points(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1)
    reward = 0.2 + 0.6 * (1 - np.exp(-steps / 10)) + rng.normal(0, 0.05, n)
    return pd.DataFrame(
        {"step": steps, "reward": reward, "kl": rng.uniform(0, 0.1, n), "entropy": rng.uniform(0.2, 1, n)}
    )


def _write_csv(points: pd.DataFrame, folder: Path) -> Path:
    path = folder / "run.csv"
    points.to_csv(path, index=False)
    return path


def _write_jsonl(points: pd.DataFrame, folder: Path) -> Path:
    path = folder / "run.jsonl"
    points.to_json(path, orient="records", lines=True)
    return path


def _optional(module: str, function: str, name: str) -> Callable[[pd.DataFrame, Path], Path] | None:
    try:
        writer = getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError):
        return None

    def write(points: pd.DataFrame, folder: Path) -> Path:
        path = folder / name
        result = writer(path, points)
        return Path(result) if isinstance(result, (str, Path)) else path

    return write


WRITERS: dict[str, Callable[[pd.DataFrame, Path], Path] | None] = {
    "csv": _write_csv,
    "jsonl": _write_jsonl,
    "verl-console": _optional("bayesgrpo.logs.writers.verl", "write_verl_console", "run.log"),
    "trl-state": _optional("bayesgrpo.logs.writers.trl", "write_trainer_state", "trainer_state.json"),
    "trl-console": _optional("bayesgrpo.logs.writers.trl", "write_trl_console", "run.log"),
    "wandb-csv": _optional("bayesgrpo.logs.writers.wandb", "write_wandb_csv", "export.csv"),
    "notebook": _optional("bayesgrpo.logs.writers.notebook", "write_notebook", "run.ipynb"),
    "tensorboard": _optional("bayesgrpo.logs.writers.tensorboard", "write_tensorboard", "tb"),
}


def corrupt(data: bytes, kind: str, rng: np.random.Generator) -> bytes:
    """One random corruption of a file's bytes."""
    if not data:
        return data
    lines = data.splitlines(keepends=True)
    position = int(rng.integers(0, len(data)))
    if kind == "cut":
        return data[:position]
    if kind == "overwrite":
        length = int(rng.integers(1, 16))
        return (
            data[:position] + bytes(rng.integers(0, 256, length, dtype=np.uint8)) + data[position + length :]
        )
    if kind == "text_for_number":
        digits = [i for i, b in enumerate(data) if chr(b).isdigit()]
        if not digits:
            return data
        i = digits[int(rng.integers(0, len(digits)))]
        return data[:i] + b"abc" + data[i + 1 :]
    if len(lines) < 2:
        return data
    i, j = (int(v) for v in rng.integers(0, len(lines), 2))
    if kind == "duplicate_line":
        lines.insert(j, lines[i])
    elif kind == "swap_lines":
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == "delete_line":
        del lines[i]
    elif kind == "garbage_line":
        lines.insert(i, b"\x1b[31mTraceback (most recent call last): \xff\xfe nonsense step: - :\n")
    return b"".join(lines)


KINDS = ["cut", "overwrite", "text_for_number", "duplicate_line", "swap_lines", "delete_line", "garbage_line"]
AVAILABLE = sorted(name for name, writer in WRITERS.items() if writer is not None)


def _check(table_or_error) -> None:
    if isinstance(table_or_error, BaseException):
        assert isinstance(table_or_error, BayesGRPOError), (
            f"foreign error {type(table_or_error).__name__}: {table_or_error}"
        )
        return
    table = table_or_error
    assert table.report.balanced, table.report.summary()
    for account in table.report.sources:
        assert account.records_kept >= 0
    assert (
        table.points.groupby("run_id")["step"]
        .apply(lambda s: s.is_monotonic_increasing and s.is_unique)
        .all()
    )


@pytest.mark.parametrize("fmt", AVAILABLE)
@settings(
    max_examples=int(__import__("os").environ.get("BAYESGRPO_FUZZ_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    n=st.integers(min_value=1, max_value=40),
    seed=st.integers(min_value=0, max_value=2**16),
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=3),
)
def test_corrupted_logs_fail_cleanly_or_balance(tmp_path_factory, fmt, n, seed, kinds):
    folder = tmp_path_factory.mktemp(fmt.replace("-", "_"))
    writer = WRITERS[fmt]
    assert writer is not None
    written = writer(_points(n, seed), folder)
    files = [written] if written.is_file() else sorted(p for p in written.rglob("*") if p.is_file())
    rng = np.random.default_rng(seed)
    target = files[int(rng.integers(0, len(files)))]
    data = target.read_bytes()
    for kind in kinds:
        data = corrupt(data, kind, rng)
    target.write_bytes(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = bayesgrpo.load_runs(written, format=fmt)
    except Exception as exc:  # noqa: BLE001 - the property is about which exceptions escape
        result = exc
    _check(result)


@pytest.mark.parametrize("fmt", AVAILABLE)
def test_valid_logs_round_trip(tmp_path, fmt):
    points = _points(30, 7)
    written = WRITERS[fmt](points, tmp_path)  # type: ignore[misc]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = bayesgrpo.load_runs(written, format=fmt)
    assert table.report.balanced and table.report.records_dropped == 0
    got = table.points
    assert got["step"].tolist() == points["step"].tolist()
    np.testing.assert_allclose(got["reward"], points["reward"], rtol=1e-3, atol=1e-3)
