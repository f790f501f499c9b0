"""The real runs bundled with bayesgrpo, loaded in one call.

``data/`` holds 60 real RL fine-tuning runs of LLMs (verl TensorBoard files and console logs,
TRL/Unsloth tables) with a manifest, ``data/runs.csv``, that keeps each run's provenance
(source repository, commit, path) and licence. See ``data/README.md``.
"""

from __future__ import annotations

import os
from pathlib import Path

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.table import RunsTable

#: Environment variable that points at another copy of the bundled data folder.
DATA_ENV = "BAYESGRPO_DATA"


def data_dir() -> Path:
    """The folder of the bundled runs: ``$BAYESGRPO_DATA`` or the ``data/`` beside the package.

    Raises
    ------
    BayesGRPOError
        When no folder with a ``runs.csv`` is found (a wheel installed without the data).
    """
    candidates = [Path(os.environ[DATA_ENV])] if os.environ.get(DATA_ENV) else []
    candidates.append(Path(__file__).resolve().parent.parent / "data")
    for folder in candidates:
        if (folder / "runs.csv").is_file():
            return folder
    raise BayesGRPOError(
        f"bundled data not found (looked in {[str(c) for c in candidates]}); install bayesgrpo from "
        f"its repository (pip install -e .) or set {DATA_ENV} to the folder holding runs.csv"
    )


def load_bundled(reward: str | None = None, warn: bool = True) -> RunsTable:
    """Load the bundled real runs as one runs table, with the manifest's metadata.

    Parameters
    ----------
    reward : str, optional
        Forecast another metric than each run's train reward (``runs.csv``'s ``reward_key``).
    warn : bool
        Warn if anything had to be repaired or dropped while reading.

    Returns
    -------
    RunsTable
        60 runs; ``runs`` carries family, size_b, algorithm, group_size, task, licence and
        source of each.

    Examples
    --------
    >>> from bayesgrpo.datasets import load_bundled
    >>> table = load_bundled()  # doctest: +SKIP
    >>> table.summary()[["run_id", "family", "size_b", "n_points"]]  # doctest: +SKIP
    """
    from bayesgrpo.readers import load_runs

    return load_runs(data_dir(), reward=reward, warn=warn)


__all__ = ["DATA_ENV", "data_dir", "load_bundled"]
