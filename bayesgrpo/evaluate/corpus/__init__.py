"""The benchmark corpus: public reward logs pinned by commit and blob, split by source.

Defaults are chosen, and claims are scored, on runs from many independent public sources
(``benchmarks/corpus/``). This package holds what the builder and the benchmarks share:

- :mod:`~bayesgrpo.evaluate.corpus.manifest`: the manifest's columns, reading and checking it;
- :mod:`~bayesgrpo.evaluate.corpus.build`: each run's file taken out of a git mirror at its pinned
  commit, read by :func:`bayesgrpo.load_runs`, its points checked against the manifest's checksum;
- :mod:`~bayesgrpo.evaluate.corpus.splits`: sources to 5 folds and a sealed fold by a hash of their
  name, run weights (pooled with a per-source cap, or each source equal) and a bootstrap over
  sources;
- :mod:`~bayesgrpo.evaluate.corpus.shapes`: a run's shape (rising, flat, peak then fall,
  collapse) and length class, for the data card.
"""

from __future__ import annotations

from bayesgrpo.evaluate.corpus.build import CorpusBuild, build_corpus, load_built, points_checksum
from bayesgrpo.evaluate.corpus.manifest import MANIFEST_COLUMNS, read_manifest
from bayesgrpo.evaluate.corpus.shapes import curve_shape, length_class
from bayesgrpo.evaluate.corpus.splits import (
    SEALED,
    run_weights,
    source_bootstrap,
    source_fold,
    weighted_median,
)

__all__ = [
    "MANIFEST_COLUMNS",
    "SEALED",
    "CorpusBuild",
    "build_corpus",
    "curve_shape",
    "length_class",
    "load_built",
    "points_checksum",
    "read_manifest",
    "run_weights",
    "source_bootstrap",
    "source_fold",
    "weighted_median",
]
