"""The Ray engine of the fleet (imported only when Ray is asked for).

Each population is shared once, when the engine opens: saved to a temporary file on a local Ray
the engine starts (a driver that owns no stored object outlives a lost raylet:
:meth:`RayEngine._share`), else put in the object store (``ray.put``); a task gets a batch of items
and the files or references. A worker process keeps one
:class:`~bayesgrpo.questions.live.LiveForecaster` per population it has seen (:data:`_FORECASTERS`),
so a population is deserialised and its prior's draws made once per worker, not per run, task or
``map``. A batch whose worker process dies is sent again by the driver (up to ``max_retries`` times)
and counted, so no item is lost and none is answered twice into the results.

Ctrl-C while a local Ray this engine starts is coming up or going down is held until it is up (or
down), then raised: an interrupt inside ``ray.init`` or ``ray.shutdown`` leaves Ray half made (seen:
drivers interrupted inside ``ray.init`` died of SIGSEGV at exit, or left Ray processes up for a minute).

When Ray itself is lost under the work (the local raylet, which dies with its dashboard agent; the
cluster), or a batch loses its worker more than ``max_retries`` times, :meth:`RayEngine.map` raises
:class:`~bayesgrpo.interfaces.fleet.work.EngineLostError` with the results finished so far: the
fleet keeps their rows. Ray's own messages to the driver (``(raylet) A worker died...``) go to
stderr, never into what a verb writes to stdout (:func:`ray_messages_to_stderr`).
"""

from __future__ import annotations

import atexit
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

try:
    import ray
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "the fleet on Ray (workers=N or address=..., --workers, --address) needs Ray: install the extra "
        "with `pip install 'bayesgrpo[ray]'`"
    ) from exc

from bayesgrpo.errors import BayesGRPOError, EngineLostError
from bayesgrpo.interfaces.fleet.work import Population, WorkFunction, batches, progress_bar
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.questions.live import LiveForecaster

#: What a batch meets when its worker process dies (killed, out of memory, a remote node gone):
#: it is sent again.
WORKER_LOST = (
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
    ray.exceptions.OutOfMemoryError,
)
#: What the driver meets when Ray itself is gone (its local raylet, dead with its dashboard agent;
#: the cluster): nothing more can run. Any other ``RayError`` but a task's own error
#: (``RayTaskError``) is taken as this too.
RAY_LOST = (ray.exceptions.RayError, ConnectionError)
#: What :class:`EngineLostError` says when Ray itself is gone from under the work.
RAY_GONE = "Ray was lost under the work (its node, raylet or agent)"
#: Per worker process: the live forecaster of each population (by object reference), built once.
_FORECASTERS: dict[str, LiveForecaster] = {}
#: The object references of an engine whose Ray was lost, kept for the life of the process: freeing
#: one asks the dead raylet, and Ray's core worker then ends the process at once (exit status 1, no
#: message; seen after a killed dashboard agent), before the rows finished are written.
_KEPT_AFTER_LOSS: list[Any] = []


def ray_messages_to_stderr() -> None:
    """Send the messages Ray prints in the driver of its own accord to stderr.

    Ray (2.x) prints the error messages its cluster pushes to the driver (``(raylet) A worker died
    or was killed...``, ``(raylet) The node ... has been marked dead``) from a thread, through
    ``ray._private.worker.print_to_stdstream``, as stdout, whatever ``log_to_driver`` says: they
    broke ``--json``. That function is wrapped (once) to mark them as stderr; a Ray without it is
    left as it is (the slow-lane test of a killed worker's message then fails).
    """
    module = getattr(getattr(ray, "_private", None), "worker", None)
    original = getattr(module, "print_to_stdstream", None)
    if original is None or getattr(original, "bayesgrpo_to_stderr", False):
        return

    def to_stderr(data: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if data.get("pid") == "raylet":  # Ray's own messages; a task's printed lines keep their stream
            data = {**data, "is_err": True}
        return original(data, *args, **kwargs)

    to_stderr.bayesgrpo_to_stderr = True  # type: ignore[attr-defined]
    module.print_to_stdstream = to_stderr  # type: ignore[union-attr]


ray_messages_to_stderr()


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold SIGINT (Ctrl-C) inside the block and deliver it when the block ends.

    The handler in place before the block gets the signal then (Python's default raises
    :class:`KeyboardInterrupt`); one that ignores SIGINT still ignores it. Outside the main thread,
    where Python runs no signal handler, the block runs as it is. Ray holds interrupts the same way
    around a task's argument deserialisation (``ray._private.utils.DeferSigint``, not public).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        # restore even when the block raised; a handler set outside Python (None) becomes the default
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
    if received and callable(previous):
        previous(signal.SIGINT, None)
    elif received and previous == signal.SIG_DFL:
        raise KeyboardInterrupt


@ray.remote
def run_batch(
    work: WorkFunction,
    items: Sequence[Any],
    references: list[Any],
    specs: list[tuple[int, int | None]],
    settings: Any,
) -> list[Any]:
    """``work`` over one batch in a worker. ``references`` are the populations' object references,
    or the files they were saved to (inside a list, so Ray does not resolve them before the call:
    the worker keys its forecasters by them); ``specs`` are each forecaster's draws and seed.
    """

    def forecaster_of(index: int) -> LiveForecaster:
        reference = references[index]
        key = reference if isinstance(reference, str) else reference.hex()
        if key not in _FORECASTERS:
            n_draws, seed = specs[index]
            model = RewardModel.load(reference) if isinstance(reference, str) else ray.get(reference)
            _FORECASTERS[key] = LiveForecaster(model, n_draws=n_draws, random_seed=seed)
        return _FORECASTERS[key]

    return [work(item, forecaster_of, settings) for item in items]


class RayEngine:
    """Maps work on Ray: a local Ray of ``workers`` CPUs, or the cluster at ``address``.

    A Ray already running in this process (``ray.init`` called by the user) is used as it is and
    left running; one the engine starts is shut down by :meth:`close`.
    """

    name = "ray"

    def __init__(
        self,
        populations: Sequence[Population],
        *,
        workers: int | None = None,
        address: str | None = None,
        batch_size: int | None = None,
        max_retries: int = 3,
    ) -> None:
        self.retried_tasks = 0
        self._lost = False
        self._local = False
        self._folder: str | None = None
        self._batch_size = batch_size
        self._max_retries = max_retries
        self._started = not ray.is_initialized()
        try:
            with interrupts_held():  # Ctrl-C raised once Ray is up, then shut down below
                if self._started:
                    ray.init(
                        address=address,
                        num_cpus=workers if address is None else None,
                        include_dashboard=False,
                        log_to_driver=False,
                        configure_logging=False,
                    )
                self._workers = workers or max(1, int(ray.available_resources().get("CPU", 1)))
                self._local = self._started and address is None
                self._references = self._share(populations)  # once, whatever the maps
            # what travels with every task: the references and each forecaster's draws and seed
            self._specs = [(p.n_draws, p.random_seed) for p in populations]
        except RAY_LOST as exc:
            self.close()
            where = f"the Ray cluster at {address}" if address else "a local Ray"
            raise BayesGRPOError(f"could not start or reach {where}: {_first_line(exc)}") from exc
        except BaseException:
            self.close()
            raise

    def _share(self, populations: Sequence[Population]) -> list[Any]:
        """What each task gets of the populations: on a local Ray this engine started, the files
        they are saved to in a temporary folder (each worker loads them once); else object
        references (``ray.put``).

        An object the driver put in the store is one Ray's core worker tries to recover when its
        node dies, and that attempt ends the driver (status 1, no message: a killed dashboard agent
        takes the raylet with it): the files leave the driver nothing to recover, so a lost Ray is
        said with the rows finished. A cluster's nodes do not share this machine's files.
        """
        if not self._local:
            return [ray.put(p.model) for p in populations]
        self._folder = tempfile.mkdtemp(prefix="bayesgrpo-ray-")
        return [
            str(p.model.save(Path(self._folder) / f"population_{i}.nc")) for i, p in enumerate(populations)
        ]

    def map(
        self, work: WorkFunction, items: Sequence[Any], settings: Any, *, progress: str | None = None
    ) -> list[Any]:
        """``work`` over ``items`` in batches on Ray; the results in the items' order."""
        chunks = batches(len(items), self._workers, self._batch_size)
        task = run_batch.options(max_retries=0)  # retried here, not by Ray: counted

        def submit(index: int) -> Any:
            return task.remote(
                work, [items[j] for j in chunks[index]], self._references, self._specs, settings
            )

        futures = {submit(i): i for i in range(len(chunks))}
        submitted = list(futures)  # every task's reference, retries too
        tries = dict.fromkeys(range(len(chunks)), 1)
        results: dict[int, list[Any]] = {}
        bar = progress_bar(len(items), progress is not None, progress or "")
        pending = list(futures)

        def lost(what: str, exc: BaseException, gone: bool = True) -> EngineLostError:
            if gone:  # Ray itself (not a worker): nothing more is asked of it
                self._lost = True
                _KEPT_AFTER_LOSS.extend([*submitted, *self._references])
            finished = {j: r for i, found in results.items() for j, r in zip(chunks[i], found, strict=True)}
            return EngineLostError(
                f"{what} ({type(exc).__name__}: {_first_line(exc)}); {len(finished)} of {len(items)} "
                "items were answered before",
                finished,
            )

        try:
            while pending:
                try:
                    done, pending = ray.wait(pending, num_returns=1)
                except RAY_LOST as exc:
                    raise lost(RAY_GONE, exc) from exc
                for future in done:
                    index = futures.pop(future)
                    try:
                        results[index] = ray.get(future)
                    except ray.exceptions.RayTaskError:
                        raise  # the work's own error: a bug, not a lost machine
                    except WORKER_LOST as exc:
                        if self._local and isinstance(exc, ray.exceptions.NodeDiedError):  # the one node
                            raise lost(RAY_GONE, exc) from exc
                        if tries[index] > self._max_retries:
                            raise lost(
                                f"a batch of {len(chunks[index])} items lost its worker {tries[index]} times",
                                exc,
                                gone=False,
                            ) from exc
                        tries[index] += 1
                        self.retried_tasks += 1
                        again = submit(index)
                        futures[again] = index
                        submitted.append(again)
                        pending.append(again)
                        continue
                    except RAY_LOST as exc:  # the local raylet (dead with its agent), the cluster
                        raise lost(RAY_GONE, exc) from exc
                    bar.update(len(chunks[index]))
        except BaseException:  # Ctrl-C or a failed batch: nothing is left running
            if not self._started and not self._lost:  # a Ray the user runs: ask it to drop our batches
                for future in pending:
                    try:
                        ray.cancel(future)
                    except RAY_LOST:  # that Ray is gone: nothing runs there any more
                        break
            # a Ray this engine started is shut down by close(), workers and all: force-cancelling
            # here as well races with batches completing (Ray aborts the driver: "Tried to
            # complete task that was not pending")
            raise
        finally:
            bar.close()
        return [result for i in range(len(chunks)) for result in results[i]]

    def close(self) -> None:
        """Shut down the Ray this engine started (a Ray the user started is left running).

        After Ray was lost under the work nothing is asked of it: its driver's shutdown asks the
        dead raylet, and Ray ends the process there (exit status 1, no message). Ray's own
        shutdown at the interpreter's exit is dropped too; the processes of a local Ray share the
        fate of the process that started them.
        """
        started, self._started = self._started, False
        folder, self._folder = self._folder, None
        try:
            if self._lost:
                atexit.unregister(ray.shutdown)
                return
            if started and ray.is_initialized():
                with interrupts_held():  # a second Ctrl-C waits for the shutdown under way
                    ray.shutdown()
        finally:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)

    def __enter__(self) -> RayEngine:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def ray_was_lost() -> bool:
    """Whether an engine of this process lost its Ray under the work. Ray's core worker then ends
    the process with status 1 as the interpreter shuts down: the ``bayesgrpo`` command ends at
    once with its own status instead, once its output is written.
    """
    return bool(_KEPT_AFTER_LOSS)


def _first_line(exc: BaseException) -> str:
    """The first line of an error's text (Ray's run to pages of advice)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
