"""Layer 1, logs in: readers of every supported log format, writers of the same formats, and the
runs table (:class:`~bayesgrpo.logs.table.RunsTable`) with its read report.

Imports nothing above it: see ``docs/ARCHITECTURE.md``.
"""
