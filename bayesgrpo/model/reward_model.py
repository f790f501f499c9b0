"""``RewardModel``: a thin class that orchestrates data preparation, graph, sampling, forecasts
and persistence. The math lives in ``curves``, ``model.data``, ``model.build`` and
``model.predict``, the tables of its answers in ``model.answers``, the HDF5 reader of a saved
model in ``model.hdf5_groups``; plotting, stopping, transfer and evaluation live in their own modules.
"""

from __future__ import annotations

import hashlib
import json
import logging
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo._files import atomic_path
from bayesgrpo._version import __version__
from bayesgrpo.errors import BayesGRPOError, FitWarning
from bayesgrpo.errors import ModelConfigError as ModelConfigError  # defined here before 0.x
from bayesgrpo.errors import NotFittedError as NotFittedError  # defined here before 0.x
from bayesgrpo.logs.table import RunsTable
from bayesgrpo.model import answers
from bayesgrpo.model.curves import CURVES, DEFAULT_CURVE, get_curve
from bayesgrpo.model.data import PROGRESS_AXES, ModelData, prepare
from bayesgrpo.model.draws import CurveDraws
from bayesgrpo.model.live_summary import read_live_summary, write_live_summary
from bayesgrpo.model.population_draws import PopulationDraws
from bayesgrpo.model.predict import reward_draws, run_draws
from bayesgrpo.model.sampling import (
    DEFAULT_SAMPLER,
    DEFAULT_THIN,
    FitDiagnostics,
    check_fit_fits_in_memory,
    sample_model,
)
from bayesgrpo.model.structure import curve_params

if TYPE_CHECKING:  # xarray too: a model read from its live summary answers live updates without it
    import arviz as az
    import pymc as pm
    import xarray as xr
    from pymc_extras.prior import Prior

logger = logging.getLogger(__name__)

#: Bumped whenever the graph changes in a way that makes old posteriors meaningless.
# 4: runs normalised by their own range get their own levels (model.structure.bounds_from_data);
# 5: and their own noise level
MODEL_FORMAT = 5
DEFAULT_QUANTILES: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)


@dataclass
class Forecast:
    """Posterior forecasts of reward curves.

    Attributes
    ----------
    table : pandas.DataFrame
        Tidy: ``run_id``, ``step``, ``mean``, one column per quantile (``q05``, ``q50``...),
        and ``observed`` (the logged reward at that step, where there is one).
    draws : xarray.DataArray
        Dims ``(sample, run, step)``, reward units.
    """

    table: pd.DataFrame
    draws: xr.DataArray


class RewardModel:
    """Hierarchical Bayesian model of RL fine-tuning reward curves.

    Parameters
    ----------
    curve : str
        Curve family: ``"two_timescale"`` (default: a fast rise, possibly after a slow start, then a
        slow climb), ``"weibull"`` (slow start, rapid rise, plateau), ``"exp"``,
        ``"logistic"``, ``"power"``, ``"oscillator"``.
    pooling : {"partial", "none", "complete"}
        How runs share strength: around family/task means with covariates (default),
        not at all, or one curve for all. A fit of one run has nothing to pool with: ``"partial"``
        then fits it with ``"none"`` (the same population prior, without the between-run spreads
        one run cannot inform), and ``pooling`` says so after the fit.
    priors : mapping of str to pymc_extras.prior.Prior, optional
        Overrides of the default priors by name (``bayesgrpo.model.priors``). A name that matches
        nothing raises, listing the valid names.
    progress : {"step", "epoch", "samples", "compute"}
        The progress axis (``bayesgrpo.model.data``).
    max_points : int
        Runs with more points are binned to this many (equal-count bins, noise scaled).
    bounds_margin : float
        Widening of data-driven reward bounds (runs without ``reward_min``/``reward_max``).
    centered_min_snr : float
        Runs that clearly move (signal-to-noise of their change at least this) are parametrised
        centred, the others non-centred (centred samples far better when the data pin a run down,
        non-centred when they barely do: ``benchmarks/experiments/README.md``, "Geometry").
    noise_floor : float
        Smallest noise scale of one logged point, in normalised reward units (the resolution of
        a logged reward; keeps runs whose points repeat one value from collapsing the noise).
    whiten : bool
        Sample each run with enough points in coordinates whitened by its own Laplace fit
        (``model.build._whitened_block``): about 8x fewer leapfrog steps on the bundled runs.

    Examples
    --------
    >>> from bayesgrpo.model.datasets import load_bundled
    >>> model = RewardModel(curve="weibull").fit(load_bundled())  # doctest: +SKIP
    >>> model.forecast().table.head()  # doctest: +SKIP
    """

    def __init__(
        self,
        curve: str = DEFAULT_CURVE,
        pooling: str = "partial",
        priors: Mapping[str, Any] | None = None,
        progress: str = "step",
        max_points: int = 40,
        bounds_margin: float = 0.5,
        centered_min_snr: float = 4.0,
        noise_floor: float = 0.01,
        whiten: bool = True,
    ):
        get_curve(curve)
        if pooling not in ("partial", "none", "complete"):
            raise BayesGRPOError(f"pooling={pooling!r}; choose 'partial', 'none' or 'complete'")
        if progress not in PROGRESS_AXES:
            raise BayesGRPOError(f"progress={progress!r}; choose one of {PROGRESS_AXES}")
        self.curve = curve
        self.pooling = pooling
        # the priors as Prior objects (pymc_extras, which loads PyMC) only when asked for: a saved
        # model read for live updates needs their JSON form alone (prior_config)
        self._priors: dict[str, Prior] | None = None
        if priors is not None:
            from bayesgrpo.model.priors import merge_priors

            self._priors = merge_priors(curve, priors)
        self._prior_config: dict[str, Any] | None = None
        self.progress = progress
        self.max_points = int(max_points)
        self.bounds_margin = float(bounds_margin)
        self.centered_min_snr = float(centered_min_snr)
        self.noise_floor = float(noise_floor)
        self.whiten = bool(whiten)
        self._idata: az.InferenceData | None = None
        self._groups: dict[str, xr.Dataset] = {}  # a saved model's groups, before ArviZ is asked for
        self._unread: Path | None = None  # a saved model whose groups are read when first asked for
        self._unread_stat: tuple[int, int, int] | None = None  # its file as it was loaded
        self._population_draws: PopulationDraws | None = None
        self.data: ModelData | None = None
        self.diagnostics: FitDiagnostics | None = None

    @property
    def priors(self) -> dict[str, Prior]:
        """Every prior of the model by name (``bayesgrpo.model.priors``), the user's over the defaults."""
        if self._priors is None:
            from bayesgrpo.model.priors import merge_priors, priors_from_dict

            given = None if self._prior_config is None else priors_from_dict(self._prior_config)
            self._priors = merge_priors(self.curve, given)
        return self._priors

    @property
    def prior_config(self) -> dict[str, Any]:
        """The priors in their JSON form, ``name -> {"dist": ..., "kwargs": {...}}`` (sorted names)."""
        if self._prior_config is None:
            from bayesgrpo.model.priors import priors_to_dict

            self._prior_config = priors_to_dict(self.priors)
        return self._prior_config

    @property
    def idata(self) -> az.InferenceData | None:
        """The posterior (and sample stats) as ArviZ ``InferenceData``; None before a fit."""
        self._read_unread_groups()
        if self._idata is None and self._groups:
            import arviz as az

            self._idata = az.InferenceData(**self._groups)
            self._groups = {}
        return self._idata

    @idata.setter
    def idata(self, value: az.InferenceData | None) -> None:
        self._idata, self._groups, self._unread, self._population_draws = value, {}, None, None
        self._unread_stat = None

    @property
    def posterior(self) -> xr.Dataset | None:
        """The posterior draws (``idata.posterior``), read without loading ArviZ; None before a fit."""
        self._read_unread_groups()
        if self._idata is not None:
            posterior: xr.Dataset = self._idata.posterior
            return posterior
        return self._groups.get("posterior")

    @property
    def population_draws(self) -> PopulationDraws | None:
        """The posterior's group-level draws (what a new run's prior is made of); None before a fit.

        A model read with its live summary (:func:`write_live_summary`) has them without its
        posterior, which is read from the saved file only when something asks for it.
        """
        if self._population_draws is None:
            posterior = self.posterior
            if posterior is None:
                return None
            self._population_draws = PopulationDraws.from_posterior(posterior)
        return self._population_draws

    @property
    def is_fitted(self) -> bool:
        """Whether the model holds a posterior and its fit data (fitted, or loaded)."""
        has_draws = self._unread is not None or self._groups or self._idata is not None
        return bool(has_draws) and self.data is not None

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with its posterior read: a copy sent to another machine (a Ray worker) may not
        see the file a live summary stands in for.
        """
        self._read_unread_groups()
        return self.__dict__.copy()

    def __setstate__(self, state: dict[str, Any]) -> None:
        # older pickles lack them
        self.__dict__.update({"_unread": None, "_unread_stat": None, "_population_draws": None, **state})

    def _read_unread_groups(self) -> None:
        """Read the posterior of a model loaded from its live summary (once).

        Raises
        ------
        ModelConfigError
            When the file was replaced, changed or removed since the model was loaded (its size,
            modification time or inode differ): its posterior may be another model's.
        """
        path = self._unread
        if path is None:
            return
        if self._unread_stat is not None and _file_stat(path) != self._unread_stat:
            raise ModelConfigError(
                f"{path} was replaced, changed or removed after this model was loaded from it, and "
                "its posterior had not been read yet: it may hold another model now. Load it again "
                "(RewardModel.load) to use the file as it is."
            )
        groups = _read_groups(path)
        _check_groups(path, groups, self.curve)
        if self.config_hash != groups["posterior"].attrs.get("bayesgrpo_config_hash"):
            raise ModelConfigError(f"{path} no longer holds the model its live summary was written from")
        groups.pop("constant_data", None)  # the fit data came with the summary
        self._groups = groups
        self._unread = None  # after the groups: another thread reads them again, never sees none

    # configuration -----------------------------------------------------------------------
    @property
    def config(self) -> dict[str, Any]:
        """The model's configuration as canonical JSON-ready data."""
        return {
            "curve": self.curve,
            "pooling": self.pooling,
            "progress": self.progress,
            "max_points": self.max_points,
            "bounds_margin": self.bounds_margin,
            "centered_min_snr": self.centered_min_snr,
            "noise_floor": self.noise_floor,
            "whiten": self.whiten,
            "priors": self.prior_config,
            "model_format": MODEL_FORMAT,
        }

    @property
    def config_hash(self) -> str:
        """SHA-256 of the canonical configuration JSON."""
        text = json.dumps(self.config, sort_keys=True, separators=(",", ":"), default=float)
        return hashlib.sha256(text.encode()).hexdigest()

    def __repr__(self) -> str:
        state = f"fitted on {self.data.n_runs} runs" if self.data is not None else "not fitted"
        settings = f"curve={self.curve!r}, pooling={self.pooling!r}, progress={self.progress!r}"
        return f"RewardModel({settings}; {state})"

    # fitting -----------------------------------------------------------------------------
    def build(self, runs: RunsTable, horizon: float | Mapping[str, float] | None = None) -> pm.Model:
        """Prepare the data and build (not sample) the PyMC model; returns the ``pymc.Model``."""
        self.data = prepare(
            runs,
            progress=self.progress,
            horizon=horizon,
            max_points=self.max_points,
            bounds_margin=self.bounds_margin,
        )
        from bayesgrpo.model.build import create_reward_model

        return create_reward_model(
            self.data,
            self.curve,
            self.priors,
            pooling=self.pooling,
            centered_min_snr=self.centered_min_snr,
            noise_floor=self.noise_floor,
            whiten=self.whiten,
        )

    def fit(
        self,
        runs: RunsTable,
        *,
        horizon: float | Mapping[str, float] | None = None,
        sampler: str = DEFAULT_SAMPLER,
        draws: int = 1000,
        tune: int = 1000,
        chains: int = 2,
        thin: int = DEFAULT_THIN,
        target_accept: float = 0.9,
        random_seed: int | None = None,
        progressbar: bool = True,
    ) -> RewardModel:
        """Fit the model to the runs of a runs table.

        Parameters
        ----------
        runs : RunsTable
        horizon : float or mapping run_id -> step, optional
            The step each run is planned to end at (default: metadata ``total_steps``, else the
            last logged step). With ``progress="step"`` it is the unit of normalised progress.
        sampler : {"numpyro", "nutpie", "pymc", "advi", "pathfinder"}
            Default numpyro: the fastest sampler whose chains agree on the bundled runs.
        draws, tune, chains, target_accept, random_seed, progressbar
            Passed to the sampler; ``draws`` are the draws kept per chain.
        thin : int
            MCMC iterations per kept draw (default 4: the slowest parameters of the bundled
            runs' fit take 10-15 iterations to forget, so a kept draw loses little and the
            posterior stays small; ``benchmarks/results/sampler_speed.md``).

        Returns
        -------
        RewardModel
            ``self``, fitted: ``idata``, ``data`` and ``diagnostics`` are set.

        Raises
        ------
        FitTooLargeError
            Before any work, when the draws of this many runs would not fit in the memory free
            (``bayesgrpo.model.sampling.fit_memory_bytes``); the message names the faster paths.
        """
        check_fit_fits_in_memory(len(runs.run_ids), len(curve_params(self.curve)), draws, chains)
        if self.pooling == "partial" and len(runs.run_ids) == 1:
            # one run has nothing to pool with: the between-run spreads would be sampled from their
            # priors alone, a funnel that gives divergences on the cleanest run; no pooling draws the
            # run from the same population prior without it
            logger.info("one run: nothing to pool with; fitting it with pooling='none'")
            self.pooling = "none"
        model = self.build(runs, horizon)
        idata, diagnostics = sample_model(
            model,
            sampler=sampler,
            draws=draws,
            tune=tune,
            chains=chains,
            thin=thin,
            target_accept=target_accept,
            random_seed=random_seed,
            progressbar=progressbar,
        )
        self.idata = idata
        self.diagnostics = diagnostics
        for message in diagnostics.warnings:
            warnings.warn(message, FitWarning, stacklevel=2)
        return self

    def _require_fit(self) -> tuple[az.InferenceData, ModelData]:
        if self.idata is None or self.data is None:
            raise NotFittedError("the model is not fitted: call fit(runs) or RewardModel.load(path)")
        return self.idata, self.data

    # answers -----------------------------------------------------------------------------
    def forecast(
        self,
        steps: Sequence[float] | np.ndarray | None = None,
        runs: Sequence[str] | None = None,
        *,
        quantiles: Sequence[float] = DEFAULT_QUANTILES,
        include_noise: bool = False,
        observed: RunsTable | None = None,
        random_seed: int | None = None,
        max_samples: int | None = 1000,
    ) -> Forecast:
        """Posterior forecasts of the fitted runs' reward curves.

        Parameters
        ----------
        steps : array of steps, optional
            Default: 101 steps from 0 to the largest horizon.
        runs : list of run ids, optional
            Default: every fitted run.
        quantiles : sequence of float
        include_noise : bool
            Intervals for an observed (noisy) logged reward instead of the expected reward.
        observed : RunsTable, optional
            Adds an ``observed`` column with the logged reward at each step where one exists.
        random_seed : int, optional
        max_samples : int, optional
            Thin the posterior to at most this many samples.

        Returns
        -------
        Forecast
        """
        idata, data = self._require_fit()
        if steps is None:
            steps = np.unique(np.round(np.linspace(0, float(data.horizon_step.max()), 101)))
        draws = reward_draws(
            idata.posterior,
            data,
            self.curve,
            np.asarray(steps, dtype=float),
            include_noise=include_noise,
            random_seed=random_seed,
            max_samples=max_samples,
        )
        if runs is not None:
            unknown = sorted(set(runs) - set(data.run_ids))
            if unknown:
                raise BayesGRPOError(
                    f"runs {unknown[:5]} were not fitted; fitted runs: {list(data.run_ids)[:10]}..."
                )
            draws = draws.sel(run=list(runs))
        return Forecast(table=answers.forecast_table(draws, quantiles, observed), draws=draws)

    def final_reward(
        self,
        quantiles: Sequence[float] = (0.05, 0.5, 0.95),
        *,
        include_noise: bool = False,
        random_seed: int | None = 0,
    ) -> pd.DataFrame:
        """Forecast reward at each run's horizon: ``run_id, horizon_step, mean, q..``.

        Parameters
        ----------
        quantiles : sequence of float
        include_noise : bool
            Quantiles of a logged reward there (the predictive band, noise included) instead of
            the expected reward (the curve band, default).
        random_seed : int, optional
            Of the noise.
        """
        idata, data = self._require_fit()
        return answers.final_reward_table(
            idata.posterior, data, self.curve, quantiles, include_noise=include_noise, random_seed=random_seed
        )

    def curve_draws(self) -> CurveDraws:
        """Posterior draws of every fitted run's curve, for the stopping queries.

        Returns
        -------
        bayesgrpo.questions.stopping.CurveDraws
            Levels in reward units, steps mapped to the model's progress, each run's horizon.
        """
        idata, data = self._require_fit()
        return CurveDraws.from_model_data(run_draws(idata.posterior, self.curve), data, self.curve)

    def run_parameters(self) -> pd.DataFrame:
        """Posterior means and 90% intervals of each run's curve on natural scales.

        ``r0`` (start), ``r1`` (level at the horizon) and ``asymptote`` are in reward units;
        shape parameters in normalised progress; ``sigma`` in reward units.
        """
        idata, data = self._require_fit()
        return answers.parameter_table(idata.posterior, data, self.curve)

    def fit_summary(self) -> dict[str, Any]:
        """How the fit was made and how reliable it is, in one dict."""
        _, data = self._require_fit()
        assert self.diagnostics is not None
        return answers.fit_summary(
            self.config, data, self._parametrisation_counts(data), self.diagnostics.to_dict()
        )

    def _parametrisation_counts(self, data: ModelData) -> dict[str, int]:
        """How many runs are sampled whitened, centred or non-centred (``model.build.parametrisation``)."""
        if self.pooling != "partial":
            return {self.pooling: data.n_runs}

        from bayesgrpo.model.build import parametrisation

        labels = parametrisation(
            data, self.curve, self.priors, self.centered_min_snr, self.noise_floor, self.whiten
        )
        counts: dict[str, int] = {}
        for label in labels.values():
            counts[label] = counts.get(label, 0) + 1
        return counts

    # persistence -------------------------------------------------------------------------
    def save(self, path: str | Path, *, live_summary: bool = False) -> Path:
        """Write the posterior, fit data, configuration and version to one netCDF file.

        The file is written whole or not at all (``bayesgrpo._files.atomic_path``): to a temporary
        file beside ``path``, synced, then renamed over it, so a save killed at any moment leaves
        the file as it was or as it is now, never half written; the live summary likewise.

        Parameters
        ----------
        path : str or Path
        live_summary : bool
            Also write what a live update reads of the model (its configuration, fit data and
            group-level draws) to a small numpy file beside it (``model.live_summary``):
            :meth:`load` then reads that alone, in milliseconds, and the posterior when it is
            first asked for. The shipped population has one.
        """
        idata, data = self._require_fit()
        assert self.diagnostics is not None
        path = Path(path)
        import arviz as az

        out = az.InferenceData(posterior=idata.posterior)
        if "sample_stats" in idata:
            out.add_groups(sample_stats=idata.sample_stats)
        out.add_groups(constant_data=data.to_dataset())
        attrs = {
            "bayesgrpo_config": json.dumps(self.config, sort_keys=True),
            "bayesgrpo_config_hash": self.config_hash,
            "bayesgrpo_version": __version__,
            "bayesgrpo_diagnostics": json.dumps(self.diagnostics.to_dict(), default=float),
        }
        out.posterior.attrs.update(attrs)
        with atomic_path(path) as partial:  # a save killed half-way leaves the old file whole
            out.to_netcdf(str(partial))
        if live_summary:
            draws = self.population_draws
            assert draws is not None  # fitted
            write_live_summary(path, attrs, data, draws)
        return path

    @classmethod
    def load(cls, path: str | Path) -> RewardModel:
        """Read a model written by :meth:`save`.

        Where the file has a live summary beside it, written from the file as it is now
        (``save(path, live_summary=True)``), only the summary is read, and the posterior when
        something first asks for it (:attr:`posterior`, :attr:`idata`, a forecast).

        Raises
        ------
        ModelConfigError
            When the stored configuration does not match its stored hash (it was changed), or
            the posterior does not hold the variables this version's graph has; and later, when
            a model read from its live summary first reads its posterior, if the file was
            replaced or changed since it was loaded.
        """
        path = Path(path)
        if not path.exists():
            raise BayesGRPOError(f"no saved model at {path}")
        if not path.is_file():  # an empty --population names "."
            raise BayesGRPOError(f"{path} is a folder, not a saved model (the file RewardModel.save writes)")
        stat = _file_stat(path)  # before the summary checks the file's hash: a later change is seen
        summary = read_live_summary(path)
        if summary is not None:
            model = cls._from_attrs(path, summary.attrs)
            model.data = summary.data
            model._population_draws = summary.population_draws
            model._unread = path
            model._unread_stat = stat
            model.diagnostics = _diagnostics(summary.attrs)
            return model
        return cls._load_file(path)

    @classmethod
    def _load_file(cls, path: Path) -> RewardModel:
        """A saved model read from its netCDF file itself (its groups in memory, checked)."""
        groups = _read_groups(path)
        model = cls._from_attrs(path, groups["posterior"].attrs)
        _check_groups(path, groups, model.curve)
        model.data = ModelData.from_dataset(groups.pop("constant_data"))
        model._groups = groups
        model.diagnostics = _diagnostics(groups["posterior"].attrs)
        return model

    @staticmethod
    def add_live_summary(path: str | Path) -> Path:
        """Write the live summary of a model saved without one (see :meth:`save`), from the file.

        Parameters
        ----------
        path : str or Path
            A file :meth:`save` wrote.

        Returns
        -------
        Path
            The summary's path, beside the file (``model.live_summary.live_summary_path``).
        """
        path = Path(path)
        model = RewardModel._load_file(path)  # the file itself, not a summary beside it
        posterior = model._groups["posterior"]
        attrs = {key: str(value) for key, value in posterior.attrs.items() if key.startswith("bayesgrpo_")}
        draws = model.population_draws
        assert model.data is not None and draws is not None  # read and checked
        return write_live_summary(path, attrs, model.data, draws)

    @classmethod
    def _from_attrs(cls, path: Path, attrs: Mapping[str, Any]) -> RewardModel:
        """An unfitted model of a saved model's configuration, checked against its hash and format."""
        if "bayesgrpo_config" not in attrs:
            raise ModelConfigError(
                f"{path} was not written by RewardModel.save (no bayesgrpo_config attribute)"
            )
        config = json.loads(attrs["bayesgrpo_config"])
        if config.get("model_format") != MODEL_FORMAT:
            raise ModelConfigError(
                f"{path} holds a model of format {config.get('model_format')}, this bayesgrpo reads format "
                f"{MODEL_FORMAT}"
            )
        model = cls(
            curve=config["curve"],
            pooling=config["pooling"],
            progress=config["progress"],
            max_points=config["max_points"],
            bounds_margin=config["bounds_margin"],
            centered_min_snr=config["centered_min_snr"],
            noise_floor=config["noise_floor"],
            whiten=config.get("whiten", False),
        )
        model._prior_config = dict(config["priors"])
        if model.config_hash != attrs.get("bayesgrpo_config_hash"):
            raise ModelConfigError(
                f"{path}: the stored configuration does not match its hash (saved by bayesgrpo "
                f"{attrs.get('bayesgrpo_version')}); it was changed after saving"
            )
        return model


def _file_stat(path: Path) -> tuple[int, int, int] | None:
    """What tells a file replaced or rewritten: its size, modification time (ns) and inode; None
    where it is gone.
    """
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns, stat.st_ino


def _diagnostics(attrs: Mapping[str, Any]) -> FitDiagnostics | None:
    diagnostics = json.loads(attrs.get("bayesgrpo_diagnostics", "{}"))
    return FitDiagnostics(**diagnostics) if diagnostics else None


def _check_groups(path: Path, groups: Mapping[str, xr.Dataset], curve: str) -> None:
    """A saved model's groups hold what a model of its curve needs."""
    missing = [f"{p}_run" for p in ("r0", "r1", *CURVES[curve].shape_params)] + ["sigma_run", "nu"]
    missing = [name for name in missing if name not in groups["posterior"]]
    if missing:
        raise ModelConfigError(f"{path}: posterior lacks {missing}, which a {curve!r} model has")
    if "constant_data" not in groups:
        raise ModelConfigError(f"{path} was not written by RewardModel.save (no constant_data group)")


#: The groups ``RewardModel.save`` writes, and which a saved model must hold.
SAVED_GROUPS: tuple[str, ...] = ("posterior", "sample_stats", "constant_data")


def _read_groups(path: Path) -> dict[str, xr.Dataset]:
    """The groups of a saved model, read into memory (ArviZ's file layout: one netCDF group each),
    and the file closed: it can then be written again (a refit saved to the same path) while the
    model lives, and no later query waits on a disk read. A group the file lacks is left out
    (approximations have no ``sample_stats``); a file without a posterior is refused.

    The groups are read straight from HDF5 (``model.hdf5_groups``: 0.1 s for the shipped population,
    where xarray's netCDF decoding takes 0.3 s of a live answer's first 0.6 s); a file that reader
    does not recognise is read by xarray instead.
    """
    try:
        groups = _read_hdf5_groups(path)
    except Exception as error:  # not the layout save writes: xarray reads any netCDF
        logger.debug("reading %s through xarray: %s", path, error)
        import xarray as xr

        groups = {}
        for group in SAVED_GROUPS:
            try:
                with xr.open_dataset(path, group=group, engine="h5netcdf") as dataset:
                    groups[group] = dataset.load()
            except (OSError, ValueError):  # the group is not in the file, or it is no netCDF
                continue
    if "posterior" not in groups:
        raise ModelConfigError(f"{path} was not written by RewardModel.save (no posterior group read)")
    return groups


def _read_hdf5_groups(path: Path) -> dict[str, xr.Dataset]:
    """Every saved group present in the file, read with h5py (``model.hdf5_groups``)."""
    from bayesgrpo.model.hdf5_groups import read_hdf5_groups

    return read_hdf5_groups(path, SAVED_GROUPS)
