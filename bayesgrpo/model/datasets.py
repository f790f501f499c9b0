"""The real runs bundled with bayesgrpo, loaded in one call.

``data/`` holds 60 real RL fine-tuning runs of LLMs (verl TensorBoard files and console logs,
TRL/Unsloth tables) with a manifest, ``data/runs.csv``, that keeps each run's provenance
(source repository, commit, path) and licence. See ``data/README.md``.
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bayesgrpo.errors import BayesGRPOError, ModelConfigError
from bayesgrpo.logs.readers import load_runs
from bayesgrpo.logs.table import RunsTable
from bayesgrpo.model.reward_model import RewardModel

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
    candidates.append(Path(__file__).resolve().parents[2] / "data")
    for folder in candidates:
        if (folder / "runs.csv").is_file():
            return folder
    raise BayesGRPOError(
        f"bundled data not found (looked in {[str(c) for c in candidates]}); install bayesgrpo from its "
        f"repository (pip install -e .) or set {DATA_ENV} to the folder holding runs.csv"
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
    >>> from bayesgrpo.model.datasets import load_bundled
    >>> table = load_bundled()  # doctest: +SKIP
    >>> table.summary()[["run_id", "family", "size_b", "n_points"]]  # doctest: +SKIP
    """
    return load_runs(data_dir(), reward=reward, warn=warn)


#: The population fitted on every bundled run, shipped with the package: the prior a live update,
#: the TRL callback and ``bayesgrpo watch`` use when they are given no population of their own.
POPULATION_FILE = Path(__file__).resolve().parents[1] / "_data" / "bundled_population.nc"

#: How the shipped population is fitted (``python -m bayesgrpo.model.datasets --population``): the
#: default sampler and its 4,000 iterations a chain after the warm-up, every eighth kept (a default
#: fit keeps every fourth), so the file holds 2 x 500 draws, as small as it was and as quick to load.
POPULATION_FIT: dict[str, Any] = {"draws": 500, "thin": 8, "tune": 1000, "chains": 2, "random_seed": 20261121}


@functools.cache
def _load_population(path: str, mtime_ns: int) -> RewardModel:
    return RewardModel.load(path)


def bundled_population(path: str | Path | None = None) -> RewardModel:
    """The pooled model fitted on all bundled real runs, as shipped with the package.

    It is the default prior of a run in progress (``LiveForecaster``, the TRL callback,
    ``bayesgrpo watch``): a new run is placed in this population by its family, task, size and
    batch, then conditioned on its own points. Loaded once per process.

    Parameters
    ----------
    path : str or Path, optional
        Another file written by :func:`fit_bundled_population` (default :data:`POPULATION_FILE`).

    Returns
    -------
    RewardModel
        Fitted with ``pooling="partial"`` on the 60 bundled runs, whole.

    Raises
    ------
    BayesGRPOError
        When the file is missing, or was written by a version of bayesgrpo whose model format
        differs (``python -m bayesgrpo.model.datasets --population`` rebuilds it).
    """
    file = Path(path) if path is not None else POPULATION_FILE
    if not file.is_file():
        raise BayesGRPOError(
            f"no fitted population at {file}; build it with `python -m bayesgrpo.model.datasets "
            "--population` (about a minute) or pass a model of your own (RewardModel.save)"
        )
    try:
        return _load_population(str(file), file.stat().st_mtime_ns)
    except ModelConfigError as exc:
        raise BayesGRPOError(
            f"the shipped population at {file} does not fit this bayesgrpo ({exc}); rebuild it with `python "
            "-m bayesgrpo.model.datasets --population`"
        ) from exc


def fit_bundled_population(path: str | Path = POPULATION_FILE, *, progressbar: bool = True) -> Path:
    """Fit the default pooled model on every bundled run, whole, and save it to ``path``, with
    its live summary beside it (``model.live_summary``: what a live update reads, in milliseconds).

    Uses :data:`POPULATION_FIT` (a fixed seed), so the shipped file is reproducible.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    model = RewardModel(pooling="partial").fit(
        load_bundled(warn=False), progressbar=progressbar, **POPULATION_FIT
    )
    return model.save(path, live_summary=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bayesgrpo.model.datasets --population [PATH]``: rebuild the shipped population;
    ``--live-summary [PATH]``: write the live summary of a saved population without refitting it.
    """
    parser = argparse.ArgumentParser(prog="python -m bayesgrpo.model.datasets", description=main.__doc__)
    task = parser.add_mutually_exclusive_group(required=True)
    task.add_argument(
        "--population",
        nargs="?",
        const=str(POPULATION_FILE),
        metavar="PATH",
        help=f"fit the bundled runs, write the population and its live summary (default {POPULATION_FILE})",
    )
    task.add_argument(
        "--live-summary",
        nargs="?",
        const=str(POPULATION_FILE),
        metavar="PATH",
        help="write the live summary of a population saved without one (RewardModel.add_live_summary)",
    )
    args = parser.parse_args(argv)
    if args.live_summary is not None:
        summary = RewardModel.add_live_summary(args.live_summary)
        print(f"wrote {summary} ({summary.stat().st_size / 2**20:.2f} MiB)")
        return 0
    written = fit_bundled_population(args.population)
    print(f"wrote {written} ({written.stat().st_size / 2**20:.1f} MiB) and its live summary")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "DATA_ENV",
    "POPULATION_FILE",
    "bundled_population",
    "data_dir",
    "fit_bundled_population",
    "load_bundled",
]
