"""Jupyter notebooks (``.ipynb``) holding a transformers training progress table.

In a notebook, transformers' ``NotebookProgressCallback`` shows training as one HTML output
(``display_data``, ``text/html``) that it keeps updating: a ``<progress value='250'
max='250'>`` bar labelled ``[250/250 1:40:29, Epoch 0/1]``, then a ``<table>`` whose header is
``Step``, ``Training Loss`` and (with Unsloth's patch, used by TRL notebooks) every TRL metric
with ``/`` written `` / `` (``rewards / correctness_reward_func``); values are printed with 6
decimals, and a metric missing from a log call reads ``No Log``. The saved notebook holds the
table's last state. The trainer's start banner is in a stream output before it (transformers'
``***** Running training *****`` block or Unsloth's ``Num examples = 7,473 | Num Epochs = 1``).

The reader takes the last complete progress table of the notebook (others are earlier
displays or re-runs, reported), turns header names back into TRL's metric names, and reads
the banner, the progress bar and the notebook's own ``GRPOConfig(...)`` call into metadata.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bayesgrpo.errors import EmptyLogError, LogReadError, MalformedRecordError, TruncatedLogError
from bayesgrpo.logs.readers._common import locations, unique_names
from bayesgrpo.logs.readers._records import RawRun
from bayesgrpo.logs.readers.trl.columns import TRL_ALIASES, ColumnStore, json_error_place, read_text_file, trl_run
from bayesgrpo.logs.readers.trl.metadata import BannerParser, summary_metadata
from bayesgrpo.logs.readers.trl.state import json_is_cut
from bayesgrpo.logs.readers.trl.console import parse_dict_line
from bayesgrpo.logs.report import MAX_LOCATIONS, ReadIssue

if TYPE_CHECKING:
    from bayesgrpo.logs.readers.base import ReadOptions, Source

NOTEBOOK_ALIASES: dict[str, str] = {**TRL_ALIASES, "Training Loss": "loss"}
_LABEL = "table row"
_NO_LOG = {"no log"}
_STEP_HEADERS = ("Step",)
_SPACED_SLASH = re.compile(r"\s+/\s+")
_BAR_COUNT = re.compile(r"\[\s*(\d+)\s*/\s*(\d+)")
_BAR_ELAPSED = re.compile(r"\[\s*\d+\s*/\s*\d+\s+(\d+(?::\d{2}){1,2})")
_BAR_EPOCH = re.compile(r"Epoch\s+([\d.]+)\s*/\s*([\d.]+)")
_TRAIN_OUTPUT = re.compile(r"TrainOutput\(global_step=(\d+),.*?metrics=(\{.*\})\)", re.DOTALL)

#: ``GRPOConfig(...)`` keywords -> metadata names.
CONFIG_METADATA: dict[str, str] = {
    "num_generations": "group_size",
    "learning_rate": "learning_rate",
    "logging_steps": "logging_steps",
    "max_steps": "total_steps",
    "num_train_epochs": "num_epochs",
    "per_device_train_batch_size": "per_device_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
}
_CONFIG_CALL = re.compile(r"\bGRPOConfig\s*\(")
_MODEL_CALL = re.compile(
    r"\b(?:FastLanguageModel|FastModel|FastVisionModel|AutoModelForCausalLM)\.from_pretrained\s*\("
)
_MODEL_KEYWORDS = ("model_name", "pretrained_model_name_or_path")


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
class _Table:
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
        return bool(self.header) and self.header[0] in _STEP_HEADERS


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else ""


def _parse_table(html: str, cell: int, banner: BannerParser) -> _Table | None:
    parser = _ProgressTableParser()
    try:
        parser.feed(html)
        parser.finish()
    except (AssertionError, ValueError):  # very old html.parser raise on broken markup
        return None
    if not parser.seen_table or parser.progress is None:
        return None
    return _Table(
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


def _load_notebook(path: Path) -> dict[str, Any]:
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


def _cells(notebook: dict[str, Any], path: Path) -> list[dict[str, Any]]:
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


def _find_tables(cells: list[dict[str, Any]]) -> list[_Table]:
    """Every progress table, in output order, with the banner and code seen before it."""
    banner = BannerParser()
    tables: list[_Table] = []
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


# --------------------------------------------------------------------------------------------
# the notebook's own code
# --------------------------------------------------------------------------------------------


def _call_text(source: str, open_paren: int) -> str | None:
    """The text of a call's parenthesised arguments, from ``(`` to its matching ``)``."""
    depth = 0
    quote: str | None = None
    index = open_paren
    while index < len(source):
        char = source[index]
        if quote:
            if char == "\\":
                index += 2
                continue
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#":
            newline = source.find("\n", index)
            if newline < 0:
                return None
            index = newline
            continue
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return source[open_paren : index + 1]
        index += 1
    return None


def _call_arguments(source: str, open_paren: int) -> tuple[list[Any], dict[str, Any]]:
    """Literal positional and keyword arguments of one call (others left out)."""
    text = _call_text(source, open_paren)
    if text is None:
        return [], {}
    try:
        tree = ast.parse("f" + text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return [], {}
    call = tree.body
    if not isinstance(call, ast.Call):
        return [], {}
    positional = []
    for node in call.args:
        try:
            positional.append(ast.literal_eval(node))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            positional.append(None)
    keywords: dict[str, Any] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            continue
        try:
            keywords[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return positional, keywords


def code_metadata(sources: list[str]) -> dict[str, Any]:
    """What the notebook's code states literally: its last ``GRPOConfig(...)`` and model load.

    ``GRPOConfig(num_generations=6, learning_rate=5e-6, logging_steps=1, max_steps=250, ...)``
    gives ``group_size``, ``learning_rate``, ``logging_steps``, ``total_steps``...;
    ``FastLanguageModel.from_pretrained(model_name="Qwen/Qwen2.5-3B-Instruct")`` (or
    ``AutoModelForCausalLM.from_pretrained("...")``) gives ``model``. Only literal values count
    (``max_steps=250``, not ``max_steps=n``).
    """
    text = "\n".join(sources)
    found: dict[str, Any] = {}
    config = list(_CONFIG_CALL.finditer(text))
    if config:
        _, keywords = _call_arguments(text, config[-1].end() - 1)
        for key, name in CONFIG_METADATA.items():
            value = keywords.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                found[name] = float(value)
    models = list(_MODEL_CALL.finditer(text))
    if models:
        positional, keywords = _call_arguments(text, models[-1].end() - 1)
        candidates = [keywords.get(k) for k in _MODEL_KEYWORDS] + positional[:1]
        model = next((c for c in candidates if isinstance(c, str) and c.strip()), None)
        if model is not None:
            found["model"] = model.strip()
    return found


# --------------------------------------------------------------------------------------------
# the reader
# --------------------------------------------------------------------------------------------


def metric_name(header: str) -> str:
    """A table header as the metric name TRL logs: ``rewards / f`` -> ``rewards/f``."""
    return _SPACED_SLASH.sub("/", header.strip())


def _seconds(clock: str) -> float:
    parts = [int(p) for p in clock.split(":")]
    total = 0
    for part in parts:
        total = total * 60 + part
    return float(total)


def _progress_metadata(table: _Table) -> tuple[dict[str, Any], tuple[int, int] | None]:
    """Steps done and planned, epochs and elapsed time, from the progress bar and its label."""
    out: dict[str, Any] = {}
    count: tuple[int, int] | None = None
    match = _BAR_COUNT.search(table.label)
    attrs = table.progress or {}
    try:
        if match:
            count = (int(match.group(1)), int(match.group(2)))
        elif attrs.get("value") is not None and attrs.get("max") is not None:
            count = (int(float(str(attrs["value"]))), int(float(str(attrs["max"]))))
    except ValueError:
        count = None
    if count is not None:
        out["steps_completed"] = float(count[0])
        out["total_steps"] = float(count[1])
    elapsed = _BAR_ELAPSED.search(table.label)
    if elapsed:
        out["train_runtime"] = _seconds(elapsed.group(1))
    epoch = _BAR_EPOCH.search(table.label)
    if epoch:
        try:
            out["num_epochs"] = float(epoch.group(2))
        except ValueError:
            pass
    return out, count


def _choose(tables: list[_Table], path: Path) -> tuple[_Table, list[_Table]]:
    steps = [t for t in tables if t.is_step_table]
    if not steps:
        headers = sorted({t.header[0] if t.header else "(none)" for t in tables})
        raise EmptyLogError(
            f"{len(tables)} progress table(s) found, none with a 'Step' column (first columns: {headers}); "
            "a table per epoch (eval_strategy='epoch') does not state steps",
            path,
        )
    complete = [t for t in steps if t.closed]
    chosen = complete[-1] if complete else steps[-1]
    others = [t for t in tables if t is not chosen]
    return chosen, others


def read_notebook(source: Source, options: ReadOptions) -> list[RawRun]:
    """Read the training progress table of a Jupyter notebook into one raw run.

    Parameters
    ----------
    source : Source
    options : ReadOptions

    Returns
    -------
    list of RawRun
        One run: the last complete progress table of the notebook.

    Raises
    ------
    EmptyLogError
        The notebook holds no progress table (saved without outputs?), or its table no row.
    TruncatedLogError
        The notebook's JSON is cut (notebooks are not salvaged).
    MalformedRecordError
        With ``options.strict``, at a table row whose cells do not match the header.
    LogReadError
        Not a notebook.
    """
    path = source.paths[0]
    label = str(path)
    notebook = _load_notebook(path)
    cells = _cells(notebook, path)
    tables = _find_tables(cells)
    if not tables:
        n_outputs = sum(len(c.get("outputs") or []) for c in cells if isinstance(c.get("outputs"), list))
        raise EmptyLogError(
            f"no training progress table (an HTML <table> after a <progress> bar, as transformers "
            f"shows in notebooks) in {len(cells)} cell(s) with {n_outputs} output(s); was the notebook "
            "saved with its outputs?",
            path,
        )
    table, others = _choose(tables, path)
    issues: list[ReadIssue] = []
    where_table = f"cell {table.cell}"
    if others:
        issues.append(
            ReadIssue(
                label,
                "other_tables",
                "info",
                len(others),
                tuple(f"cell {t.cell}" for t in others[:MAX_LOCATIONS]),
                f"{len(others)} other progress table(s) (earlier displays, re-runs or other trainings) not "
                f"read; read the last complete one, in {where_table}",
            )
        )
    names = unique_names(metric_name(h) for h in table.header[1:])
    width = len(table.header)
    store = ColumnStore()
    bad: list[int] = []
    no_log = 0
    no_log_rows: list[int] = []
    for number, row in enumerate(table.rows, start=1):
        if len(row) != width:
            if options.strict:
                raise MalformedRecordError(
                    f"progress table row has {len(row)} cells, the header {width}",
                    path,
                    f"{where_table}, {_LABEL} {number}",
                )
            bad.append(number)
            continue
        record: dict[str, Any] = {}
        for name, cell in zip(names, row[1:], strict=True):
            if cell.strip().lower() in _NO_LOG:
                no_log += 1
                if len(no_log_rows) < MAX_LOCATIONS and (not no_log_rows or no_log_rows[-1] != number):
                    no_log_rows.append(number)
                record[name] = None
            else:
                record[name] = cell
        store.add(number, row[0], record)
    dropped = len(bad) + table.partial_rows
    if bad:
        issues.append(
            ReadIssue(
                label,
                "bad_row",
                "dropped",
                len(bad),
                locations(_LABEL, bad),
                f"progress table rows ({where_table}) whose number of cells differs from the "
                f"header's {width}; dropped",
            )
        )
    if table.partial_rows or not table.closed:
        detail = (
            f"the progress table in {where_table} ends without closing its last row or the table "
            f"(output saved mid-update?); {table.partial_rows} partial row(s) dropped"
        )
        if options.strict:
            raise TruncatedLogError(detail, path, where_table)
        issues.append(
            ReadIssue(
                label,
                "truncated",
                "dropped" if table.partial_rows else "info",
                table.partial_rows,
                (where_table,),
                detail,
            )
        )
    if no_log:
        issues.append(
            ReadIssue(
                label,
                "no_log",
                "info",
                no_log,
                locations(_LABEL, no_log_rows),
                "cells reading 'No Log' (metric not logged at that step) treated as missing",
            )
        )
    if len(store) == 0:
        raise EmptyLogError(f"the progress table in {where_table} has no complete row yet", path, where_table)
    issues.append(
        ReadIssue(
            label,
            "rounded_values",
            "info",
            len(store),
            (where_table,),
            "the notebook table prints values with 6 decimals (small values such as a KL near 0 "
            "lose precision)",
        )
    )

    metadata, count = _metadata(table, label, issues)
    return [
        trl_run(
            source,
            options,
            store,
            dropped,
            issues,
            metadata,
            location_label=_LABEL,
            aliases=NOTEBOOK_ALIASES,
            text_values=True,
        )
    ]


def _metadata(
    table: _Table, label: str, issues: list[ReadIssue]
) -> tuple[dict[str, Any], tuple[int, int] | None]:
    """Per field: the banner and the returned ``TrainOutput`` first, then the progress bar, then
    the notebook's code."""
    progress, count = _progress_metadata(table)
    metadata: dict[str, Any] = {**table.banner, **table.summary}
    for key, value in progress.items():
        metadata.setdefault(key, value)
    from_code = {k: v for k, v in table.code.items() if k not in metadata}
    metadata.update(from_code)
    if from_code:
        shown = ", ".join(f"{k}={v!r}" for k, v in from_code.items())
        issues.append(
            ReadIssue(
                label,
                "code_metadata",
                "info",
                len(from_code),
                (),
                f"metadata read from the notebook's own code (GRPOConfig / from_pretrained): {shown}",
            )
        )
    if count is not None and count[0] < count[1]:
        issues.append(
            ReadIssue(
                label,
                "stopped_early",
                "info",
                1,
                (f"cell {table.cell}",),
                f"the progress bar stopped at {count[0]}/{count[1]} steps: the run was interrupted or "
                "stopped before its planned end",
            )
        )
    return metadata, count


__all__ = ["CONFIG_METADATA", "NOTEBOOK_ALIASES", "code_metadata", "metric_name", "read_notebook"]
