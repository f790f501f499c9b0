"""Metrics a callback prints into a cell's output, one line a logged step: ``Step 10 | reward: 1.570``.

A ``TrainerCallback`` whose ``on_log`` prints ``f"Step {state.global_step} | reward: {reward:.3f}"``
leaves the run's reward in the training cell's stream output, while the progress table beside
it (if any) shows the training loss only. Seen in public GRPO notebooks, with one metric or
several: ``Step 119 | Loss: 0.0000 | Reward: -0.3655 | Reward Std: 0.0566 | KL: 0.0580``.

A *printed step* is a stream line ``Step <N> | <name>: <number> [| <name>: <number> ...]``:
every ``|``-separated part after the step a ``name: number`` pair (``nan``/``inf`` are numbers).
A line that starts ``Step <N> |`` but holds anything else (the same callback's ``Step 10 |
Generated text (first example):``) is no record; it is counted and noted, not read. Lines are
numbered over every code cell's stream outputs in output order (as the console dicts of
:func:`~bayesgrpo.logs.readers.notebook.cells.stream_lines` are) and grouped by cell.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

#: ``Step 10 | ...``: a step, then the metrics.
_STEP_LINE = re.compile(r"\s*Step\s+(\d{1,18})\s*\|(.*)")
#: ``reward: 1.570``, ``Reward Std: 0.0566``, ``rewards/format: -1e-3``, ``kl: nan``.
_PAIR = re.compile(
    r"\s*([A-Za-z_][\w/. \-]{0,80}?)\s*[:=]\s*"
    r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf(?:inity)?)\s*",
    re.IGNORECASE,
)
#: Colab's notice where it kept only the end of a long output.
_OUTPUT_CUT = re.compile(r"Streaming output truncated to the last (\d+) lines")


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else ""


def code_sources(cells: list[dict[str, Any]]) -> list[str]:
    """The code of each code cell (nbformat 4's ``source``, 3's ``input``)."""
    return [_text(c.get("source", c.get("input"))) for c in cells if c.get("cell_type") == "code"]


def parse_printed_step(line: str) -> tuple[int, dict[str, float]] | None:
    """The step and metrics of a printed step line; ``None`` for any other line.

    >>> parse_printed_step("Step 10 | reward: 1.570")
    (10, {'reward': 1.57})
    >>> parse_printed_step("Step 119 | Loss: 0.0000 | Reward Std: 0.0566")
    (119, {'Loss': 0.0, 'Reward Std': 0.0566})
    >>> parse_printed_step("Step 10 | Generated text (first example):") is None
    True
    """
    match = _STEP_LINE.fullmatch(line.rstrip())
    if match is None:
        return None
    metrics: dict[str, float] = {}
    for part in match.group(2).split("|"):
        pair = _PAIR.fullmatch(part)
        if pair is None:
            return None
        metrics[pair.group(1).strip()] = float(pair.group(2))
    return int(match.group(1)), metrics


def is_step_line(line: str) -> bool:
    """Whether a line starts as a printed step does (``Step <N> |``), whatever follows."""
    return _STEP_LINE.match(line) is not None


@dataclass
class PrintedSteps:
    """The printed steps of one cell.

    Attributes
    ----------
    cell : int
        The cell's number among all cells, from 1 (as progress tables are numbered).
    records : list of (line, step, metrics)
        Each printed step: its stream line number, its step, its metrics by printed name.
    other_lines : list of int
        Lines that start ``Step <N> |`` but are no ``name: number`` pairs (not read).
    kept_lines : int or None
        Where Colab cut the cell's output, the number of its last lines it kept.
    """

    cell: int
    records: list[tuple[int, int, dict[str, float]]] = field(default_factory=list)
    other_lines: list[int] = field(default_factory=list)
    kept_lines: int | None = None

    @property
    def names(self) -> set[str]:
        """The printed metric names."""
        return {name for _, _, metrics in self.records for name in metrics}

    @property
    def nan_count(self) -> int:
        """Values printed as ``nan``."""
        return sum(math.isnan(v) for _, _, metrics in self.records for v in metrics.values())


def printed_steps(cells: list[dict[str, Any]]) -> list[PrintedSteps]:
    """The printed steps of each code cell that has some, in cell order.

    Parameters
    ----------
    cells : list of dict
        The notebook's cells (:func:`~bayesgrpo.logs.readers.notebook.cells.notebook_cells`).

    Returns
    -------
    list of PrintedSteps
        One per cell holding at least one printed step.
    """
    found: list[PrintedSteps] = []
    number = 0
    for index, cell in enumerate(cells, start=1):
        if cell.get("cell_type") != "code":
            continue
        here = PrintedSteps(index)
        for output in cell.get("outputs") or []:
            if not isinstance(output, dict) or output.get("output_type") != "stream":
                continue
            for line in _text(output.get("text")).splitlines():
                number += 1
                if not line.lstrip().startswith("Step"):
                    cut = _OUTPUT_CUT.search(line)
                    if cut is not None:
                        here.kept_lines = int(cut.group(1))
                    continue
                parsed = parse_printed_step(line)
                if parsed is not None:
                    here.records.append((number, parsed[0], parsed[1]))
                elif is_step_line(line):
                    here.other_lines.append(number)
        if here.records:
            found.append(here)
    return found
