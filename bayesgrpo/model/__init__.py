"""Layer 2, curves and the population model: curve families, the PyMC graph and its fit, the
Laplace conditioning of one run on a prior, predictions and the curve draws they return.

Imports only ``bayesgrpo.logs`` and ``bayesgrpo.errors`` below it: see ``docs/ARCHITECTURE.md``.
"""
