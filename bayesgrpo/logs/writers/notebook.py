"""Write Jupyter notebooks holding a transformers/Unsloth training progress table.

The HTML is what ``transformers.utils.notebook`` builds: ``html_progress_bar`` (a ``<div>``
with ``<progress value=... max=...>`` and the label ``[250/250 1:40:29, Epoch 0/1]``) followed
by ``text_to_html_table`` (floats with 6 decimals, other values with ``str``). Column names are
those of Unsloth's patched ``NotebookProgressCallback``: ``Step``, ``Training Loss``, then each
TRL metric with ``/`` written `` / ``; a value missing from a log call reads ``No Log``. The
banner is Unsloth's (``unsloth_banner``) or transformers' (``bayesgrpo.logs.writers.trl.training_banner``),
in a ``stderr`` stream output before the table, as in the notebooks of ``data/notebook/``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from bayesgrpo.logs.writers.trl import PointsLike, point_records, training_banner

NO_LOG = "No Log"


def format_time(seconds: float) -> str:
    """``(h):mm:ss`` as transformers' ``format_time`` writes it."""
    t = int(seconds)
    h, m, s = t // 3600, (t // 60) % 60, t % 60
    return f"{h}:{m:02d}:{s:02d}" if h != 0 else f"{m:02d}:{s:02d}"


def html_progress_bar(value: int, total: int, label: str, prefix: str = "", width: int = 300) -> str:
    """Transformers' ``html_progress_bar`` (its triple-quoted template, line by line)."""
    style = f"width:{width}px; height:20px; vertical-align: middle;"
    return (
        "\n    <div>\n"
        f"      {prefix}\n"
        f"      <progress value='{value}' max='{total}' style='{style}'></progress>\n"
        f"      {label}\n"
        "    </div>\n    "
    )


def text_to_html_table(items: Sequence[Sequence[Any]]) -> str:
    """Transformers' ``text_to_html_table``: a header row, then rows (floats with 6 decimals)."""
    html_code = """<table border="1" class="dataframe">\n"""
    html_code += """  <thead>\n <tr style="text-align: left;">\n"""
    for name in items[0]:
        html_code += f"      <th>{name}</th>\n"
    html_code += "    </tr>\n  </thead>\n  <tbody>\n"
    for line in items[1:]:
        html_code += "    <tr>\n"
        for elt in line:
            elt = f"{elt:.6f}" if isinstance(elt, float) else str(elt)
            html_code += f"      <td>{elt}</td>\n"
        html_code += "    </tr>\n"
    html_code += "  </tbody>\n</table><p>"
    return html_code


def table_items(points: PointsLike, metrics: Sequence[str] | None = None) -> list[list[Any]]:
    """Header and rows of Unsloth's progress table for the given training points.

    ``loss`` becomes ``Training Loss``; other metrics keep their TRL names with `` / `` for
    ``/``; a metric a row lacks reads ``No Log``.
    """
    records = point_records(points)
    if metrics is None:
        seen: dict[str, None] = {}
        for record in records:
            for key in record:
                if key not in ("step", "loss", "epoch"):
                    seen.setdefault(key, None)
        metrics = list(seen)
    header = ["Step", "Training Loss"] + [m.replace("/", " / ") for m in metrics]
    rows: list[list[Any]] = [header]
    for index, record in enumerate(records):
        step = int(record.get("step", index + 1))
        row: list[Any] = [step, _cell(record.get("loss"))]
        row.extend(_cell(record.get(m)) for m in metrics)
        rows.append(row)
    return rows


def _cell(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NO_LOG
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def progress_html(
    points: PointsLike,
    *,
    max_steps: int | None = None,
    value: int | None = None,
    elapsed: float = 6029.0,
    num_train_epochs: int = 1,
    steps_per_epoch: int | None = None,
    metrics: Sequence[str] | None = None,
) -> str:
    """The HTML of a finished (or stopped) training display: progress bar, then the table.

    The label's epoch is ``int(state.epoch)``: ``value // steps_per_epoch`` (0 for a run cut
    short by ``max_steps``, as in Unsloth's notebooks), or the share of ``num_train_epochs``
    done when ``steps_per_epoch`` is not given.
    """
    items = table_items(points, metrics)
    last = int(items[-1][0]) if len(items) > 1 else 0
    total = max_steps or last
    value = value if value is not None else last
    spaced = " " * (len(str(total)) - len(str(value))) + str(value)
    if steps_per_epoch:
        epoch = value // steps_per_epoch
    else:
        epoch = int(num_train_epochs * value / total) if total else 0
    label = f"[{spaced}/{total} {format_time(elapsed)}, Epoch {epoch}/{num_train_epochs}]"
    return html_progress_bar(value, total, label) + text_to_html_table(items)


def unsloth_banner(
    *,
    num_examples: int = 7473,
    num_epochs: int = 1,
    total_steps: int = 250,
    per_device_batch_size: int = 1,
    gradient_accumulation_steps: int = 1,
    num_gpus: int = 1,
    trainable_parameters: int = 119_734_272,
) -> str:
    """Unsloth's start banner (the 2025 layout of ``data/notebook/*Qwen2_5_3B*``)."""
    total_batch = per_device_batch_size * gradient_accumulation_steps * num_gpus
    return (
        f"==((====))==  Unsloth - 2x faster free finetuning | Num GPUs = {num_gpus}\n"
        f"   \\\\   /|    Num examples = {num_examples:,} | Num Epochs = {num_epochs:,}\n"
        f"O^O/ \\_/ \\    Batch size per device = {per_device_batch_size:,} | "
        f"Gradient Accumulation steps = {gradient_accumulation_steps}\n"
        f"\\        /    Total batch size = {total_batch:,} | Total steps = {total_steps:,}\n"
        f' "-____-"     Number of trainable parameters = {trainable_parameters:,}\n'
    )


def _lines(text: str) -> list[str]:
    """Text as nbformat stores multi-line strings: a list of lines keeping their newlines."""
    return text.splitlines(keepends=True)


def stream_output(text: str, name: str = "stderr") -> dict[str, Any]:
    """A ``stream`` output."""
    return {"name": name, "output_type": "stream", "text": _lines(text)}


def html_output(html: str) -> dict[str, Any]:
    """A ``display_data`` output with ``text/html`` (and IPython's ``text/plain`` stand-in)."""
    return {
        "data": {"text/html": _lines(html), "text/plain": ["<IPython.core.display.HTML object>"]},
        "metadata": {},
        "output_type": "display_data",
    }


def code_cell(
    source: str, outputs: Iterable[Mapping[str, Any]] = (), execution_count: int | None = None
) -> dict[str, Any]:
    """An nbformat 4 code cell."""
    return {
        "cell_type": "code",
        "execution_count": execution_count,
        "metadata": {},
        "outputs": [dict(o) for o in outputs],
        "source": _lines(source),
    }


def notebook(cells: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """An nbformat 4.0 notebook of the given cells."""
    return {
        "cells": [dict(c) for c in cells],
        "metadata": {"kernelspec": {"display_name": "Python 3", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 0,
    }


def training_cell(
    points: PointsLike,
    *,
    banner: Literal["unsloth", "transformers"] | None = "unsloth",
    max_steps: int | None = None,
    value: int | None = None,
    num_examples: int = 7473,
    metrics: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The ``trainer.train()`` cell: banner on stderr, then the progress display."""
    records = point_records(points)
    total = max_steps or (int(records[-1].get("step", len(records))) if records else 0)
    outputs: list[dict[str, Any]] = []
    if banner == "unsloth":
        outputs.append(stream_output(unsloth_banner(num_examples=num_examples, total_steps=total)))
    elif banner == "transformers":
        outputs.append(stream_output(training_banner(num_examples=num_examples, total_steps=total)))
    html = progress_html(records, max_steps=total, value=value, metrics=metrics, steps_per_epoch=num_examples)
    outputs.append(html_output(html))
    return code_cell("trainer.train()", outputs)


def write_notebook(
    path: str | Path,
    points: PointsLike,
    *,
    banner: Literal["unsloth", "transformers"] | None = "unsloth",
    max_steps: int | None = None,
    value: int | None = None,
    setup_code: str | None = None,
    cells_before: Iterable[Mapping[str, Any]] = (),
) -> Path:
    """Write a notebook whose training cell shows ``points`` as a progress table.

    Parameters
    ----------
    path : str or Path
    points : DataFrame or iterable of mappings
        Training rows: ``step``, ``loss`` and TRL metrics (``reward``, ``rewards/f``...).
    banner : {"unsloth", "transformers"} or None
        Which start banner to print before the table.
    max_steps, value : int, optional
        The progress bar's total and value (default: the last step, a finished run).
    setup_code : str, optional
        Source of a code cell before the training cell (a ``GRPOConfig(...)`` call, say).
    cells_before : cells, optional
        Further cells before the training cell (an earlier run's table, say).

    Returns
    -------
    Path
    """
    cells = list(cells_before)
    if setup_code is not None:
        cells.append(code_cell(setup_code))
    cells.append(training_cell(points, banner=banner, max_steps=max_steps, value=value))
    path = Path(path)
    path.write_text(json.dumps(notebook(cells), indent=1) + "\n", encoding="utf-8")
    return path


__all__ = [
    "code_cell",
    "format_time",
    "html_output",
    "html_progress_bar",
    "notebook",
    "progress_html",
    "stream_output",
    "table_items",
    "text_to_html_table",
    "training_cell",
    "unsloth_banner",
    "write_notebook",
]
