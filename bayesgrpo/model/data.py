"""Turn a runs table into the arrays the model is fitted on (pure functions, no PyMC).

Three transformations, each stated in the fit summary:

* **Progress axis.** ``"step"`` (default): steps divided by each run's horizon (its planned
  ``total_steps``, else its last logged step), so ``t`` is the fraction of the run, the
  normalised progress of arXiv 2507.18014. ``"epoch"``: steps / ``steps_per_epoch``.
  ``"samples"``: samples seen (steps x batch_size x group_size) and ``"compute"`` (6 x
  parameters x tokens, tokens = samples x mean completion length), both divided by one global
  scale (the median over runs at their horizon) so that ``t`` is about 1 at a typical horizon.
* **Reward scale.** Rewards are mapped to ``y = (r - lower) / (upper - lower)`` with the run's
  known bounds (``reward_min``/``reward_max`` metadata) or, when unknown, data-driven bounds: the
  observed range widened by ``bounds_margin`` times itself on each side.
* **Binning.** A run with more than ``max_points`` points is cut into ``max_points`` bins of
  (nearly) equal counts; a bin's mean reward has its noise scale divided by ``sqrt(count)``.

Runs are laid out as a ``(run, point)`` matrix with a mask: the layout that samples fastest
(``benchmarks/experiments/README.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.logs.table import RunsTable

if TYPE_CHECKING:  # xarray only where a Dataset is made: the live path reads none
    import xarray as xr

Progress = Literal["step", "epoch", "samples", "compute"]
PROGRESS_AXES: tuple[str, ...] = ("step", "epoch", "samples", "compute")
UNKNOWN = "unknown"

#: The reward logged at step ``s`` was earned by rollouts of the policy after ``s - 1`` updates
#: (verl and TRL count steps from 1 and log the rollouts' reward with the update they feed), so
#: progress is ``(step - 1)`` steps' worth: a run's first logged reward is its start, R(0). Without
#: it the start is extrapolated from t = 1/horizon, and a curve that rises within that first
#: step could not be told from one that starts high (measured: bimodal starts, r_hat 1.9).
UPDATES_BEFORE_STEP = 1


def step_progress(steps: np.ndarray) -> np.ndarray:
    """Optimizer updates behind the reward logged at each step (never below 0)."""
    return np.maximum(np.asarray(steps, dtype=float) - UPDATES_BEFORE_STEP, 0.0)


@dataclass(frozen=True)
class Standardizer:
    """Centre and scale of a covariate, kept so new runs are standardised the same way."""

    centre: float
    scale: float

    def __call__(self, values: np.ndarray) -> np.ndarray:
        """Standardise ``values`` with the stored mean and scale."""
        return (np.asarray(values, dtype=float) - self.centre) / self.scale

    @classmethod
    def fit(cls, values: np.ndarray) -> Standardizer:
        """The standardiser of ``values`` (their mean and standard deviation, 1 when constant)."""
        finite = np.asarray(values, dtype=float)
        finite = finite[np.isfinite(finite)]
        if finite.size == 0:
            return cls(0.0, 1.0)
        scale = float(finite.std()) if finite.size > 1 and finite.std() > 1e-9 else 1.0
        return cls(float(finite.mean()), scale)


@dataclass(frozen=True)
class ModelData:
    """Everything the model graph needs, as plain arrays (R runs, L points per run at most).

    Attributes
    ----------
    run_ids : tuple of str
    t, y, noise_scale : ndarray, shape (R, L)
        Progress, normalised reward and relative noise scale (1/sqrt(points in the bin)) of each
        point; padding cells hold t=0, y=0, scale=1 and are masked out.
    mask : ndarray of bool, shape (R, L)
    n_points : ndarray of int, shape (R,)
        Points per run before binning.
    signal_to_noise : ndarray, shape (R,)
        How clearly a run moves: the difference between the means of its last and first fifth
        of points, over the standard error of that difference (noise from successive
        differences). Decides the parametrisation of a run (``model.build``).
    lower, upper : ndarray, shape (R,)
        Reward bounds used for normalisation, in reward units.
    bounds_source : tuple of str
        ``"metadata"`` or ``"data"`` per run.
    progress : str
    progress_scale : ndarray, shape (R,)
        ``t = progress_value / progress_scale``; for ``"step"`` this is the run's horizon.
    horizon_step : ndarray, shape (R,)
        The step the run is planned to end at (forecast "final" reward is read there).
    step_to_progress : ndarray, shape (R,)
        Progress units per optimizer step (1 for ``"step"``).
    family_index, task_index : ndarray of int, shape (R,)
    families, tasks : tuple of str
    log_size, log_samples : ndarray, shape (R,)
        Standardised log model size and log samples per step; NaN where unknown.
    size_standardizer, samples_standardizer : Standardizer
    """

    run_ids: tuple[str, ...]
    t: np.ndarray
    y: np.ndarray
    noise_scale: np.ndarray
    mask: np.ndarray
    n_points: np.ndarray
    signal_to_noise: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    bounds_source: tuple[str, ...]
    progress: str
    progress_scale: np.ndarray
    horizon_step: np.ndarray
    family_index: np.ndarray
    task_index: np.ndarray
    families: tuple[str, ...]
    tasks: tuple[str, ...]
    log_size: np.ndarray
    log_samples: np.ndarray
    step_to_progress: np.ndarray
    size_standardizer: Standardizer = field(default_factory=lambda: Standardizer(0.0, 1.0))
    samples_standardizer: Standardizer = field(default_factory=lambda: Standardizer(0.0, 1.0))

    @property
    def n_runs(self) -> int:
        """Number of runs."""
        return len(self.run_ids)

    def to_reward(self, y: np.ndarray, run_axis: int = -2) -> np.ndarray:
        """Map normalised values back to reward units (``run`` along ``run_axis``)."""
        shape = [1] * np.ndim(y)
        shape[run_axis] = self.n_runs
        lower = self.lower.reshape(shape)
        return lower + np.asarray(y) * (self.upper - self.lower).reshape(shape)

    def to_t(self, steps: np.ndarray) -> np.ndarray:
        """Progress of given steps for every run: shape (R, len(steps))."""
        return step_progress(steps)[None, :] * self.step_to_progress[:, None] / self.progress_scale[:, None]

    def to_dataset(self) -> xr.Dataset:
        """The data as an xarray Dataset (saved with a fitted model)."""
        import xarray as xr

        arrays, attrs = self.to_arrays()
        coords = {name: arrays.pop(name) for name in ("run", "family", "task")}
        data = xr.Dataset(
            {
                name: (("run", "point") if values.ndim == 2 else "run", values)
                for name, values in arrays.items()
            },
            coords=coords,
        )
        data.attrs.update(attrs)
        return data

    @classmethod
    def from_dataset(cls, data: xr.Dataset) -> ModelData:
        """Inverse of :meth:`to_dataset`."""
        return cls.from_arrays({str(name): data[name].to_numpy() for name in data.variables}, data.attrs)

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The data as named arrays and their attributes, as :meth:`to_dataset` holds them
        (the variables and coordinates; a saved model's live summary stores them so).
        """
        arrays = {
            "run": np.array(self.run_ids, dtype=str),
            "family": np.array(self.families, dtype=str),
            "task": np.array(self.tasks, dtype=str),
            "t": self.t,
            "y": self.y,
            "noise_scale": self.noise_scale,
            "mask": self.mask.astype(np.int8),
            "n_points": self.n_points,
            "signal_to_noise": self.signal_to_noise,
            "lower": self.lower,
            "upper": self.upper,
            "bounds_source": np.array(self.bounds_source, dtype=str),
            "progress_scale": self.progress_scale,
            "horizon_step": self.horizon_step,
            "step_to_progress": self.step_to_progress,
            "family_index": self.family_index,
            "task_index": self.task_index,
            "log_size": self.log_size,
            "log_samples": self.log_samples,
        }
        attrs = {
            "progress": self.progress,
            "size_centre": self.size_standardizer.centre,
            "size_scale": self.size_standardizer.scale,
            "samples_centre": self.samples_standardizer.centre,
            "samples_scale": self.samples_standardizer.scale,
        }
        return arrays, attrs

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> ModelData:
        """Inverse of :meth:`to_arrays`; :meth:`from_dataset` reads a Dataset's arrays so."""
        return cls(
            run_ids=tuple(str(r) for r in arrays["run"]),
            t=np.asarray(arrays["t"]).astype(float),
            y=np.asarray(arrays["y"]).astype(float),
            noise_scale=np.asarray(arrays["noise_scale"]).astype(float),
            mask=np.asarray(arrays["mask"]).astype(bool),
            n_points=np.asarray(arrays["n_points"]).astype(int),
            signal_to_noise=np.asarray(arrays["signal_to_noise"]).astype(float),
            lower=np.asarray(arrays["lower"]).astype(float),
            upper=np.asarray(arrays["upper"]).astype(float),
            bounds_source=tuple(str(b) for b in arrays["bounds_source"]),
            progress=str(attrs["progress"]),
            progress_scale=np.asarray(arrays["progress_scale"]).astype(float),
            horizon_step=np.asarray(arrays["horizon_step"]).astype(float),
            family_index=np.asarray(arrays["family_index"]).astype(int),
            task_index=np.asarray(arrays["task_index"]).astype(int),
            families=tuple(str(f) for f in arrays["family"]),
            tasks=tuple(str(t) for t in arrays["task"]),
            log_size=np.asarray(arrays["log_size"]).astype(float),
            log_samples=np.asarray(arrays["log_samples"]).astype(float),
            size_standardizer=Standardizer(float(attrs["size_centre"]), float(attrs["size_scale"])),
            samples_standardizer=Standardizer(float(attrs["samples_centre"]), float(attrs["samples_scale"])),
            step_to_progress=np.asarray(arrays["step_to_progress"]).astype(float),
        )


def _metadata_value(runs: pd.DataFrame, column: str) -> np.ndarray:
    """A metadata column as floats per run (NaN where missing or not a number)."""
    if column not in runs.columns:
        return np.full(len(runs), np.nan)
    values = runs[column]
    if not pd.api.types.is_numeric_dtype(values.dtype):
        values = pd.to_numeric(values, errors="coerce")
    return values.to_numpy(dtype=float, na_value=np.nan)


def _labels(runs: pd.DataFrame, column: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """Each run's level of a metadata column (missing: ``UNKNOWN``) and the sorted levels."""
    values = (
        [UNKNOWN if pd.isna(v) else str(v) for v in runs[column].tolist()]
        if column in runs.columns
        else [UNKNOWN] * len(runs)
    )
    levels = tuple(sorted(set(values)))
    lookup = {level: i for i, level in enumerate(levels)}
    return np.array([lookup[v] for v in values], dtype=int), levels


#: Bins grow with progress: bin edges sit at ``n * (i / max_points) ** BIN_POWER`` of a run's
#: points. Early points, where a GRPO curve moves fastest, stay (nearly) unbinned; the plateau is
#: averaged. With equal-count bins a rise within the first bin left a run's start and rate
#: trading off (measured on the bundled verl runs: correlation 0.92, r_hat 1.2-1.4).
BIN_POWER = 2.0


def _bin(t: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bins that grow with progress (``BIN_POWER``): means of t and y, and 1/sqrt(count) per bin."""
    n = len(t)
    if n <= max_points:
        return t, y, np.ones_like(t)
    edges = np.unique(np.round(n * (np.arange(max_points + 1) / max_points) ** BIN_POWER).astype(int))
    counts = np.diff(edges)
    t_binned = np.add.reduceat(t, edges[:-1]) / counts
    y_binned = np.add.reduceat(y, edges[:-1]) / counts
    return t_binned, y_binned, 1.0 / np.sqrt(counts)


def signal_to_noise(y: np.ndarray) -> float:
    """t-statistic of the change between the first and last fifth of a run's points."""
    n = len(y)
    if n < 5:
        return 0.0
    fifth = max(1, n // 5)
    diffs = np.abs(np.diff(y))
    noise = 1.4826 * float(np.median(diffs)) / np.sqrt(2.0) if diffs.size else 0.0
    change = abs(float(y[-fifth:].mean() - y[:fifth].mean()))
    if noise <= 1e-12:
        return np.inf if change > 0 else 0.0
    return change / (noise * np.sqrt(2.0 / fifth))


def _points_by_run(points: pd.DataFrame) -> dict[Any, tuple[np.ndarray, np.ndarray]]:
    """Each run's steps and rewards where the reward is finite, in step order.

    Read as arrays: a table read from many logs carries every metric any of them logged (the
    bundled runs: about 150 columns), and filtering and grouping whole frames was most of a live
    update's ``prepare`` (``benchmarks/live_update.py``).
    """
    reward = points["reward"].to_numpy(dtype=float)
    keep = np.isfinite(reward)
    step, reward = points["step"].to_numpy(dtype=float)[keep], reward[keep]
    codes, run_ids = pd.factorize(points["run_id"].to_numpy()[keep])
    order = np.lexsort((step, codes))  # by run, then step (stable for a step logged twice)
    step, reward = step[order], reward[order]
    starts = np.searchsorted(codes[order], np.arange(len(run_ids) + 1))
    return {
        run_id: (step[a:b], reward[a:b])
        for run_id, a, b in zip(run_ids, starts[:-1], starts[1:], strict=True)
    }


def _horizons(
    runs: pd.DataFrame, last_logged: np.ndarray, horizon: float | Mapping[str, float] | None
) -> np.ndarray:
    """Planned last step per run, in the order of ``runs``: explicit > metadata total_steps > last
    logged step (``last_logged``, NaN where a run has none).
    """
    run_ids = runs["run_id"].tolist()
    last = np.asarray(last_logged, dtype=float)
    planned = _metadata_value(runs, "total_steps")
    with np.errstate(invalid="ignore"):
        out = np.where(np.isfinite(planned) & (planned >= last), planned, last)
    if horizon is not None:
        if isinstance(horizon, Mapping):
            unknown = set(horizon) - set(run_ids)
            if unknown:
                raise BayesGRPOError(f"horizon given for unknown runs {sorted(unknown)}")
            position = {run_id: i for i, run_id in enumerate(run_ids)}
            for run_id, value in horizon.items():
                out[position[run_id]] = float(value)
        else:
            out[:] = float(horizon)
    bad = [run_id for run_id, value in zip(run_ids, out, strict=True) if not value > 0]  # NaN too
    if bad:
        raise BayesGRPOError(f"runs {bad[:5]} have no positive horizon; pass horizon=...")
    return out


def _samples_per_step(runs: pd.DataFrame) -> np.ndarray:
    """Completions per optimizer step: stated, else prompts per step x group size."""
    stated = _metadata_value(runs, "samples_per_step")
    derived = _metadata_value(runs, "batch_size") * _metadata_value(runs, "group_size")
    return np.where(np.isnan(stated), derived, stated)


def _step_to_progress(table: RunsTable, progress: str) -> np.ndarray:
    """Progress units per step, per run, for the chosen axis (1 for step)."""
    runs = table.runs
    if progress == "step":
        return np.ones(len(runs))
    run_ids = np.asarray(runs["run_id"].tolist(), dtype=object)
    if progress == "epoch":
        per_epoch = _metadata_value(runs, "steps_per_epoch")
        missing = run_ids[~(per_epoch > 0)].tolist()  # NaN included
        if missing:
            raise BayesGRPOError(
                f"progress='epoch' needs steps_per_epoch metadata; missing for runs {missing[:8]}"
            )
        return 1.0 / per_epoch
    samples = _samples_per_step(runs)
    missing = run_ids[np.isnan(samples)].tolist()
    if missing:
        raise BayesGRPOError(
            f"progress={progress!r} needs samples_per_step metadata (or batch_size and group_size); missing "
            f"for runs {missing[:8]}"
        )
    if progress == "samples":
        return samples
    size = _metadata_value(runs, "size_b")
    lengths = (
        table.points.groupby("run_id")["completion_length"].mean()
        if "completion_length" in table.points
        else pd.Series(dtype=float)
    )
    length = runs["run_id"].map(lengths).to_numpy(dtype=float, na_value=np.nan)
    missing = run_ids[np.isnan(size) | np.isnan(length)].tolist()
    if missing:
        raise BayesGRPOError(
            "progress='compute' needs size_b metadata and a completion_length metric; missing for runs "
            f"{missing[:8]}"
        )
    return (6.0 * size * 1e9 * samples * length) / 1e18  # exaFLOP per step


def prepare(
    table: RunsTable,
    *,
    progress: str = "step",
    horizon: float | Mapping[str, float] | None = None,
    max_points: int = 40,
    bounds_margin: float = 0.5,
    size_standardizer: Standardizer | None = None,
    samples_standardizer: Standardizer | None = None,
) -> ModelData:
    """Arrays for the model from a runs table (see the module docstring for each choice).

    Parameters
    ----------
    table : RunsTable
    progress : {"step", "epoch", "samples", "compute"}
    horizon : float or mapping run_id -> step, optional
        The step each run is planned to end at. Default: metadata ``total_steps``, else the last
        logged step.
    max_points : int
        Bin runs longer than this (equal-count bins).
    bounds_margin : float
        Widening of data-driven reward bounds, as a fraction of the observed range per side.
    size_standardizer, samples_standardizer : Standardizer, optional
        Reuse the standardisation of an earlier fit (for new runs).

    Returns
    -------
    ModelData
    """
    if progress not in PROGRESS_AXES:
        raise BayesGRPOError(f"progress={progress!r}; choose one of {PROGRESS_AXES}")
    if max_points < 3:
        raise BayesGRPOError("max_points must be at least 3")
    runs = table.runs.reset_index(drop=True)
    by_run = _points_by_run(table.points)
    empty = [r for r in runs["run_id"] if r not in by_run]
    if empty:
        raise BayesGRPOError(f"runs {empty[:5]} have no finite reward point to fit")

    horizons = _horizons(runs, np.array([by_run[r][0][-1] for r in runs["run_id"]]), horizon)
    per_step = _step_to_progress(table, progress)
    horizon_progress = np.maximum(step_progress(horizons), 1.0) * per_step
    progress_scale = _progress_scale(progress, horizon_progress)

    known_lower = _metadata_value(runs, "reward_min")
    known_upper = _metadata_value(runs, "reward_max")
    rows_t, rows_y, rows_scale = [], [], []
    lower = np.empty(len(runs))
    upper = np.empty(len(runs))
    sources = []
    n_points = np.empty(len(runs), dtype=int)
    snr = np.empty(len(runs))
    for i, run_id in enumerate(runs["run_id"]):
        steps, reward = by_run[run_id]
        lower[i], upper[i], source = _run_bounds(reward, known_lower[i], known_upper[i], bounds_margin)
        sources.append(source)
        t = step_progress(steps) * per_step[i] / progress_scale[i]
        y = (reward - lower[i]) / (upper[i] - lower[i])
        n_points[i] = len(t)
        snr[i] = signal_to_noise(y)
        t_b, y_b, s_b = _bin(t, y, max_points)
        rows_t.append(t_b)
        rows_y.append(y_b)
        rows_scale.append(s_b)

    t_matrix, y_matrix, scale_matrix, mask = _padded(rows_t, rows_y, rows_scale)

    family_index, families = _labels(runs, "family")
    task_index, tasks = _labels(runs, "task")
    raw_size = np.log(_metadata_value(runs, "size_b"))
    raw_samples = np.log(_samples_per_step(runs))
    size_standardizer = size_standardizer or Standardizer.fit(raw_size)
    samples_standardizer = samples_standardizer or Standardizer.fit(raw_samples)
    return ModelData(
        run_ids=tuple(str(r) for r in runs["run_id"]),
        t=t_matrix,
        y=y_matrix,
        noise_scale=scale_matrix,
        mask=mask,
        n_points=n_points,
        signal_to_noise=snr,
        lower=lower,
        upper=upper,
        bounds_source=tuple(sources),
        progress=progress,
        progress_scale=progress_scale,
        horizon_step=horizons,
        family_index=family_index,
        task_index=task_index,
        families=families,
        tasks=tasks,
        log_size=size_standardizer(raw_size),
        log_samples=samples_standardizer(raw_samples),
        size_standardizer=size_standardizer,
        samples_standardizer=samples_standardizer,
        step_to_progress=per_step.astype(float),
    )


def _progress_scale(progress: str, horizon_progress: np.ndarray) -> np.ndarray:
    """The unit of each run's normalised progress: its horizon (steps), one epoch, or the median
    horizon (samples, compute).
    """
    if progress == "step":
        return horizon_progress.copy()
    if progress == "epoch":
        return np.ones(len(horizon_progress))
    return np.full(len(horizon_progress), float(np.median(horizon_progress)))


def _run_bounds(
    reward: np.ndarray, known_lower: float, known_upper: float, bounds_margin: float
) -> tuple[float, float, str]:
    """A run's reward bounds and where they come from: the stated range ("metadata"), or the
    observed range widened by ``bounds_margin`` of it on each side ("data").
    """
    if np.isfinite(known_lower) and np.isfinite(known_upper) and known_upper > known_lower:
        return known_lower, known_upper, "metadata"
    low, high = float(reward.min()), float(reward.max())
    width = high - low if high > low else max(abs(high), 1.0)
    return low - bounds_margin * width, high + bounds_margin * width, "data"


def _padded(
    rows_t: list[np.ndarray], rows_y: list[np.ndarray], rows_scale: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Runs' rows as ``(run, point)`` matrices padded to the longest, and the mask of real points."""
    shape = (len(rows_t), max(len(r) for r in rows_t))
    t_matrix, y_matrix = np.zeros(shape), np.zeros(shape)
    scale_matrix, mask = np.ones(shape), np.zeros(shape, dtype=bool)
    for i, (t, y, s) in enumerate(zip(rows_t, rows_y, rows_scale, strict=True)):
        t_matrix[i, : len(t)], y_matrix[i, : len(t)], scale_matrix[i, : len(t)] = t, y, s
        mask[i, : len(t)] = True
    return t_matrix, y_matrix, scale_matrix, mask
