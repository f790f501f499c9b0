"""Ctrl-C in the ``bayesgrpo`` command: one line on stderr and exit status 130, whatever the verb.

:func:`noting_interrupts` wraps a verb: SIGINT raises :class:`KeyboardInterrupt` as Python's own
handler does (so a Ray engine shuts down, a save in progress leaves its old file), and is noted.
Some libraries swallow the interrupt (PyMC's samplers end a fit early and return the draws so far;
``watch`` ends on Ctrl-C): :func:`check_interrupted` raises it again after such a call, so the verb
neither goes on with half an answer nor ends as if nothing happened.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: SIGINTs received inside :func:`noting_interrupts` (the innermost block's count).
_received: list[int] = []


@contextmanager
def noting_interrupts() -> Iterator[None]:
    """SIGINT noted and raised as :class:`KeyboardInterrupt` inside the block (main thread only;
    elsewhere Python runs no signal handler and the block runs as it is).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def note(signum: int, frame: FrameType | None) -> None:
        _received.append(signum)
        raise KeyboardInterrupt

    _received.clear()
    previous = signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


def check_interrupted() -> None:
    """Raise :class:`KeyboardInterrupt` if Ctrl-C came inside :func:`noting_interrupts` and was
    swallowed on the way.
    """
    if _received:
        raise KeyboardInterrupt
