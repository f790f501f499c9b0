"""Writers of training logs in the outside world's formats.

They write what the readers read (verl console, TRL ``trainer_state.json`` and console, W&B
CSV exports, TensorBoard event files), so that readers are tested by round trips and by
corrupting valid files, benchmarks can make large logs, and the live watcher can be tested by
a process that appends to a log. One module per format.
"""
