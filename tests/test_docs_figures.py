"""``docs/make_figures.py`` redraws the eight documentation figures from the bundled runs and the
shipped population (about 15-25 s on two cores: slow lane).
"""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "docs" / "make_figures.py"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
EXPECTED = (
    "fan",
    "runs_by_family",
    "runs_by_size",
    "scaling",
    "shrinkage",
    "stop_probability",
    "t80",
    "transfer",
)


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_figures", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.mark.slow
def test_make_figures_writes_the_eight_figures(tmp_path: Path) -> None:
    module = _script()
    assert sorted(module.FIGURE_NAMES) == sorted(EXPECTED)  # the names docs/figures and README use

    assert module.main(["--out", str(tmp_path), "--quiet"]) == 0

    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(f"{name}.png" for name in EXPECTED)
    for name in EXPECTED:
        data = (tmp_path / f"{name}.png").read_bytes()
        width, height = _png_size(data)
        assert width > 300 and height > 200, (name, width, height)
        assert 5_000 < len(data) < 150_000, (name, len(data))  # drawn, and small enough for the docs
