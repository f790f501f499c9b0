"""Layer 3, questions asked of a posterior: the live update of a run in progress, stopping rules,
transfer to runs not yet trained, diagnostics of misbehaving runs, history and shrinkage.

Imports ``bayesgrpo.model`` and ``bayesgrpo.logs`` below it: see ``docs/ARCHITECTURE.md``.
"""
