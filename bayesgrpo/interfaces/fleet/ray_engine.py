"""The Ray engine of :func:`bayesgrpo.interfaces.fleet.assess` (imported only when Ray is asked for).

The population goes into the object store once (``ray.put``); each task gets a batch of sources
and a reference to it. A worker process keeps one :class:`~bayesgrpo.questions.live.LiveForecaster`
per population it has seen (:data:`_FORECASTERS`), so the population is deserialised and the
prior's draws made once per worker, not per run or per task. A batch whose worker process dies
is sent again by the driver (up to ``max_retries`` times) and counted, so no run is lost and none
is assessed twice into the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    import ray
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "assess(..., workers=N) or address=... needs Ray: install the extra with "
        "`pip install 'bayesgrpo[ray]'`"
    ) from exc

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.interfaces.fleet.work import FleetSettings, assess_source, batches, progress_bar
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.questions.live import LiveForecaster

#: What a batch meets when its worker process dies (killed, out of memory, its node gone).
WORKER_LOST = (
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
    ray.exceptions.LocalRayletDiedError,
)
#: Per worker process: the live forecaster of each population (by object reference), built once.
_FORECASTERS: dict[str, LiveForecaster] = {}


@ray.remote
def assess_batch(
    sources: Sequence[Any], population: list[Any], settings: FleetSettings
) -> list[dict[str, Any]]:
    """Assess one batch of sources in a worker (``population`` is ``[ObjectRef]``: not resolved
    by Ray before the call, so the worker can keep its forecaster by the reference).
    """
    key = population[0].hex()
    if key not in _FORECASTERS:
        model = ray.get(population[0])
        _FORECASTERS[key] = LiveForecaster(model, n_draws=settings.n_draws, random_seed=settings.random_seed)
    forecaster = _FORECASTERS[key]
    return [row for source in sources for row in assess_source(source, forecaster, settings)]


def run(
    sources: Sequence[Any],
    model: RewardModel,
    settings: FleetSettings,
    workers: int | None,
    address: str | None,
    batch_size: int | None,
    max_retries: int,
    progress: bool,
) -> tuple[list[dict[str, Any]], int]:
    """Assess ``sources`` on Ray; the rows in source order and the number of retried tasks."""
    started = not ray.is_initialized()
    if started:
        ray.init(
            address=address,
            num_cpus=workers if address is None else None,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    pending: list[Any] = []
    try:
        capacity = workers or max(1, int(ray.available_resources().get("CPU", 1)))
        chunks = batches(len(sources), capacity, batch_size)
        reference = ray.put(model)
        # retried here, not by Ray: a batch whose worker died is sent again, and counted
        task = assess_batch.options(max_retries=0)

        def submit(index: int) -> Any:
            return task.remote([sources[j] for j in chunks[index]], [reference], settings)

        futures = {submit(i): i for i in range(len(chunks))}
        tries = dict.fromkeys(range(len(chunks)), 1)
        results: dict[int, list[dict[str, Any]]] = {}
        retried = 0
        bar = progress_bar(len(sources), progress)
        pending = list(futures)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for future in done:
                index = futures.pop(future)
                try:
                    results[index] = ray.get(future)
                except WORKER_LOST as exc:
                    if tries[index] > max_retries:
                        raise BayesGRPOError(
                            f"a batch of {len(chunks[index])} sources lost its worker "
                            f"{tries[index]} times: {exc}"
                        ) from exc
                    tries[index] += 1
                    retried += 1
                    again = submit(index)
                    futures[again] = index
                    pending.append(again)
                    continue
                bar.update(len(chunks[index]))
        bar.close()
    except KeyboardInterrupt:
        for future in pending:
            ray.cancel(future, force=True)
        raise
    finally:
        if started:
            ray.shutdown()
    return [row for i in range(len(chunks)) for row in results[i]], retried
