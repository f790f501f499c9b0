"""The watcher: every followed run's live forecast and stop advice, one :class:`RunStatus` a run."""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo.errors import BayesGRPOError, EngineLostError
from bayesgrpo.interfaces.fleet import Engine, Population, open_engine
from bayesgrpo.interfaces.text import NO_HORIZON
from bayesgrpo.interfaces.watch.follow import LogFollower, ReadSettings, WatchTarget, short_error
from bayesgrpo.logs.readers.load import MLFLOW_SCHEME
from bayesgrpo.logs.table import RunsTable
from bayesgrpo.model.draws import DEFAULT_BAND, band_draws, check_band
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.questions.live import RANGE_SOURCE_PHRASES, LiveForecaster, live_forecaster, resolve_population
from bayesgrpo.questions.stopping import prob_gain_below

if TYPE_CHECKING:
    from bayesgrpo.questions.stopping import StoppingRule

logger = logging.getLogger(__name__)


INTERVAL = 0.9
#: Default number of last logged rewards averaged into the "current reward".
SMOOTH = 10


# --------------------------------------------------------------------------------------------
# Status of a run
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunStatus:
    """Where one run stands at one poll: what the watcher shows in one row.

    Attributes
    ----------
    run_id, source : str
    state : {"ok", "waiting", "no_horizon", "error"}
        ``ok``: forecast and advice below; ``waiting``: nothing readable yet; ``no_horizon``:
        read, but no horizon (pass one, or a log stating its total steps); ``error``: see reason.
    n_steps : int
        Logged steps with a reward so far.
    step : float or None
        The last of them.
    reward_now : float or None
        Mean of the last ``smooth`` logged rewards.
    horizon_step : float or None
    final_median, final_lower, final_upper : float or None
        Forecast reward at the horizon: median and 90% interval of ``band``.
    band : {"predictive", "curve"}
        Which band ``final_*`` is: of a logged reward at the horizon (noise included, default)
        or of the expected curve there (:data:`bayesgrpo.questions.live.BANDS`).
    p_plateau : float or None
        ``P(gain from now to the horizon < eps)``.
    decision : {"stop", "continue", "undecided"} or None
        The rule's advice.
    reason : str
        The rule's one-line reason, or why there is no advice.
    updated : bool
        Recomputed at this poll (False: the run's data did not change; cached).
    seconds : float
        Time the update took (0 when cached).
    pareto_k : float or None
        Reliability of the live update's importance weights (above 0.7 the update took its
        MCMC fallback).
    method : str or None
        The path that gave the live update's draws (``importance`` or ``ensemble_mcmc``).
    range_lower, range_upper : float or None
        The reward range a relative eps is a share of.
    range_source : {"stated", "score", "estimated"} or None
        Whether that range is the run's stated one, 0 .. 1 for a run read as a score on it, or
        estimated from its logged points (:data:`bayesgrpo.questions.live.RANGE_SOURCE_PHRASES`).
    repairs : str or None
        What reading the run's log repaired or dropped (``ReadReport.repair_line``), or None.
    """

    run_id: str
    source: str
    state: str
    n_steps: int = 0
    step: float | None = None
    reward_now: float | None = None
    horizon_step: float | None = None
    final_median: float | None = None
    final_lower: float | None = None
    final_upper: float | None = None
    p_plateau: float | None = None
    decision: str | None = None
    reason: str = ""
    updated: bool = False
    seconds: float = 0.0
    pareto_k: float | None = None
    method: str | None = None
    band: str = DEFAULT_BAND
    range_lower: float | None = None
    range_upper: float | None = None
    range_source: str | None = None
    repairs: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (NaN as None)."""
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float) and not math.isfinite(value):
                out[key] = None
        return out


def finite_or_none(value: Any) -> float | None:
    """``value`` as a float when finite, else None (JSON has no NaN)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _fingerprint(points: pd.DataFrame) -> tuple[int, int]:
    """Changes whenever a step or reward of the run changes."""
    frame = points[["step", "reward"]]
    return len(frame), int(pd.util.hash_pandas_object(frame, index=False).sum())


# --------------------------------------------------------------------------------------------
# The watcher
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pending:
    """A run's place in a poll: its status to compute (or its cached one) and the notes to add."""

    key: tuple[str, str]
    fingerprint: Any
    item: tuple[RunsTable, float | None, str, str]
    cached: RunStatus | None = None
    failed: str | None = None
    repairs: str | None = None
    restarted: str | None = None

    def finish(self, status: RunStatus) -> RunStatus:
        """``status`` with what the poll adds: a failed last read, a restarted log, the reader's repairs."""
        if self.failed is not None:  # shown from the last good read
            status = replace(status, reason=f"{status.reason} [last read failed: {self.failed}]")
        if self.restarted is not None:  # earlier steps kept or no longer shown: never in silence
            status = replace(status, reason=f"{status.reason} [{self.restarted}]")
        if self.repairs is not None:
            status = replace(
                status, repairs=self.repairs, reason=f"{status.reason} [log repaired: {self.repairs}]"
            )
        return status


@dataclass
class Watcher:
    """Follow logs and forecast every run in them; :meth:`poll` answers, the UI renders.

    Parameters
    ----------
    paths : path or paths
        Log files or folders; they need not exist yet. An ``mlflow:`` source (a tracking server
        or store, ``bayesgrpo.logs.readers.mlflow``) is asked again at every poll.
    rule : StoppingRule
        Gives the advice (``PlateauRule``, ``BudgetRule``, ``TargetRule``).
    population : RewardModel, LiveForecaster, path of a saved model, or None
        The prior of each run; default the population shipped with the package
        (``bayesgrpo.model.datasets.bundled_population()``). Loaded at the first forecast (see
        :func:`live_forecaster`).
    horizon : float, optional
        The step every run is planned to end at; default each run's ``total_steps`` as its log
        states it.
    eps : float
        Gain that counts as nothing in ``P(plateau)``: a share of the run's reward range
        (``relative``) or reward units.
    relative : bool
    smooth : int
        Last logged rewards averaged into the current reward.
    read : ReadSettings
        ``load_runs`` options (format, reward metric, metadata, TRL ``logging_steps``).
    random_seed : int, optional
    band : {"predictive", "curve"}
        The band of the final-reward forecast (default: predictive, of a logged reward).
    workers : int, optional
        Update the runs that changed at a poll on Ray, with this many worker processes (a local
        Ray, started at the first update and kept until :meth:`close`; ``bayesgrpo[ray]``). The
        statuses equal those of the serial watcher.
    address : str, optional
        Update them on the Ray cluster at this address instead.
    """

    paths: str | Path | Sequence[str | Path]
    rule: StoppingRule
    population: Any = None
    horizon: float | None = None
    eps: float = 0.01
    relative: bool = True
    smooth: int = SMOOTH
    read: ReadSettings = field(default_factory=ReadSettings)
    random_seed: int | None = 1
    band: str = DEFAULT_BAND
    workers: int | None = None
    address: str | None = None
    _engine: Engine | None = field(default=None, init=False, repr=False)
    #: What was lost when the Ray engine was (None while it works): later polls run serially.
    _engine_lost: str | None = field(default=None, init=False, repr=False)
    _targets: list[WatchTarget] = field(default_factory=list, init=False, repr=False)
    _live: LiveForecaster | None = field(default=None, init=False, repr=False)
    _cache: dict[tuple[str, str], tuple[Any, RunStatus]] = field(default_factory=dict, init=False, repr=False)
    _names: dict[tuple[str, str], str] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        paths = [self.paths] if isinstance(self.paths, (str, Path)) else list(self.paths)
        if not paths:
            raise BayesGRPOError("watch needs at least one log file or folder")
        self._targets = [
            WatchTarget(p if str(p).startswith(MLFLOW_SCHEME) else Path(p), self.read) for p in paths
        ]
        if self.smooth < 1:
            raise BayesGRPOError(f"smooth must be at least 1 (points averaged); got {self.smooth}")
        check_band(self.band)

    @property
    def followers(self) -> list[LogFollower]:
        """The followers of every target, in the order the targets were given."""
        return [f for target in self._targets for f in target.followers.values()]

    @property
    def live(self) -> LiveForecaster:
        """The live forecaster (the population loaded on first use)."""
        if self._live is None:
            self._live = live_forecaster(self.population, self.random_seed)
        return self._live

    @property
    def status_settings(self) -> StatusSettings:
        """What every run's status is computed with."""
        return StatusSettings(self.rule, self.eps, self.relative, self.smooth, self.band, self.random_seed)

    def poll(self) -> list[RunStatus]:
        """Read what changed, update what needs it, and say where every run stands.

        The runs whose points (or horizon) changed are updated together: one after the other, or
        on Ray with ``workers`` or ``address``.

        Returns
        -------
        list of RunStatus
            One per run (or per followed path with nothing readable yet), in the order of the
            paths given, then of discovery.
        """
        slots: list[RunStatus | _Pending] = []
        for target in self._targets:
            followers = target.refresh()
            if not followers:
                slots.append(
                    RunStatus(
                        run_id=target.path.name,
                        source=str(target.path),
                        state="waiting",
                        reason=target.message or "no log found yet",
                    )
                )
                continue
            for follower in followers:
                follower.poll()
                slots.extend(self._statuses(follower))
        pending = [slot for slot in slots if isinstance(slot, _Pending)]
        computed = self._compute_all([slot.item for slot in pending])
        for slot, status in zip(pending, computed, strict=True):
            self._cache[slot.key] = (slot.fingerprint, status)
        done = iter(computed)
        return [slot.finish(next(done)) if isinstance(slot, _Pending) else slot for slot in slots]

    def _compute_all(self, items: list[tuple[RunsTable, float | None, str, str]]) -> list[RunStatus]:
        """Every changed run's status, serially or on the fleet's engine."""
        settings = self.status_settings
        if not items:
            return []
        if (self.workers is None and self.address is None) or self._engine_lost:
            return [compute_status(item, lambda _: self.live, settings) for item in items]
        if self._engine is None:
            if self.population is not None and not isinstance(self.population, (str, Path, RewardModel)):
                raise BayesGRPOError(
                    "watch on Ray needs a population the workers can load (a RewardModel, a saved "
                    f"model's path, or None for the shipped one); got {type(self.population).__name__}"
                )
            model = resolve_population(self.population)
            spec = Population(model, LiveForecaster.n_draws, self.random_seed)
            self._engine = open_engine([spec], workers=self.workers, address=self.address)
        try:
            return list(self._engine.map(compute_status, items, settings))
        except EngineLostError as lost:
            # the runs updated before the loss keep their status; the others, and every later
            # poll, are updated in this process (a Ray that lost its node is not asked again)
            logger.warning("%s; watch goes on without Ray, updating runs in this process", lost)
            self._engine_lost = str(lost)
            self.close()
            return [
                lost.done[i] if i in lost.done else compute_status(item, lambda _: self.live, settings)
                for i, item in enumerate(items)
            ]

    @property
    def engine_lost(self) -> str | None:
        """What was lost when the Ray engine was lost (None while it works, or serial): the
        watcher then updates its runs in this process.
        """
        return self._engine_lost

    def close(self) -> None:
        """Shut down the Ray engine the watcher started (nothing to do when serial)."""
        if self._engine is not None:
            engine, self._engine = self._engine, None
            try:
                engine.close()
            except EngineLostError as lost:  # already gone
                logger.warning("%s", lost)

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _display_name(self, key: str, run_id: str) -> str:
        if (key, run_id) not in self._names:
            taken = set(self._names.values())
            name, n = run_id, 1
            while name in taken:
                n += 1
                name = f"{run_id}#{n}"
            self._names[(key, run_id)] = name
        return self._names[(key, run_id)]

    def _statuses(self, follower: LogFollower) -> list[RunStatus | _Pending]:
        table = follower.table
        if table is None:
            name = self._display_name(follower.key, follower.source.run_id)
            state = "error" if follower.state == "error" else "waiting"
            return [RunStatus(run_id=name, source=follower.label, state=state, reason=follower.message)]
        out: list[RunStatus | _Pending] = []
        repairs = table.report.repair_line()  # nothing the reader changed goes unsaid
        failed = follower.message if follower.state == "error" else None
        for run_id in table.run_ids:
            name = self._display_name(follower.key, run_id)
            slot = replace(
                self._run_status(follower, table.select([run_id]), name),
                failed=failed,
                repairs=repairs,
                restarted=follower.restart_note,
            )
            out.append(slot if slot.cached is None else slot.finish(slot.cached))
        return out

    def _horizon_of(self, run: RunsTable) -> float | None:
        if self.horizon is not None:
            return float(self.horizon)
        return finite_or_none(run.runs["total_steps"].iloc[0]) if "total_steps" in run.runs.columns else None

    def _run_status(self, follower: LogFollower, run: RunsTable, name: str) -> _Pending:
        """The run's cached status when its points did not change, else the work to compute it."""
        horizon = self._horizon_of(run)
        key = (follower.key, name)
        fingerprint = (_fingerprint(finite_points(run)), horizon, follower.state)
        cached = self._cache.get(key)
        item = (run, horizon, name, follower.label)
        if cached is not None and cached[0] == fingerprint:
            return _Pending(key, fingerprint, item, cached=replace(cached[1], updated=False, seconds=0.0))
        return _Pending(key, fingerprint, item)


@dataclass(frozen=True)
class StatusSettings:
    """What every run's status is computed with: picklable, sent to the fleet's workers."""

    rule: Any
    eps: float
    relative: bool
    smooth: int
    band: str
    random_seed: int | None


def finite_points(run: RunsTable) -> pd.DataFrame:
    """A run's points with a finite reward."""
    return run.points[np.isfinite(run.points["reward"].to_numpy(dtype=float))]


def compute_status(
    item: tuple[RunsTable, float | None, str, str],
    forecaster_of: Callable[[int], Any],
    settings: StatusSettings,
) -> RunStatus:
    """One run's status from its points: the live update, the forecast and the rule's advice.

    An engine's work function (:mod:`bayesgrpo.interfaces.fleet.engine`): ``item`` is ``(run,
    horizon, name, source label)``, ``forecaster_of(0)`` the live forecaster of the population.
    """
    run, horizon, name, label = item
    points = finite_points(run)
    start = time.perf_counter()
    rewards = points["reward"].to_numpy(dtype=float)
    base: dict[str, Any] = {
        "run_id": name,
        "source": label,
        "n_steps": len(points),
        "step": finite_or_none(points["step"].max()) if len(points) else None,
        "reward_now": float(rewards[-settings.smooth :].mean()) if len(rewards) else None,
        "horizon_step": horizon,
        "updated": True,
    }
    if not len(points):
        return RunStatus(**base, state="waiting", reason="no reward logged yet")
    if horizon is None:
        return RunStatus(
            **base,
            state="no_horizon",
            reason=NO_HORIZON,
        )
    step = float(base["step"])
    if step > horizon:
        return RunStatus(
            **base,
            state="error",
            reason=f"step {step:g} is past the horizon {horizon:g}; pass a larger --horizon",
        )
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            update = forecaster_of(0).update(run, horizon=horizon)
        draws = update.curve_draws
        # the band asked for; the curve's when the draws carry no noise (a forecaster of the
        # user's own that gives curve draws only), and the status says which it is
        band = settings.band if draws.has_noise else "curve"
        seed = getattr(update, "noise_seed", settings.random_seed)  # as LiveUpdate.final_interval
        final = band_draws(draws, [horizon], band, seed)[:, 0, 0]
        tail = (1 - INTERVAL) / 2
        lower, median, upper = np.quantile(final, [tail, 0.5, 1 - tail])
        p_plateau = float(
            prob_gain_below(draws, step, horizon, eps=settings.eps, relative=settings.relative)[0]
        )
        decision = settings.rule.decide(draws, step, horizon)[0]
    except (BayesGRPOError, ValueError, FloatingPointError, np.linalg.LinAlgError) as exc:
        logger.warning("watch: no forecast for %s: %s", name, exc)
        return RunStatus(**base, state="error", reason=short_error(exc), seconds=time.perf_counter() - start)
    reason = decision.reason
    unreliable = [str(w.message) for w in caught if "unreliable" in str(w.message)]
    if unreliable:
        reason += f" [live update unreliable: Pareto k {update.posterior.pareto_k:.2f}]"
    method = getattr(update.posterior, "method", None)
    range_lower, range_upper, range_source = getattr(update, "reward_range", (None, None, None))
    if range_source in RANGE_SOURCE_PHRASES and settings.relative:
        how = RANGE_SOURCE_PHRASES[range_source]
        reason += f" [eps against the range {range_lower:.3g} .. {range_upper:.3g} {how}]"
    if not unreliable and method not in (None, "importance"):
        reason += f" [Pareto k {update.posterior.pareto_k:.2f}: answered by the {method} fallback]"
    departure = getattr(update, "departure", None)
    if departure is not None and departure.departed:
        count, where = {
            "above": (departure.above, "above"),
            "below": (departure.below, "below"),
        }.get(departure.kind, (departure.above + departure.below, "outside"))
        reason += (
            f" [the run has left its forecast: {count} of its last {departure.n_points} points lie "
            f"{where} the 90% band]"
        )
    return RunStatus(
        **base,
        state="ok",
        final_median=float(median),
        final_lower=float(lower),
        final_upper=float(upper),
        p_plateau=p_plateau,
        decision=decision.decision,
        reason=reason,
        seconds=time.perf_counter() - start,
        pareto_k=float(update.posterior.pareto_k),
        method=method,
        band=band,
        range_lower=finite_or_none(range_lower),
        range_upper=finite_or_none(range_upper),
        range_source=range_source,
    )
