"""A population posterior's group-level draws in plain numpy: what a new run's prior is made of.

A new run's prior (:func:`bayesgrpo.model.predict.new_run_draws`) reads only the population's
group-level variables (means, spreads, slopes, family and task effects, the noise's degrees of
freedom), never the fitted runs' own parameters. :class:`PopulationDraws` holds those variables
stacked over chains and draws, one row per posterior sample, with the labels of the group levels
an effect has. It is made from a posterior (:meth:`PopulationDraws.from_posterior`) or read from
a saved model's live summary (``bayesgrpo.model.reward_model.write_live_summary``), which the
live path loads without xarray or h5py.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from bayesgrpo.errors import BayesGRPOError

if TYPE_CHECKING:
    import xarray as xr

#: The posterior's sample dimensions, stacked chain-major (``Dataset.stack(sample=SAMPLE_DIMS)``).
SAMPLE_DIMS: tuple[str, str] = ("chain", "draw")


@dataclass(frozen=True)
class PopulationDraws:
    """Group-level posterior variables, one row per sample.

    Parameters
    ----------
    arrays : mapping of str to ndarray
        Each variable's draws: shape ``(S,)`` for a scalar, ``(S, L)`` for an effect with one
        value per group level.
    levels : mapping of str to tuple of (str, tuple of str)
        For each ``(S, L)`` variable, its level dimension's name and the ``L`` labels in column
        order.
    """

    arrays: Mapping[str, np.ndarray]
    levels: Mapping[str, tuple[str, tuple[str, ...]]]

    def __post_init__(self) -> None:
        frozen = {}
        for name, values in self.arrays.items():
            view = np.asarray(values).view()
            if view.ndim not in (1, 2):
                raise BayesGRPOError(f"population draws: {name} has shape {view.shape}, not (S,) or (S, L)")
            if view.ndim == 2 and (name not in self.levels or len(self.levels[name][1]) != view.shape[1]):
                columns = view.shape[1]
                raise BayesGRPOError(f"population draws: {name} has {columns} columns and no labels for them")
            view.flags.writeable = False  # shared by every prior made from them
            frozen[name] = view
        sizes = {len(values) for values in frozen.values()}
        if len(sizes) > 1:
            raise BayesGRPOError(f"population draws of different lengths: {sorted(sizes)}")
        object.__setattr__(self, "arrays", frozen)  # a dict, not a MappingProxyType: it pickles
        object.__setattr__(self, "levels", dict(self.levels))

    @property
    def n_samples(self) -> int:
        """``S``, the posterior samples."""
        return len(next(iter(self.arrays.values()))) if self.arrays else 0

    def __contains__(self, name: object) -> bool:
        return name in self.arrays

    def __iter__(self) -> Iterator[str]:
        return iter(self.arrays)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def level_labels(self, name: str) -> tuple[str, ...]:
        """The group levels of an ``(S, L)`` variable, in its column order."""
        return self.levels[name][1]

    def at_level(self, name: str, level: str) -> np.ndarray:
        """One level's draws of an effect, shape ``(S,)``."""
        return self.arrays[name][:, self.level_labels(name).index(level)]

    @classmethod
    def from_posterior(cls, posterior: xr.Dataset) -> PopulationDraws:
        """The group-level variables of a posterior with ``chain`` and ``draw`` dimensions.

        A variable is kept when its dimensions beyond the sample's are at most one labelled
        coordinate of text (a family, task or level grouping); a fitted run's parameters
        (a ``run`` dimension, or an unlabelled one) are left out.
        """
        arrays: dict[str, np.ndarray] = {}
        levels: dict[str, tuple[str, tuple[str, ...]]] = {}
        for name, variable in posterior.data_vars.items():
            if tuple(variable.dims[:2]) != SAMPLE_DIMS or variable.ndim > 3:
                continue
            values = variable.to_numpy()
            if variable.ndim == 2:
                arrays[str(name)] = values.reshape(-1)
                continue
            dim = str(variable.dims[2])
            if dim == "run" or dim not in posterior.coords or posterior[dim].dtype.kind not in "OUS":
                continue
            arrays[str(name)] = values.reshape(-1, values.shape[2])
            levels[str(name)] = (dim, tuple(str(label) for label in posterior[dim].to_numpy()))
        return cls(arrays, levels)

    def to_arrays(self, prefix: str = "draws/") -> dict[str, np.ndarray]:
        """The draws as named arrays (``numpy.savez``), the labels as arrays of text beside them."""
        out = {f"{prefix}{name}": np.asarray(values) for name, values in self.arrays.items()}
        for name, (dim, labels) in self.levels.items():
            out[f"{prefix}{name}@{dim}"] = np.array(labels, dtype=str)
        return out

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], prefix: str = "draws/") -> PopulationDraws:
        """Inverse of :meth:`to_arrays` (other names in ``arrays`` are ignored)."""
        values: dict[str, np.ndarray] = {}
        levels: dict[str, tuple[str, tuple[str, ...]]] = {}
        for key, array in arrays.items():
            if not key.startswith(prefix):
                continue
            name = key[len(prefix) :]
            if "@" in name:
                variable, dim = name.split("@", 1)
                levels[variable] = (dim, tuple(str(label) for label in array))
            else:
                values[name] = np.asarray(array)
        return cls(values, levels)
