"""The runs table: the one internal schema every later stage consumes (``docs/ARCHITECTURE.md``).

``RunsTable.points`` is long in steps and wide in metrics: one row per logged step of a run,
columns ``run_id``, ``step``, ``reward`` and any further metrics (canonical names where the
reader knows them, the log's own names otherwise). ``reward`` may be NaN on a row that holds
only other metrics (a validation-only step 0, say); a run's *points* are its rows with a finite
reward. ``RunsTable.runs`` holds one row of metadata per run. ``RunsTable.report`` accounts for
every record read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from bayesgrpo._text import has_control_characters, printable
from bayesgrpo.errors import BayesGRPOError, MetadataError, UnknownMetricError
from bayesgrpo.logs.report import ReadIssue, ReadReport

#: The read report's name for run names whose control characters were escaped.
CONTROL_CHARACTERS_KIND = "control_characters_in_run_id"

#: Columns every points table has, in this order.
POINT_COLUMNS: tuple[str, ...] = ("run_id", "step", "reward")

#: Canonical names of common metrics; readers map the outside world's names onto these.
CANONICAL_METRICS: tuple[str, ...] = (
    "reward",
    "reward_std",
    "kl",
    "entropy",
    "completion_length",
    "frac_reward_zero_std",
    "learning_rate",
    "epoch",
    "loss",
)

#: Metadata columns, with their dtype. Unknown values are missing, never guessed.
METADATA_DTYPES: dict[str, str] = {
    "run_id": "string",
    "family": "string",
    "model": "string",
    "size_b": "float64",
    "algorithm": "string",
    "group_size": "Float64",
    "batch_size": "Float64",  # prompts per optimizer step (verl's train_batch_size)
    # completions per optimizer step (TRL's total batch; batch_size x group_size)
    "samples_per_step": "Float64",
    "learning_rate": "float64",
    "total_steps": "Float64",
    "steps_per_epoch": "Float64",
    "num_epochs": "float64",
    "num_examples": "Float64",
    "logging_steps": "Float64",
    "reward_min": "float64",
    "reward_max": "float64",
    "task": "string",
    "source": "string",
    "format": "string",
    "path": "string",
    "reward_key": "string",
}


def coerce_metadata(frame: pd.DataFrame) -> pd.DataFrame:
    """Give the schema's columns their dtypes, add missing ones, keep extra ones after them.

    Raises
    ------
    MetadataError
        When a value of a typed column cannot be converted (``size_b="big"``).
    """
    columns: dict[str, pd.Series] = {}
    for name, dtype in METADATA_DTYPES.items():
        if name not in frame.columns:  # missing: made with its dtype, nothing to convert
            columns[name] = pd.Series(np.nan if dtype == "float64" else pd.NA, index=frame.index, dtype=dtype)
            continue
        column = frame[name]
        if str(column.dtype) == dtype:
            columns[name] = column.copy()
            continue
        try:
            if dtype in ("float64", "Float64"):
                numeric = column if _plain_number(column) else pd.to_numeric(column, errors="coerce")
                bad = numeric.isna() & column.notna()
                if bad.any():
                    bad &= column.astype("string").str.strip() != ""
                if bad.any():
                    first = column[bad].iloc[0]
                    run = frame["run_id"][bad].iloc[0] if "run_id" in frame.columns else "?"
                    raise MetadataError(
                        f"metadata column {name!r} must be numeric; run {run!r} has {first!r}"
                    )
                columns[name] = numeric.astype(dtype)
            else:
                columns[name] = column.astype(dtype)
        except (TypeError, ValueError) as exc:
            raise MetadataError(f"metadata column {name!r} cannot be read as {dtype}: {exc}") from exc
    extra = [c for c in frame.columns if c not in METADATA_DTYPES]
    out = pd.concat([pd.DataFrame(columns, index=frame.index), frame[extra].copy()], axis=1)
    return out.reset_index(drop=True)


def _plain_number(column: pd.Series) -> bool:
    """Whether a column already holds plain numbers (ints or floats, not booleans or objects)."""
    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


@dataclass
class RunsTable:
    """Logged points of one or more runs, their metadata and the reading report.

    Attributes
    ----------
    points : pandas.DataFrame
        ``run_id`` (str), ``step`` (int64), ``reward`` (float64), further metric columns.
        Sorted by run then step; one row per (run_id, step).
    runs : pandas.DataFrame
        One row per run, columns of ``METADATA_DTYPES`` then any extra metadata.
    report : ReadReport
        What was read, kept, repaired and dropped, and where.
    """

    points: pd.DataFrame
    runs: pd.DataFrame
    report: ReadReport = field(default_factory=ReadReport)

    def __post_init__(self) -> None:
        missing = [c for c in POINT_COLUMNS if c not in self.points.columns]
        if missing:
            raise ValueError(f"points table lacks columns {missing}")
        self._escape_run_ids()

    def _escape_run_ids(self) -> None:
        r"""Run names are data, never control: a run name holding control characters (ESC, CR,
        NUL, a bidirectional override...; ``bayesgrpo._text.CONTROL_CHARACTERS``) is renamed to
        its escaped form (``"a\x1b[2Kb"``), in the points and the metadata, and the read report
        says so: the run is kept, and no terminal, CSV or file name downstream sees the raw
        characters.

        Raises
        ------
        MetadataError
            When an escaped name is already another run's name.
        """
        if "run_id" not in self.runs.columns or self.runs.empty:
            return
        names = [str(name) for name in self.runs["run_id"].dropna().unique()]
        if not has_control_characters("".join(names)):  # one search for the usual case
            return
        renames = {name: printable(name) for name in names if has_control_characters(name)}
        if not renames:
            return
        taken = set(names) & set(renames.values())
        if taken:
            raise MetadataError(
                f"run {printable(next(iter(taken)))!r} is also the escaped name of a run whose name holds "
                "control characters; rename one of them"
            )

        def renamed(column: pd.Series) -> pd.Series:
            return column.map(lambda name: renames.get(name, name), na_action="ignore").astype(column.dtype)

        self.runs = self.runs.assign(run_id=renamed(self.runs["run_id"]))
        self.points = self.points.assign(run_id=renamed(self.points["run_id"]))
        self.report.notes.append(
            ReadIssue(
                source="run names",
                kind=CONTROL_CHARACTERS_KIND,
                action="repaired",
                count=len(renames),
                locations=tuple(renames.values())[:5],
                detail="run names held control characters (ESC, CR, NUL...), which act on a terminal; "
                "the runs are kept under their names with those characters escaped (\\x1b, \\r, \\x00)",
            )
        )

    @property
    def run_ids(self) -> list[str]:
        """Run ids in the order of the metadata table."""
        return [str(r) for r in self.runs["run_id"]]

    @property
    def metrics(self) -> list[str]:
        """Metric columns of the points table (everything but run_id and step)."""
        return [c for c in self.points.columns if c not in ("run_id", "step")]

    def __len__(self) -> int:
        return len(self.runs)

    def __repr__(self) -> str:
        n_points = int(np.isfinite(self.points["reward"].to_numpy(dtype=float)).sum())
        return (
            f"RunsTable({len(self.runs)} runs, {n_points} reward points, {len(self.metrics)} metrics, "
            f"{len(self.report.issues)} report issues)"
        )

    def run(self, run_id: str) -> pd.DataFrame:
        """The points of one run, with the metric columns it has values in."""
        if run_id not in set(self.run_ids):
            raise BayesGRPOError(f"no run {run_id!r}; runs are {self.run_ids}")
        frame = self.points[self.points["run_id"] == run_id]
        return frame.dropna(axis=1, how="all").reset_index(drop=True)

    def select(self, run_ids: list[str] | None = None, **metadata: Any) -> RunsTable:
        """A new table with the runs named, or whose metadata equals the given values.

        Examples
        --------
        >>> table.select(family="Qwen", algorithm="GRPO")  # doctest: +SKIP
        """
        keep = pd.Series(True, index=self.runs.index)
        if run_ids is not None:
            unknown = set(run_ids) - set(self.run_ids)
            if unknown:
                raise BayesGRPOError(f"unknown run ids {sorted(unknown)}")
            keep &= self.runs["run_id"].isin(run_ids)
        for name, value in metadata.items():
            if name not in self.runs.columns:
                raise UnknownMetricError(name, list(self.runs.columns), "the run metadata")
            keep &= self.runs[name] == value
        runs = self.runs[keep.fillna(False).astype(bool)].reset_index(drop=True)
        points = self.points[self.points["run_id"].isin(runs["run_id"])].reset_index(drop=True)
        return RunsTable(points=points, runs=runs, report=self.report)

    def summary(self) -> pd.DataFrame:
        """One row per run: metadata that matters, point counts, steps, reward range, metrics.

        Computed with one ``groupby`` over all points (a table of 200,000 runs: seconds, not a
        DataFrame per run).
        """
        points = self.points
        run_ids = [str(run_id) for run_id in self.runs["run_id"]]
        finite = points[np.isfinite(points["reward"].to_numpy(dtype=float))]
        stats = (
            finite.groupby("run_id", sort=False, observed=True)
            .agg(
                n_points=("step", "size"),
                first_step=("step", "min"),
                last_step=("step", "max"),
                reward_min=("reward", "min"),
                reward_max=("reward", "max"),
                reward_last=("reward", "last"),
            )
            .reindex(pd.Index(run_ids, dtype=points["run_id"].dtype))
        )
        columns = [c for c in points.columns if c not in ("run_id", "step")]
        logged = points[columns].notna().groupby(points["run_id"], sort=False, observed=True).any()
        logged = logged.reindex(pd.Index(run_ids, dtype=points["run_id"].dtype), fill_value=False)
        names_of: dict[bytes, list[str]] = {}  # runs of one table mostly log the same metrics
        metrics = []
        for row in logged.to_numpy(dtype=bool):
            key = row.tobytes()
            if key not in names_of:
                names_of[key] = [c for c, present in zip(columns, row, strict=True) if present]
            metrics.append(list(names_of[key]))
        n_points = stats["n_points"].fillna(0).astype(int).tolist()
        first = stats["first_step"].tolist()
        last = stats["last_step"].tolist()
        return pd.DataFrame(
            {
                "run_id": run_ids,
                "family": self.runs["family"].tolist(),
                "size_b": self.runs["size_b"].tolist(),
                "algorithm": self.runs["algorithm"].tolist(),
                "group_size": self.runs["group_size"].tolist(),
                "n_points": n_points,
                "first_step": [int(f) if n else pd.NA for f, n in zip(first, n_points, strict=True)],
                "last_step": [int(v) if n else pd.NA for v, n in zip(last, n_points, strict=True)],
                "reward_min": stats["reward_min"].to_numpy(dtype=float),
                "reward_max": stats["reward_max"].to_numpy(dtype=float),
                "reward_last": stats["reward_last"].to_numpy(dtype=float),
                "n_metrics": [len(names) for names in metrics],
                "metrics": metrics,
            }
        )
