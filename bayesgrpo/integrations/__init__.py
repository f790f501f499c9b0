"""Hooks into training loops (TRL / transformers, verl).

Each submodule imports its framework when it is imported itself; ``import bayesgrpo`` never
imports transformers, TRL, torch or verl.
"""
