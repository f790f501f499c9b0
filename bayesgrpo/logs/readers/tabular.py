"""Plain tables: CSV, JSON Lines and Parquet, one row per logged step.

A ``.json`` file holding one list of records (a tracker's export, such as trackio's) is read
as JSON Lines are, as format ``jsonl``: entry ``k`` of the list is the record of line ``k``.

Columns are read by name. By default ``step`` (or ``Step``, ``global_step``, ``_step``) is the
step and ``reward`` the reward; ``columns={"step": ..., "reward": ..., "run_id": ...}`` maps
other names. With a ``run_id`` column a file holds several runs.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bayesgrpo.errors import (
    EmptyLogError,
    LogReadError,
    MalformedRecordError,
    TruncatedLogError,
    UnknownMetricError,
)
from bayesgrpo.logs.readers._common import locations, unique_names
from bayesgrpo.logs.readers._limits import MAX_METRICS_PER_LINE, bounded_lines, too_many_metrics
from bayesgrpo.logs.readers._records import LOC, STEP, RawRun
from bayesgrpo.logs.readers.json_lines import JsonLines, is_json_list, read_json_lines, read_json_list
from bayesgrpo.logs.readers.verl.jsonl import is_verl_jsonl, verl_jsonl_run
from bayesgrpo.logs.report import MAX_LOCATIONS, ReadIssue

if TYPE_CHECKING:
    from bayesgrpo.logs.readers.base import ReadOptions, Source

STEP_NAMES = ("step", "Step", "global_step", "_step", "train/global_step", "iteration")
RUN_NAMES = ("run_id", "run", "Run", "name")

#: Metric names common in TRL/verl tables, mapped to canonical names.
TABLE_ALIASES: dict[str, str] = {
    "reward_std": "reward_std",
    "completions/mean_length": "completion_length",
    "completion_length": "completion_length",
    "response_length/mean": "completion_length",
    "actor/entropy": "entropy",
    "entropy": "entropy",
    "kl": "kl",
    "actor/kl_loss": "kl",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "Training Loss": "loss",
    "loss": "loss",
}
#: Default reward columns, in order of preference (``reward/mean``, ``reward_mean`` and
#: ``mean_reward``: what other trainers and hand-written GRPO loops name it in the tables they
#: write, seen in public logs; ``env/all/reward/total``: the Tinker cookbook's training reward in
#: its ``metrics.jsonl``, whose ``test/`` twin is the evaluation reward and is not taken).
REWARD_CANDIDATES = (
    "reward",
    "train/reward",
    "critic/score/mean",
    "critic/rewards/mean",
    "rewards/mean",
    "reward/mean",
    "reward_mean",
    "mean_reward",
    "env/all/reward/total",
)


def _split_csv_line(line: str) -> list[str]:
    """The cells of one CSV line, as ``csv.reader`` reads them.

    Parameters
    ----------
    line : str
        One physical line, with or without its line end.

    Returns
    -------
    list of str
        The cells (an empty line gives one empty cell, or none).

    Raises
    ------
    csv.Error
        When the line is not valid CSV on its own (a quote opened and not closed, text after
        a closing quote): a quoted cell never spans lines here, so one stray quote cannot
        swallow the lines after it.
    """
    if '"' not in line:  # fast path: no quoting, the cells are the text between commas
        return line.rstrip("\r\n").split(",")
    return next(csv.reader([line], strict=True), [])


def _read_csv(path: Path, strict: bool) -> tuple[pd.DataFrame, int, list[ReadIssue]]:
    """Read a CSV line by line, keeping every well-formed row; malformed lines are reported.

    The first non-blank line is the header. A data line is bad when it is not valid CSV on its
    own or has another number of cells than the header; a bad last line without line end is a
    line cut while being written (``truncated``). A good last line without line end is kept,
    with an ``info`` note (its last value may be cut). Blank lines are skipped, not counted.
    One function on purpose: the line-by-line state machine of the reader (header, rows, the
    last line) is clearest in one loop.
    """
    issues: list[ReadIssue] = []
    header: list[str] | None = None
    n_columns = 0
    rows: list[tuple[str, ...]] = []
    locs: list[int] = []
    bad: list[tuple[int, str]] = []  # (line number, what is wrong) of every bad data line
    n_read = 0
    last_number = 0  # the last non-blank line
    last_ended = True  # whether it has a line end
    last_kept = False  # whether it was kept as a row
    with open(path, encoding="utf-8-sig", errors="replace") as handle:
        for number, line in enumerate(bounded_lines(handle, path), start=1):
            try:
                row = _split_csv_line(line)
                problem = ""
            except csv.Error as exc:
                row = []
                problem = f"is not valid CSV ({exc})"
            if not problem and not "".join(row).strip():
                continue
            last_number, last_ended, last_kept = number, line.endswith("\n"), False
            if header is None:
                if problem:
                    raise MalformedRecordError(
                        f"the header line {problem}; fix the quoting of the column names",
                        path,
                        f"line {number}",
                    )
                if len(row) > MAX_METRICS_PER_LINE:
                    raise too_many_metrics(path, number, len(row), "header")
                header, n_columns = row, len(row)
                continue
            n_read += 1
            if not problem and len(row) != n_columns:
                problem = f"has {len(row)} cell(s) where the header has {n_columns}"
            if problem:
                if strict:
                    cut = not line.endswith("\n")
                    error = TruncatedLogError if cut else MalformedRecordError
                    hint = " (the file ends mid-line: cut while being written?)" if cut else ""
                    message = f"the line {problem}{hint}; pass strict=False to drop and report such lines"
                    raise error(message, path, f"line {number}")
                bad.append((number, problem))
                continue
            rows.append(tuple(row))  # tuples of strings leave the garbage collector's watch: 3x faster
            locs.append(number)
            last_kept = True
    if header is None:
        raise EmptyLogError("empty file", path)
    cut_line = last_number if not last_ended else None
    truncated = [b for b in bad if b[0] == cut_line]
    broken = [b for b in bad if b[0] != cut_line]
    if broken:
        issues.append(
            ReadIssue(
                str(path),
                "bad_line",
                "dropped",
                len(broken),
                tuple(f"line {n}" for n, _ in broken[:MAX_LOCATIONS]),
                "line(s) that are not valid CSV or have another number of cells than the header's "
                f"{n_columns} (first: line {broken[0][0]} {broken[0][1]}); dropped",
            )
        )
    if truncated:
        issues.append(
            ReadIssue(
                str(path),
                "truncated",
                "dropped",
                1,
                (f"line {cut_line}",),
                f"the last line has no line end and {truncated[0][1]}: the file ends mid-line (cut while "
                "being written?); dropped",
            )
        )
    if cut_line is not None and last_kept:
        issues.append(
            ReadIssue(
                str(path),
                "no_line_end",
                "info",
                1,
                (f"line {cut_line}",),
                "the last line has no line end: if the file was cut while being written, its last value "
                "may be cut too (0.03 read as 0.0); kept as read",
            )
        )
    columns = unique_names(header)
    if rows:
        frame = pd.DataFrame(rows, columns=columns, dtype=object)
    else:
        frame = pd.DataFrame(columns=columns, dtype=object)
    frame[LOC] = locs
    frame.attrs["location_label"] = "line"
    return frame, n_read, issues


def _jsonl_frame(lines: JsonLines, path: Path) -> tuple[pd.DataFrame, int, list[ReadIssue]]:
    """A plain JSON Lines table (or JSON list of records): one column per key, bad lines reported
    as dropped.
    """
    issues = []
    if lines.bad:
        issues.append(
            ReadIssue(
                str(path),
                "bad_line",
                "dropped",
                len(lines.bad),
                locations(lines.label, lines.bad),
                "line(s) that are not a JSON object (cut mid-write?); dropped"
                if lines.label == "line"
                else "list entries that are not a JSON object, or cut mid-write; dropped",
            )
        )
    if lines.unclosed:
        issues.append(
            ReadIssue(
                str(path),
                "truncated",
                "info",
                0,
                (),
                "the JSON list ends without its closing ']' (cut between entries while being written?); "
                "every complete entry kept",
            )
        )
    frame = pd.DataFrame.from_records(lines.records) if lines.records else pd.DataFrame()
    frame = frame.astype(object) if len(frame) else frame
    frame[LOC] = lines.locs
    return frame, lines.n_read, issues


def _read_parquet(path: Path) -> tuple[pd.DataFrame, int, list[ReadIssue]]:
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise TruncatedLogError(f"not a readable Parquet file ({type(exc).__name__}: {exc})", path) from exc
    if len(frame) == 0:
        raise EmptyLogError("Parquet file has no rows", path)
    named = [name for name in frame.index.names if name is not None]
    # a named index (df.set_index("step").to_parquet()) is data: keep it as a column
    frame = frame.reset_index(drop=not named or any(name in frame.columns for name in named))
    frame[LOC] = np.arange(1, len(frame) + 1)
    return frame, len(frame), []


def _pick(
    frame: pd.DataFrame, mapped: str | None, candidates: tuple[str, ...], what: str, path: Path
) -> str | None:
    if mapped is not None:
        if mapped not in frame.columns:
            raise UnknownMetricError(
                mapped, [c for c in frame.columns if c != LOC], f"{path} (columns[{what!r}])"
            )
        return mapped
    for name in candidates:
        if name in frame.columns:
            return name
    return None


def _free_name(frame: pd.DataFrame, name: str) -> str:
    """``name``, or ``name.1``, ``name.2``... whichever is not a column of ``frame`` yet."""
    candidate, number = name, 0
    while candidate in frame.columns:
        number += 1
        candidate = f"{name}.{number}"
    return candidate


def _split_off_missing_run_ids(
    frame: pd.DataFrame, run_column: str, label: str, path: Path, strict: bool
) -> tuple[pd.DataFrame, ReadIssue | None]:
    """Drop the records with no run id (missing, null or blank); report them as dropped.

    Run ids are made text, so that ids of any JSON type group without error.

    Raises
    ------
    MalformedRecordError
        Under ``strict``, at the first record with no run id.
    EmptyLogError
        When no record has a run id.
    """
    values = frame[run_column]
    blank = values.map(lambda v: isinstance(v, str) and not v.strip()).to_numpy(dtype=bool)
    missing = values.isna().to_numpy() | blank
    frame = frame.assign(**{run_column: values.map(str)})
    if not missing.any():
        return frame, None
    where = tuple(f"{label} {loc}" for loc in frame.loc[missing, LOC].head(MAX_LOCATIONS))
    if strict:
        raise MalformedRecordError(
            f"record has no run id (column {run_column!r}); pass strict=False to drop and report such "
            "records",
            path,
            where[0],
        )
    if missing.all():
        raise EmptyLogError(f"no record has a run id in column {run_column!r}", path)
    issue = ReadIssue(
        str(path),
        "no_run_id",
        "dropped",
        int(missing.sum()),
        where,
        f"record(s) with no value in the run column {run_column!r}: they belong to no run; dropped",
    )
    return frame.loc[~missing], issue


@dataclass
class TableRead:
    """A table as read, before it is split into runs: its records and what holds for all of them.

    Attributes
    ----------
    frame : pandas.DataFrame
        Every kept record: ``_loc``, ``step``, the metric columns (values as read) and, for a
        table of several runs, the run column (run ids made text; records without one dropped).
    run_column : str or None
        The column naming each record's run; ``None`` for a table of one run.
    path : Path
        The file.
    format : str
        ``"csv"``, ``"jsonl"`` or ``"parquet"``.
    run_id : str
        The run's name when the table holds one run.
    issues : list of ReadIssue
        What the reader dropped or noted for the file as a whole (bad lines...).
    candidates : tuple of str
        Reward columns, in order of preference.
    aliases : dict
        Column name -> canonical metric name.
    location_label : str
        ``"line"`` or ``"row"``.
    """

    frame: pd.DataFrame
    run_column: str | None
    path: Path
    format: str
    run_id: str
    issues: list[ReadIssue]
    candidates: tuple[str, ...]
    aliases: dict[str, str]
    location_label: str

    def raw_run(self, index: int, run_id: str, part: pd.DataFrame) -> RawRun:
        """The raw run of one run's records; the first run (``index`` 0) carries the file's issues.

        Parameters
        ----------
        index : int
            The run's place in the file (first appearance), from 0.
        run_id : str
            Its name.
        part : pandas.DataFrame
            Its records, the run column removed.

        Returns
        -------
        RawRun
        """
        label_source = f"{self.path}#{run_id}" if self.run_column is not None else str(self.path)
        first = index == 0
        issues = [
            ReadIssue(label_source, i.kind, i.action, i.count, i.locations, i.detail) for i in self.issues
        ]
        return RawRun(
            run_id=run_id,
            source=label_source,
            format=self.format,
            records=part.reset_index(drop=True),
            records_read=len(part) + (self.dropped if first else 0),
            issues=issues if first else [],
            reward_candidates=self.candidates,
            aliases=self.aliases,
            location_label=self.location_label,
            text_values=self.format == "csv",
        )

    @property
    def dropped(self) -> int:
        """Records the reader dropped from the file as a whole."""
        return sum(i.count for i in self.issues if i.action == "dropped")

    def raw_runs(self) -> list[RawRun]:
        """One raw run per run id, in order of first appearance (one run without a run column)."""
        if self.run_column is None:
            return [self.raw_run(0, self.run_id, self.frame)]
        return [
            self.raw_run(index, str(name), part.drop(columns=[self.run_column]))
            for index, (name, part) in enumerate(self.frame.groupby(self.run_column, sort=False))
        ]


def read_table_records(source: Source, options: ReadOptions) -> TableRead | RawRun:
    """Read a CSV, JSONL or Parquet table's records, not yet split into runs.

    Parameters
    ----------
    source : Source
        One file.
    options : ReadOptions
        ``columns`` maps the step, reward and run columns; ``strict`` raises at a bad line.

    Returns
    -------
    TableRead or RawRun
        The table; or, for a JSONL file written by verl's file logger, its one raw run.

    Raises
    ------
    LogReadError
        The file cannot be read, or has no step column.
    EmptyLogError
        No data row.
    UnknownMetricError
        A column named in ``columns`` is not in the table.
    """
    path = source.paths[0]
    try:
        if source.format == "parquet":
            frame, n_read, issues = _read_parquet(path)
            label = "row"
        elif source.format == "jsonl":
            # a .json file holding one list of records (a tracker's export) reads as JSON Lines do
            reader = read_json_list if is_json_list(path) else read_json_lines
            lines = reader(path, options.strict)

            if is_verl_jsonl(lines.records):  # verl's file logger, named *.jsonl: read as such
                return verl_jsonl_run(lines, source, options)
            frame, n_read, issues = _jsonl_frame(lines, path)
            label = lines.label
        else:
            frame, n_read, issues = _read_csv(path, options.strict)
            label = "line"
    except (OSError, UnicodeError) as exc:
        raise LogReadError(f"cannot read: {exc}", path) from exc
    if len(frame) == 0:
        raise EmptyLogError(f"no data row among {n_read} line(s)", path)
    frame, run_column, candidates, aliases = _mapped_columns(frame, options, path, issues)
    if run_column is not None:
        frame, no_run = _split_off_missing_run_ids(frame, run_column, label, path, options.strict)
        if no_run is not None:
            issues.append(no_run)
    return TableRead(
        frame=frame,
        run_column=run_column,
        path=path,
        format=source.format,
        run_id=options.run_id or source.run_id,
        issues=issues,
        candidates=candidates,
        aliases=aliases,
        location_label=label,
    )


def read_table(source: Source, options: ReadOptions) -> list[RawRun]:
    """Read a CSV, JSONL or Parquet table into one raw run per run id (one if no run column)."""
    read = read_table_records(source, options)
    if isinstance(read, RawRun):
        return [read]
    return read.raw_runs()


def _is_trainer_log(frame: pd.DataFrame) -> bool:
    """Rows of TRL's log dicts (``loss``, ``epoch``, a reward), as a callback writes them without a step."""
    return {"loss", "epoch"} <= set(frame.columns) and any(c in frame.columns for c in REWARD_CANDIDATES)


def _steps_from_row_order(
    frame: pd.DataFrame, options: ReadOptions, path: Path, issues: list[ReadIssue]
) -> pd.DataFrame:
    """The steps of a table of TRL log dicts with no step column: the k-th training row (one with
    a ``loss``) is step ``k * logging_steps``, as for console dicts; a row without one (an
    evaluation) takes the step of the training row before it.
    """
    logging_steps = options.logging_steps or 1
    training = pd.to_numeric(frame["loss"], errors="coerce").notna().to_numpy()
    steps = np.cumsum(training) * int(logging_steps)
    how = "as given" if options.logging_steps else "assumed (the default)"
    issues.append(
        ReadIssue(
            str(path),
            "steps_from_row_order",
            "info",
            int(training.sum()),
            (),
            f"no step column, rows of the trainer's log dicts (loss, epoch): step = k x logging_steps for "
            f"the k-th row with a loss, logging_steps={logging_steps} {how}; pass logging_steps=<the "
            "trainer's value> or columns={'step': '<name>'} if it differs",
        )
    )
    return frame.assign(**{STEP: steps})


def _mapped_columns(
    frame: pd.DataFrame, options: ReadOptions, path: Path, issues: list[ReadIssue]
) -> tuple[pd.DataFrame, str | None, tuple[str, ...], dict[str, str]]:
    """The table with its step column named ``step``; its run column, reward candidates and
    metric aliases, each column the user mapped checked to exist.
    """
    columns = dict(options.columns or {})
    step_column = _pick(frame, columns.pop("step", None), STEP_NAMES, "step", path)
    if step_column is None and _is_trainer_log(frame):
        frame = _steps_from_row_order(frame, options, path, issues)
        step_column = STEP
    if step_column is None:
        raise LogReadError(
            f"no step column (looked for {list(STEP_NAMES)}); pass columns={{'step': '<name>'}}. Columns: "
            f"{[c for c in frame.columns if c != LOC][:20]}",
            path,
        )
    run_column = _pick(
        frame, columns.pop("run_id", None), RUN_NAMES if "run_id" in frame.columns else (), "run_id", path
    )
    reward_column = columns.pop("reward", None)
    if reward_column is not None:
        _pick(frame, reward_column, (), "reward", path)
    for canonical, source_name in columns.items():  # a typo in any entry is an error, not ignored
        _pick(frame, source_name, (), canonical, path)
    aliases = {**TABLE_ALIASES, **{source_name: canonical for canonical, source_name in columns.items()}}
    candidates = ((reward_column,) if reward_column else ()) + REWARD_CANDIDATES
    if step_column != STEP and STEP in frame.columns:
        # the table's own 'step' column is a metric like any other once another column is the step
        logged = _free_name(frame, "step_logged")
        frame = frame.rename(columns={STEP: logged})
        issues.append(
            ReadIssue(
                str(path),
                "renamed_column",
                "info",
                1,
                (),
                f"column 'step' kept as {logged!r}: {step_column!r} is the step",
            )
        )
    return frame.rename(columns={step_column: STEP}), run_column, candidates, aliases
