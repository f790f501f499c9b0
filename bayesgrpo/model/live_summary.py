"""A saved model's live summary: what a live update needs, in one small numpy file beside it.

A live update (``bayesgrpo.questions.live``) reads three things of a saved population: its
configuration, its fit data (``ModelData``) and its group-level posterior draws
(:class:`~bayesgrpo.model.population_draws.PopulationDraws`), never the fitted runs' own
parameters. Reading the whole netCDF file takes h5py, xarray and
0.50 s for the shipped population; the summary, a ``.npz`` archive written next to it by
``RewardModel.save(path, live_summary=True)``, is read by numpy alone in 0.024 s
(``benchmarks/live_first_answer.py``). It records the SHA-256 of the file it summarises and is
used only while that file is unchanged; ``RewardModel.load`` then reads the posterior itself the
first time something asks for it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bayesgrpo._files import atomic_path
from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.data import ModelData
from bayesgrpo.model.population_draws import PopulationDraws

logger = logging.getLogger(__name__)

#: Bumped when the summary's layout changes; a summary of another format is not read.
LIVE_SUMMARY_FORMAT = 1

_DATA = "data/"
_DRAWS = "draws/"


@dataclass(frozen=True)
class LiveSummary:
    """What :func:`read_live_summary` reads.

    Attributes
    ----------
    attrs : dict
        The saved posterior's ``bayesgrpo_*`` attributes (configuration, its hash, version,
        diagnostics), as ``RewardModel.save`` wrote them.
    data : ModelData
    population_draws : PopulationDraws
    """

    attrs: dict[str, Any]
    data: ModelData
    population_draws: PopulationDraws


def live_summary_path(model_path: str | Path) -> Path:
    """The summary of a saved model: ``population.nc`` -> ``population.live.npz``."""
    return Path(model_path).with_suffix(".live.npz")


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def write_live_summary(
    model_path: Path, attrs: Mapping[str, Any], data: ModelData, draws: PopulationDraws
) -> Path:
    """Write the summary of the saved model at ``model_path`` (written first: its hash is recorded).

    Parameters
    ----------
    model_path : Path
        The file ``RewardModel.save`` wrote.
    attrs : mapping
        Its posterior's ``bayesgrpo_*`` attributes (text).
    data : ModelData
    draws : PopulationDraws

    Returns
    -------
    Path
        The summary's path (:func:`live_summary_path`).
    """
    data_arrays, data_attrs = data.to_arrays()
    header = {
        "format": LIVE_SUMMARY_FORMAT,
        "source_sha256": file_sha256(model_path),
        "attrs": dict(attrs),
        "data_attrs": data_attrs,
    }
    arrays = {
        "header": np.array(json.dumps(header, sort_keys=True, default=float)),
        **{f"{_DATA}{name}": values for name, values in data_arrays.items()},
        **draws.to_arrays(_DRAWS),
    }
    path = live_summary_path(model_path)
    with atomic_path(path) as partial, partial.open("wb") as file:  # savez would add a suffix to a path
        np.savez(file, allow_pickle=False, **arrays)
    return path


def read_live_summary(model_path: Path) -> LiveSummary | None:
    """The summary of the saved model at ``model_path``; None when there is none, or it was
    written for another file or in another format (the caller then reads the model itself).
    """
    path = live_summary_path(model_path)
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
        header = json.loads(str(arrays.pop("header")))
        if header.get("format") != LIVE_SUMMARY_FORMAT:
            logger.info(
                "ignoring the live summary %s: format %s, not %s",
                path,
                header.get("format"),
                LIVE_SUMMARY_FORMAT,
            )
            return None
        if header.get("source_sha256") != file_sha256(model_path):
            logger.info("ignoring the live summary %s: %s changed after it was written", path, model_path)
            return None
        data = ModelData.from_arrays(
            {name[len(_DATA) :]: values for name, values in arrays.items() if name.startswith(_DATA)},
            header["data_attrs"],
        )
        return LiveSummary(dict(header["attrs"]), data, PopulationDraws.from_arrays(arrays, _DRAWS))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, BayesGRPOError) as error:
        logger.info("ignoring the live summary %s, which could not be read: %s", path, error)
        return None
