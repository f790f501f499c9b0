"""Framing of a notebook: its cells and outputs, and transformers' HTML progress tables in them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from bayesgrpo.errors import EmptyLogError, LogReadError, TruncatedLogError
from bayesgrpo.logs.readers.notebook.code import code_metadata
from bayesgrpo.logs.readers.trl.columns import (
    TRL_ALIASES,
    json_error_place,
    read_text_file,
)
from bayesgrpo.logs.readers.trl.console import parse_dict_line
from bayesgrpo.logs.readers.trl.metadata import BannerParser, summary_metadata
from bayesgrpo.logs.readers.trl.state import json_is_cut

NOTEBOOK_ALIASES: dict[str, str] = {**TRL_ALIASES, "Training Loss": "loss"}
ROW_LABEL = "table row"
NO_LOG = {"no log"}
STEP_HEADERS = ("Step",)
SPACED_SLASH = re.compile(r"\s+/\s+")

_TRAIN_OUTPUT = re.compile(r"TrainOutput\(global_step=(\d+),.*?metrics=(\{.*\})\)", re.DOTALL)


# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------


class _ProgressTableParser(HTMLParser):
    """The progress bar and first table of one HTML output, as texts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.progress: dict[str, str | None] | None = None
        self.label: list[str] = []
        self.seen_table = False
        self.in_table = False
        self.closed = False
        self.header: list[str] | None = None
        self.rows: list[list[str]] = []
        self.row: list[str] | None = None
        self.row_is_header = False
        self.cell: list[str] | None = None
        self.partial_rows = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "progress" and self.progress is None and not self.seen_table:
            self.progress = dict(attrs)
        elif tag == "table" and not self.seen_table:
            self.seen_table = True
            self.in_table = True
        elif self.in_table:
            if tag == "tr":
                self._end_row()
                self.row = []
                self.row_is_header = False
            elif tag in ("td", "th") and self.row is not None:
                self._end_cell()
                self.cell = []
                self.row_is_header = self.row_is_header or tag == "th"

    def handle_endtag(self, tag: str) -> None:
        if not self.in_table:
            return
        if tag in ("td", "th"):
            self._end_cell()
        elif tag == "tr":
            self._end_row()
        elif tag == "table":
            self._end_row()
            self.in_table = False
            self.closed = True

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)
        elif self.progress is not None and not self.seen_table:
            self.label.append(data)

    def _end_cell(self) -> None:
        if self.cell is not None and self.row is not None:
            self.row.append("".join(self.cell).strip())
        self.cell = None

    def _end_row(self) -> None:
        self._end_cell()
        if self.row is None:
            return
        if self.row_is_header and self.header is None:
            self.header = self.row
        elif self.row:
            self.rows.append(self.row)
        self.row = None

    def finish(self) -> None:
        """Close the parse; a row still open at the end is counted as partial, not kept."""
        self.close()
        if self.in_table and self.row is not None:
            self.partial_rows += 1
            self.row = None
            self.cell = None


@dataclass
class ProgressTable:
    """One progress table found in the notebook."""

    cell: int
    header: list[str]
    rows: list[list[str]]
    closed: bool
    partial_rows: int
    progress: dict[str, str | None] | None
    label: str
    banner: dict[str, float]
    code: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def is_step_table(self) -> bool:
        """Whether the table's first column is the step (a training progress table)."""
        return bool(self.header) and self.header[0] in STEP_HEADERS


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else ""


def _parse_table(html: str, cell: int, banner: BannerParser) -> ProgressTable | None:
    parser = _ProgressTableParser()
    try:
        parser.feed(html)
        parser.finish()
    except (AssertionError, ValueError):  # very old html.parser raise on broken markup
        return None
    if not parser.seen_table or parser.progress is None:
        return None
    return ProgressTable(
        cell=cell,
        header=parser.header or [],
        rows=parser.rows,
        closed=parser.closed,
        partial_rows=parser.partial_rows,
        progress=parser.progress,
        label=" ".join("".join(parser.label).split()),
        banner=dict(banner.fields),
    )


# --------------------------------------------------------------------------------------------
# notebook structure
# --------------------------------------------------------------------------------------------


def load_notebook(path: Path) -> dict[str, Any]:
    """The notebook as JSON; a file that is not one raises a :class:`LogReadError` saying where."""
    text = read_text_file(path)
    if not text.strip():
        raise EmptyLogError("empty notebook file", path)
    try:
        notebook = json.loads(text)
    except RecursionError as exc:
        raise LogReadError("JSON nested too deeply to be a notebook", path) from exc
    except json.JSONDecodeError as exc:
        where = json_error_place(text, exc)
        if json_is_cut(text, exc):
            raise TruncatedLogError(
                f"the notebook's JSON ends early at {where} (saved while being written, or cut in a copy); "
                "save the notebook again and read the new file",
                path,
                where,
            ) from exc
        raise LogReadError(f"not valid notebook JSON ({exc.msg}) at {where}", path, where) from exc
    if not isinstance(notebook, dict):
        raise LogReadError(
            f"not a notebook: the JSON is a {type(notebook).__name__}, not an object with 'cells'", path
        )
    return notebook


def notebook_cells(notebook: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    """The cells of nbformat 4 (``cells``) or 3 (``worksheets[].cells``)."""
    if isinstance(notebook.get("cells"), list):
        cells = notebook["cells"]
    elif isinstance(notebook.get("worksheets"), list):
        cells = [
            c
            for sheet in notebook["worksheets"]
            if isinstance(sheet, dict)
            for c in sheet.get("cells", []) or []
        ]
    else:
        raise LogReadError(
            f"not a Jupyter notebook: no 'cells' list (top-level keys: {sorted(notebook)[:10]})", path
        )
    return [c for c in cells if isinstance(c, dict)]


def _html_of(output: dict[str, Any]) -> str:
    data = output.get("data")
    if isinstance(data, dict) and "text/html" in data:
        return _text(data["text/html"])
    return _text(output.get("html"))  # nbformat 3


def find_tables(cells: list[dict[str, Any]]) -> list[ProgressTable]:
    """Every progress table, in output order, with the banner and code seen before it."""
    banner = BannerParser()
    tables: list[ProgressTable] = []
    sources: list[str] = []
    for number, cell in enumerate(cells, start=1):
        if cell.get("cell_type") != "code":
            continue
        sources.append(_text(cell.get("source", cell.get("input"))))
        outputs = cell.get("outputs")
        if not isinstance(outputs, list):
            continue
        for output in outputs:
            if not isinstance(output, dict):
                continue
            kind = output.get("output_type")
            if kind == "stream":
                banner.feed_text(_text(output.get("text")))
            elif kind in ("display_data", "execute_result", "update_display_data", "pyout"):
                html = _html_of(output)
                if "<table" in html and "<progress" in html:
                    table = _parse_table(html, number, banner)
                    if table is not None:
                        table.code = code_metadata(sources)
                        tables.append(table)
                elif tables and tables[-1].cell == number:
                    tables[-1].summary.update(_train_output(output))
    return tables


def stream_lines(cells: list[dict[str, Any]]) -> tuple[list[tuple[int, str, bool]], list[str]]:
    """The lines of every code cell's stream outputs, numbered in output order, and the cells' code.

    Newer TRL prints its console dicts (``{'loss': '0.1', 'reward': '0.3', ...}``) into a cell's
    stream output rather than a progress table; these lines are read as a console log.

    Returns
    -------
    (lines, sources)
        ``(number, text, ended with a line end)`` for each line, and the code of each code cell.
    """
    lines: list[tuple[int, str, bool]] = []
    sources: list[str] = []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        sources.append(_text(cell.get("source", cell.get("input"))))
        for output in cell.get("outputs") or []:
            if isinstance(output, dict) and output.get("output_type") == "stream":
                text = _text(output.get("text"))
                for part in text.splitlines(keepends=True):
                    lines.append((len(lines) + 1, part.rstrip("\n"), part.endswith("\n")))
    return lines, sources


def _train_output(output: dict[str, Any]) -> dict[str, Any]:
    """The metrics of ``trainer.train()``'s returned ``TrainOutput``, shown as the cell's result."""
    data = output.get("data")
    text = _text(data.get("text/plain")) if isinstance(data, dict) else _text(output.get("text"))
    match = _TRAIN_OUTPUT.search(text)
    if match is None:
        return {}
    metrics = parse_dict_line(" ".join(match.group(2).split()))
    out = summary_metadata(metrics) if metrics else {}
    out["global_step"] = float(match.group(1))
    return out
