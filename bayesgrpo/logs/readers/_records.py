"""From a reader's raw records to tidy points, with every change accounted for.

Readers only know the outside world's formats. Each turns a file into one ``RawRun`` per run:
its records in file order (one per line, entry, event or row), each with its location, its
step as written, and its metric values as written. ``tidy_run`` then does everything that is
the same for all formats, vectorised:

1. steps that are missing, negative or not whole numbers: record dropped, reported;
2. numbers written as strings converted (reported), values that are not numbers blanked
   (reported), infinite values blanked (reported);
3. records with no value at all: dropped, reported;
4. the same step logged by several records: values merged, the latest record winning for a
   metric logged twice (a resumed run), records left with no surviving value dropped,
   reported with their steps and locations;
5. steps out of order: sorted, reported;
6. the reward metric chosen (``reward=`` or the format's default) and renamed ``reward``,
   the format's known metric names mapped to canonical ones.

Long-form records (one metric value per record, as TensorBoard events) go through the same
steps with ``RawRun.long=True``: columns ``_loc, step, metric, value``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from bayesgrpo.errors import EmptyLogError, MalformedRecordError, UnknownMetricError
from bayesgrpo.logs.report import MAX_LOCATIONS, ReadIssue, SourceAccount

LOC = "_loc"
STEP = "step"


@dataclass
class RawRun:
    """A run as a reader found it, before any repair.

    Attributes
    ----------
    run_id : str
        The run's name (file stem, folder name, W&B run name...).
    source : str
        The file, or ``file#run`` for files holding several runs.
    format : str
        The reader's format name.
    records : pandas.DataFrame
        Wide: ``_loc`` (int, 1-based line/entry/row number), ``step`` (as written), one column
        per metric (float, or object where the log wrote strings). Long (``long=True``):
        ``_loc``, ``step``, ``metric`` (str), ``value``.
    records_read : int
        Records the reader saw, including those it dropped itself (listed in ``issues``).
    issues : list of ReadIssue
        What the reader itself dropped or repaired (unparsable lines, a torn last record...).
    metadata : dict
        What the log states about the run (model, group size, total steps...).
    reward_candidates : tuple of str
        Metric names, in order of preference, to use as ``reward`` when the user names none.
    aliases : dict
        The format's metric names mapped to canonical ones (``"actor/entropy": "entropy"``).
    location_label : str
        How ``_loc`` reads to a person: ``"line"``, ``"log_history"``, ``"event"``, ``"row"``.
    long : bool
        Whether ``records`` is in long form.
    text_values : bool
        Whether every value is text by nature (CSV), so a number written as text is normal and
        not reported; values that are not numbers are reported all the same.
    """

    run_id: str
    source: str
    format: str
    records: pd.DataFrame
    records_read: int
    issues: list[ReadIssue] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    reward_candidates: tuple[str, ...] = ("reward",)
    aliases: dict[str, str] = field(default_factory=dict)
    location_label: str = "line"
    long: bool = False
    text_values: bool = False


@dataclass
class TidyRun:
    """A run's tidy points, its metadata, and the account of how they came to be."""

    points: pd.DataFrame
    metadata: dict[str, Any]
    account: SourceAccount


@dataclass
class TidyBatch:
    """Tidy runs side by side: their points in one frame, their metadata and accounts in order.

    Attributes
    ----------
    points : pandas.DataFrame
        ``run_id``, ``step``, ``reward`` and the other metrics, run after run.
    metadata : list of dict
        One per run, as ``TidyRun.metadata``.
    accounts : list of SourceAccount
        One per run, as ``TidyRun.account``.
    """

    points: pd.DataFrame
    metadata: list[dict[str, object]]
    accounts: list[SourceAccount]

    @classmethod
    def of(cls, run: TidyRun) -> TidyBatch:
        """A batch of one tidy run.

        Parameters
        ----------
        run : TidyRun

        Returns
        -------
        TidyBatch
        """
        return cls(run.points, [run.metadata], [run.account])


class _Issues:
    """Collects issues of one source and raises on the first change when strict."""

    def __init__(self, raw: RawRun, strict: bool):
        self.raw = raw
        self.strict = strict
        self.items: list[ReadIssue] = list(raw.issues)
        if strict:
            for issue in self.items:
                if issue.action != "info":
                    raise MalformedRecordError(f"{issue.kind}: {issue.detail}", raw.source)

    def where(self, locs: pd.Series | np.ndarray, label: str | None = None) -> tuple[str, ...]:
        label = label or self.raw.location_label
        values = np.asarray(locs)[:MAX_LOCATIONS]
        return tuple(f"{label} {v}" for v in values)

    def add(
        self,
        kind: str,
        action: str,
        count: int,
        locations: tuple[str, ...],
        detail: str,
    ) -> None:
        if count <= 0:
            return
        if self.strict and action != "info":
            where = locations[0] if locations else None
            raise MalformedRecordError(
                f"{detail} ({count} record(s) or value(s); pass strict=False to repair and report)",
                self.raw.source,
                where,
            )
        # action is one of ReadIssue's literals by construction (the readers pass constants)
        self.items.append(ReadIssue(self.raw.source, kind, action, count, locations, detail))  # type: ignore[arg-type]


def _clean_steps(frame: pd.DataFrame, issues: _Issues) -> pd.DataFrame:
    """Drop records whose step is not a whole number in [0, 2**63); make the step int64."""
    step = pd.to_numeric(frame[STEP], errors="coerce").to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        # 2**63 and above would wrap around to negative steps in int64
        ok = np.isfinite(step) & (step >= 0) & (np.floor(step) == step) & (step < 2.0**63)
    if not ok.all():
        bad = frame.loc[~ok]
        examples = ", ".join(repr(v) for v in bad[STEP].head(3).tolist())
        issues.add(
            "bad_step",
            "dropped",
            int((~ok).sum()),
            issues.where(bad[LOC]),
            f"step is missing, negative, not a whole number or too large (>= 2**63) (found {examples}); "
            "record dropped",
        )
        frame = frame.loc[ok]
        step = step[ok]
    return frame.assign(**{STEP: step.astype(np.int64)})  # copy-on-write: only the step column is new


def _coerce_values(values: pd.Series, locs: pd.Series, name: str, issues: _Issues) -> pd.Series:
    """Turn one column of values as written into float64, reporting every change."""
    if values.dtype == object or pd.api.types.is_string_dtype(values.dtype):
        text = values.astype("string").str.strip()
        stripped = text.str.replace(r"^np\.float(?:32|64)\((.*)\)$", r"\1", regex=True)
        numeric = pd.to_numeric(stripped, errors="coerce")
        present = values.notna() & (text != "")
        was_string = present & values.map(lambda v: isinstance(v, str)).astype(bool)
        failed = present & numeric.isna() & ~stripped.str.lower().isin(["nan", "none", "null"])
        converted = was_string & ~failed
        if converted.any() and not issues.raw.text_values:
            issues.add(
                "string_number",
                "repaired",
                int(converted.sum()),
                issues.where(locs[converted]),
                f"metric {name!r}: numbers written as text converted to numbers",
            )
        if failed.any():
            examples = ", ".join(repr(v) for v in values[failed].head(3).tolist())
            issues.add(
                "non_numeric",
                "repaired",
                int(failed.sum()),
                issues.where(locs[failed]),
                f"metric {name!r}: values that are not numbers ({examples}) treated as missing",
            )
        out = numeric.astype("float64")
    elif values.dtype == bool:
        out = values.astype("float64")
    else:
        out = values.astype("float64")  # lazy under copy-on-write
    array = out.to_numpy()
    infinite = np.isinf(array)
    if infinite.any():
        issues.add(
            "non_finite",
            "repaired",
            int(infinite.sum()),
            issues.where(locs[infinite]),
            f"metric {name!r}: infinite values treated as missing",
        )
        array = np.where(infinite, np.nan, array)
        out = pd.Series(array, index=values.index)
    return out


def _step_codes(steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct steps (sorted) and each record's index into them.

    Steps of a log span a modest range, so a direct-address table (no sort) does it in O(range)
    memory; a sparse range falls back to ``np.unique``.
    """
    if steps.size == 0:
        return steps, steps
    low, high = int(steps.min()), int(steps.max())
    if high - low > 4 * steps.size + 1_000_000:
        values, codes = np.unique(steps, return_inverse=True)
        return values, codes.astype(np.int64)
    offset = steps - low
    present = np.zeros(high - low + 1, dtype=bool)
    present[offset] = True
    code_of = np.cumsum(present, dtype=np.int64) - 1
    return np.flatnonzero(present) + low, code_of[offset]


def _last_of_each_key(key: np.ndarray, n_keys: int) -> np.ndarray:
    """Indices of the last record (in file order) of each distinct key, sorted by key."""
    if n_keys <= 4 * key.size + 1_000_000:
        last_index = np.full(n_keys, -1, dtype=np.int64)
        np.maximum.at(last_index, key, np.arange(key.size, dtype=np.int64))
        return last_index[last_index >= 0]
    _, first_in_reversed = np.unique(key[::-1], return_index=True)
    return key.size - 1 - first_in_reversed


def _backwards_within_metric(order: np.ndarray, steps: np.ndarray, metric_codes: np.ndarray) -> np.ndarray:
    """Records (indices into ``order``'s targets) whose step is below the previous step of the
    same metric, in file order. Logs nearly always write steps in order: checked first, cheaply.
    """
    if np.all(np.diff(steps[order]) >= 0):
        return order[:0]
    by_metric = order[np.argsort(metric_codes[order], kind="stable")]
    same_metric = metric_codes[by_metric][1:] == metric_codes[by_metric][:-1]
    return by_metric[1:][same_metric & (np.diff(steps[by_metric]) < 0)]


def _long_to_wide(raw: RawRun, frame: pd.DataFrame, issues: _Issues) -> tuple[pd.DataFrame, int]:
    """Pivot long records (one value each) into one row per step; dedupe (step, metric).

    Done on integer codes with numpy (no pandas pivot or hashing of the long frame), so that a
    200 MB event file's millions of records cost a few arrays of their size, not a multiple.

    Returns the wide frame (``_loc`` = location of the first record of the step) and the
    number of long records kept.
    """
    locs = frame[LOC].to_numpy()
    steps = frame[STEP].to_numpy(dtype=np.int64)
    values = _coerce_values(frame["value"], frame[LOC], "value", issues).to_numpy(dtype=float)
    metric = frame["metric"]
    if isinstance(metric.dtype, pd.CategoricalDtype):
        metric_codes = metric.cat.codes.to_numpy().astype(np.int64)
        metric_names = [str(c) for c in metric.cat.categories]
    else:
        codes, uniques = pd.factorize(metric, sort=False)
        metric_codes, metric_names = codes.astype(np.int64), [str(u) for u in uniques]
    del frame, metric

    missing = np.isnan(values)
    if missing.any():
        issues.add(
            "no_values",
            "dropped",
            int(missing.sum()),
            issues.where(locs[missing]),
            "record holds no usable value (NaN); dropped",
        )
        keep = ~missing
        locs, steps, values, metric_codes = locs[keep], steps[keep], values[keep], metric_codes[keep]

    step_values, step_codes = _step_codes(steps)
    n_metrics = max(len(metric_names), 1)
    key = step_codes * n_metrics + metric_codes
    last = _last_of_each_key(key, step_values.size * n_metrics)
    if last.size < key.size:
        superseded = np.ones(key.size, dtype=bool)
        superseded[last] = False
        dup_steps = np.unique(steps[superseded])
        issues.add(
            "duplicate_step",
            "dropped",
            int(superseded.sum()),
            issues.where(locs[superseded]),
            f"{dup_steps.size} step(s) logged more than once for the same metric (resumed run?), first "
            f"steps {dup_steps[:5].tolist()}; kept the latest value",
        )
    del key
    last.sort()  # back to file order for the order check
    backwards_at = _backwards_within_metric(last, steps, metric_codes)
    if backwards_at.size:
        first_bad = int(steps[np.sort(backwards_at)[0]])
        issues.add(
            "out_of_order",
            "repaired",
            int(backwards_at.size),
            issues.where(np.sort(locs[backwards_at])),
            f"steps out of order (step {first_bad} logged after a later step); sorted by step",
        )
    wide = np.full((step_values.size, len(metric_names)), np.nan)
    wide[step_codes[last], metric_codes[last]] = values[last]
    first_loc = np.full(step_values.size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_loc, step_codes[last], locs[last].astype(np.int64))
    out = pd.DataFrame(wide, columns=metric_names)
    out.insert(0, STEP, step_values)
    out.insert(0, LOC, first_loc)
    return out, int(last.size)


def _merge_duplicate_steps(
    frame: pd.DataFrame, metric_columns: list[str], issues: _Issues
) -> tuple[pd.DataFrame, int]:
    """Merge records that share a step; the latest record wins per metric.

    Returns the merged frame and the number of records dropped because every value they
    held was replaced by a later record of the same step.
    """
    dup_mask = frame.duplicated(subset=[STEP], keep=False).to_numpy()
    if not dup_mask.any():
        return frame, 0
    dup = frame.loc[dup_mask]
    contributing: set[int] = set()
    conflicts: set[int] = set()
    for column in metric_columns:
        present = dup[[STEP, column]].dropna()
        if present.empty:
            continue
        last = present.groupby(STEP, sort=False).tail(1)
        contributing.update(last.index.tolist())
        distinct = present.groupby(STEP, sort=False)[column].transform("nunique")
        conflicts.update(present.index[distinct.to_numpy() > 1].tolist())
    merged = dup.groupby(STEP, sort=False).last()  # last non-null value per column
    merged[LOC] = dup.groupby(STEP, sort=False)[LOC].min()
    merged = merged.reset_index()
    superseded = [i for i in dup.index if i not in contributing]
    if superseded:
        lost = dup.loc[superseded]
        steps = sorted(set(lost[STEP].tolist()))
        issues.add(
            "duplicate_step",
            "dropped",
            len(superseded),
            issues.where(lost[LOC]),
            f"{len(steps)} step(s) logged again later (resumed or restarted run), first steps {steps[:5]}; "
            "the earlier records were replaced by the later ones",
        )
    partial = sorted(conflicts - set(superseded))
    partly_replaced = [i for i in partial if i in contributing and _has_later_duplicate(dup, i)]
    if partly_replaced:
        issues.add(
            "duplicate_step_values",
            "repaired",
            len(partly_replaced),
            issues.where(dup.loc[partly_replaced, LOC]),
            "records sharing a step with a later record had some values replaced by the later ones",
        )
    merged_ok = len(dup) - len(superseded) - len(merged)
    if merged_ok > 0:
        issues.add(
            "merged_records",
            "info",
            merged_ok,
            issues.where(dup[LOC]),
            "records sharing a step with different metrics (train and validation, say) merged into one row",
        )
    rest = frame.loc[~dup_mask]
    combined = pd.concat([rest, merged[rest.columns]], ignore_index=False)
    # restore file order by first location so that order checks still mean something
    return combined.sort_values(LOC, kind="stable").reset_index(drop=True), len(superseded)


def _has_later_duplicate(dup: pd.DataFrame, index: int) -> bool:
    step = dup.at[index, STEP]
    same = dup.index[(dup[STEP] == step).to_numpy()]
    return bool((same > index).any())


def _merge_alias_gaps(frame: pd.DataFrame, raw: RawRun, rename: dict[str, str], issues: _Issues) -> None:
    """Fill a canonical column's gaps from the log's other names of the same metric (in place).

    verl, for example, wrote the step-0 validation as ``test_score/<ds>`` and later ones as
    ``val/test_score/<ds>``: both are ``val_reward``. The other names stay as columns too.
    """
    source_of = {canonical: name for name, canonical in rename.items() if canonical != "reward"}
    for name, canonical in raw.aliases.items():
        if canonical not in source_of or name == source_of[canonical] or name not in frame.columns:
            continue
        target, other = frame[canonical], frame[name]
        fill = (target.isna() & other.notna()).to_numpy()
        differ = (target.notna() & other.notna() & (target != other)).to_numpy()
        if fill.any():
            frame[canonical] = target.where(~fill, other)
            issues.add(
                "alias_merged",
                "info",
                int(fill.sum()),
                issues.where(frame.loc[fill, STEP], "step"),
                f"{canonical!r} (from {source_of[canonical]!r}) filled where only {name!r}, another name of "
                "the same metric, has a value",
            )
        if differ.any():
            issues.add(
                "alias_conflict",
                "info",
                int(differ.sum()),
                issues.where(frame.loc[differ, STEP], "step"),
                f"{source_of[canonical]!r} and {name!r} (both {canonical!r}) differ; kept "
                f"{source_of[canonical]!r}",
            )


def metric_renames(raw: RawRun, columns: list[str], reward_key: str) -> dict[str, str]:
    """Column -> its name in the points: the reward ``reward``, known metrics their canonical names.

    Parameters
    ----------
    raw : RawRun
        The run (its ``aliases``).
    columns : list of str
        The columns of its records.
    reward_key : str
        The column chosen as the reward.

    Returns
    -------
    dict
        Only the columns renamed; two log names of one metric: the first alias wins.
    """
    rename = {reward_key: "reward"}
    for name, canonical in raw.aliases.items():
        if (
            name in columns
            and name != reward_key
            and canonical not in columns
            and canonical != "reward"
            and canonical not in rename.values()  # two log names of one metric: the first alias wins
        ):
            rename[name] = canonical
    if "reward" in columns and reward_key != "reward":
        rename["reward"] = "reward_logged"  # a column literally named reward that is not the chosen one
    return rename


def choose_reward(raw: RawRun, columns: list[str], reward: str | None) -> str:
    """The column to forecast: the user's ``reward=`` or the format's first default present.

    Parameters
    ----------
    raw : RawRun
        The run (its reward candidates and aliases).
    columns : list of str
        Its metric columns.
    reward : str, optional
        The user's choice, by the log's name or the canonical one.

    Returns
    -------
    str

    Raises
    ------
    UnknownMetricError
        When ``reward`` names no column, or no default is logged.
    """
    alias_back = {canonical: name for name, canonical in raw.aliases.items() if name in columns}
    if reward is not None:
        if reward in columns:
            return reward
        if reward in alias_back:
            return alias_back[reward]
        raise UnknownMetricError(reward, columns, raw.source)
    for candidate in raw.reward_candidates:
        if candidate in columns:
            return candidate
    raise UnknownMetricError(
        raw.reward_candidates[0] if raw.reward_candidates else "reward",
        columns,
        f"{raw.source} (none of the default reward metrics {list(raw.reward_candidates)} is logged; pass "
        "reward='<metric>')",
    )


def tidy_run(raw: RawRun, reward: str | None = None, strict: bool = False) -> TidyRun:
    """Clean one raw run into tidy points and account for every record.

    Parameters
    ----------
    raw : RawRun
        What the reader found.
    reward : str, optional
        The metric to forecast, by its name in the log or its canonical name.
        Defaults to the format's first default that the log has.
    strict : bool
        Raise ``MalformedRecordError`` at the first record that would be dropped or repaired,
        instead of repairing and reporting.

    Returns
    -------
    TidyRun

    Raises
    ------
    EmptyLogError
        When no record holds a value.
    UnknownMetricError
        When ``reward`` names no metric of the log, or no default reward metric is logged.
    """
    issues = _Issues(raw, strict)
    frame = _clean_steps(_located_records(raw, issues), issues)
    if raw.long:
        frame, records_kept = _long_to_wide(raw, frame, issues)
        metric_columns = [c for c in frame.columns if c not in (LOC, STEP)]
    else:
        frame, metric_columns, records_kept = _wide_values(frame, issues)
    if len(frame) == 0:
        raise EmptyLogError(f"no {raw.format} record of the file holds a usable value", raw.source)
    frame = _sorted_by_step(frame, issues)
    frame, reward_key = _named_metrics(raw, frame, metric_columns, reward, issues)
    return _tidy_run(raw, frame, reward_key, records_kept, issues)


def _located_records(raw: RawRun, issues: _Issues) -> pd.DataFrame:
    """The raw records, each with its location (numbered from 1 when the reader gave none)."""
    frame = raw.records
    if LOC not in frame.columns:
        frame = frame.assign(**{LOC: np.arange(1, len(frame) + 1)})
    if len(frame) == 0:
        raise EmptyLogError(
            f"no {raw.format} records found ({raw.records_read} read, "
            f"{sum(i.count for i in issues.items if i.action == 'dropped')} dropped by the reader)",
            raw.source,
        )
    return frame


def _coerced_columns(
    frame: pd.DataFrame, metric_columns: list[str], issues: _Issues
) -> dict[str, np.ndarray]:
    """Every metric column as float64, each change reported (``_coerce_values``).

    Float columns are taken as one block and checked for infinite values at once: a step line
    of thousands of metrics is not thousands of pandas calls; only the columns with something
    to report, and columns of another type, go through ``_coerce_values`` one by one.
    """
    kinds = {name: dtype.kind for name, dtype in frame.dtypes.items()}
    floats = [c for c in metric_columns if kinds[c] == "f"]
    block = frame[floats].to_numpy(dtype=float, na_value=np.nan) if floats else np.zeros((len(frame), 0))
    infinite = np.asarray(np.isinf(block).any(axis=0), dtype=bool)
    by_name = {c: block[:, j] for j, c in enumerate(floats) if not infinite[j]}
    out: dict[str, np.ndarray] = {}
    for column in metric_columns:
        if column in by_name:
            out[column] = by_name[column]
        else:
            out[column] = _coerce_values(frame[column], frame[LOC], column, issues).to_numpy(dtype=float)
    return out


def _wide_values(frame: pd.DataFrame, issues: _Issues) -> tuple[pd.DataFrame, list[str], int]:
    """One row a record: values made numbers, empty metrics and value-less records dropped, repeated
    steps merged; the frame, its metric columns and the records kept.
    """
    metric_columns = [c for c in frame.columns if c not in (LOC, STEP)]
    coerced = _coerced_columns(frame, metric_columns, issues)
    frame = pd.DataFrame({LOC: frame[LOC].to_numpy(), STEP: frame[STEP].to_numpy(), **coerced})
    empty_columns = [c for c in metric_columns if np.isnan(coerced[c]).all()]
    if empty_columns and len(empty_columns) < len(metric_columns):
        frame = frame.drop(columns=empty_columns)
        metric_columns = [c for c in metric_columns if c not in empty_columns]
        issues.add(
            "empty_metric",
            "info",
            len(empty_columns),
            tuple(empty_columns[:MAX_LOCATIONS]),
            f"metric column(s) with no numeric value not kept: {empty_columns[:10]}",
        )
    no_values = (
        frame[metric_columns].isna().all(axis=1).to_numpy() if metric_columns else np.ones(len(frame), bool)
    )
    if no_values.any():
        issues.add(
            "no_values",
            "dropped",
            int(no_values.sum()),
            issues.where(frame.loc[no_values, LOC]),
            "record holds no metric value; dropped",
        )
        frame = frame.loc[~no_values].reset_index(drop=True)
    before = len(frame)
    frame, superseded = _merge_duplicate_steps(frame, metric_columns, issues)
    return frame, metric_columns, before - superseded


def _sorted_by_step(frame: pd.DataFrame, issues: _Issues) -> pd.DataFrame:
    """The records in step order; steps that went backwards are reported as repaired."""
    steps = frame[STEP].to_numpy()
    backwards = np.flatnonzero(np.diff(steps) < 0) + 1
    if not backwards.size:
        return frame
    issues.add(
        "out_of_order",
        "repaired",
        int(backwards.size),
        issues.where(frame[LOC].to_numpy()[backwards]),
        f"steps out of order (step {int(steps[backwards[0]])} after step "
        f"{int(steps[backwards[0] - 1])}); sorted by step",
    )
    return frame.sort_values(STEP, kind="stable").reset_index(drop=True)


def _named_metrics(
    raw: RawRun, frame: pd.DataFrame, metric_columns: list[str], reward: str | None, issues: _Issues
) -> tuple[pd.DataFrame, str]:
    """The reward column chosen and named ``reward``, other metrics under their canonical names."""
    reward_key = choose_reward(raw, metric_columns, reward)
    rename = metric_renames(raw, list(frame.columns), reward_key)
    frame = frame.rename(columns=rename)
    _merge_alias_gaps(frame, raw, rename, issues)
    no_reward = int(frame["reward"].isna().sum())
    if no_reward:
        issues.add(
            "no_reward",
            "info",
            no_reward,
            issues.where(frame.loc[frame["reward"].isna(), STEP], "step"),
            f"row(s) with other metrics but no {reward_key!r} kept (validation-only steps, say); they are "
            "not reward points",
        )
    if frame["reward"].notna().sum() == 0:
        raise EmptyLogError(f"metric {reward_key!r} has no finite value", raw.source)
    return frame, reward_key


def _tidy_run(
    raw: RawRun, frame: pd.DataFrame, reward_key: str, records_kept: int, issues: _Issues
) -> TidyRun:
    """The run's points in the schema, its metadata and the account of its records."""
    metrics = [c for c in frame.columns if c not in (LOC, STEP, "reward")]
    values = frame[metrics].to_numpy(dtype=float) if metrics else np.zeros((len(frame), 0))
    points = pd.DataFrame(
        {
            "run_id": pd.Series([raw.run_id] * len(frame), dtype="string"),
            STEP: frame[STEP].to_numpy(dtype=np.int64),
            "reward": frame["reward"].to_numpy(dtype=float),
            **{c: values[:, j] for j, c in enumerate(metrics)},
        }
    )
    metadata = {
        "run_id": raw.run_id,
        "format": raw.format,
        "path": raw.source,
        "reward_key": reward_key,
        **{k: v for k, v in raw.metadata.items() if v is not None},
    }
    account = SourceAccount(
        source=raw.source,
        format=raw.format,
        run_ids=[raw.run_id],
        records_read=raw.records_read,
        records_kept=records_kept,
        issues=issues.items,
    )
    return TidyRun(points=points, metadata=metadata, account=account)
