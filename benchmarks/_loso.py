"""The leave-one-source-out populations every backtest shares, fitted once and cached on disk.

``python benchmarks/_loso.py`` fits what is missing (resumable: each source's population is saved
as soon as it is fitted) into :data:`CACHE`; the backtests load them from there.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: Where the populations live between runs (git-ignored: 24 files of about 8 MiB).
CACHE = HERE / "_scratch" / "loso_populations"
#: The shipped population's sampler settings (``bayesgrpo.model.datasets.POPULATION_FIT``, its
#: seed aside): each held-out population is fitted the way the one users get was.
FIT: dict[str, Any] = {"draws": 500, "thin": 8, "tune": 1000, "chains": 2}


def loso_populations(table: Any, cache: Path = CACHE, seed: int = 0) -> dict[str, Any]:
    """``run_id -> population fitted without any run of its source`` (cached in ``cache``)."""
    from bayesgrpo.evaluate.backtest import leave_one_source_out_populations

    return leave_one_source_out_populations(
        table, fit_kwargs=FIT, random_seed=seed, model_kwargs={"pooling": "partial"}, cache_dir=cache
    )


def main() -> None:
    """Fit (or load) every leave-one-source-out population of the bundled runs."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    from bayesgrpo.model.datasets import load_bundled

    populations = loso_populations(load_bundled(warn=False), args.cache)
    print(f"{len({id(m) for m in populations.values()})} populations in {args.cache}")


if __name__ == "__main__":
    main()
