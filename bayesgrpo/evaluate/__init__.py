"""Backtests of forecasts and stopping rules on real runs, and the baselines they are measured against.

``bayesgrpo.evaluate.baselines`` holds the peers of DESIGN.md section 5: per-run forecasts
(persistence, least squares of the exponential saturation law, the ScaleRL sigmoid, a Domhan et
al. 2015-style MCMC ensemble) and the stopping rules in use today (fixed fraction, patience,
Optuna-style median pruning). Importing this package imports nothing heavy.
"""
