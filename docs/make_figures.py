"""Redraw the figures of ``docs/figures`` from the bundled real runs and the shipped population.

Every figure comes from the 60 real runs in ``data/`` (``bayesgrpo.load_bundled``) and the
population fitted on them that ships with the package (``bayesgrpo.model.datasets.bundled_population``):
nothing is fitted here (no NUTS), only live updates, stop histories and transfer predictions,
which condition that population in milliseconds. Random seeds are fixed, so a rerun redraws the
same figures.

Figures written (``<out>/<name>.png``):

* ``runs_by_family`` / ``runs_by_size``: every logged curve on its own reward range, coloured by
  model family / on a log scale of model size (``plotting.plot_runs``).
* ``fan``: a verl Qwen2 7B GRPO run on gsm8k+math, conditioned live on its first 30% of steps,
  its forecast fan against what it logged after (``live.LiveForecaster``, ``plotting.plot_fan``).
* ``stop_probability``: what the plateau rule would have said at 20 steps of a Llama 3.1 8B run,
  with its phase beneath (``history.stop_history``, ``plotting.plot_stop_probability``).
* ``t80``: steps to 80% and 95% of each run's total gain against its horizon (``plotting.plot_t80``).
* ``transfer``: zero-shot curves of three verl Qwen gsm8k runs (0.5B, 3B, 7B; reward range 0..1
  stated) from their metadata alone, against what they logged (``transfer.predict_new_run``,
  ``plotting.plot_transfer``).
* ``shrinkage``: each run's own fit of ``tau`` and its partially pooled estimate
  (``plotting.plot_shrinkage``).
* ``scaling``: the level at the horizon ``r1`` by model size, with the population's size curve
  (``plotting.plot_scaling``).

The population was fitted on all 60 runs, whole, the runs drawn here included: the live update
and the transfer prediction see a run's own points only through the family, task and size
effects it helped fit, so these figures show the machinery, not a held-out test (the notebooks
and ``benchmarks/`` hold those).

Run from the repository root (15-25 s on two cores)::

    python docs/make_figures.py                 # writes docs/figures/*.png
    python docs/make_figures.py --out /tmp/figs --dpi 80
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from PIL import Image

    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.logs.table import RunsTable

logger = logging.getLogger("make_figures")

#: Where the figures go by default: ``docs/figures`` beside this script.
FIGURES_DIR = Path(__file__).resolve().parent / "figures"
#: Resolution of the written PNGs.
DPI = 110
#: Seed of every live update, stop history and transfer prediction. The fan chart's live update
#: is sensitive to it (importance sampling: over seeds 0-7 its Pareto k spans 0.2-0.8 and the mean
#: at the horizon 0.93-0.96); seed 0 gives reliable weights (k about 0.2), logged on each run.
SEED = 0
#: Posterior draws of each live update and transfer prediction.
N_DRAWS = 2000

#: Share of each run's points the runs figures smooth over (raw notebook rewards are very noisy).
RUNS_SMOOTH = 0.1
#: The run of the fan chart: verl, Qwen2 7B, GPG (a GRPO variant) on gsm8k+math, 210 steps,
#: still climbing at 30% of its steps (the asyncRA 7B runs are already flat by then).
FAN_RUN = "verl_gpg_qwen2-7b_math"
#: Share of the fan chart run's steps the live update sees.
FAN_SHARE = 0.3
#: The run of the stop history: Unsloth Llama 3.1 8B GRPO, 250 steps, all three phases.
STOP_RUN = "nb_unslothai_notebooks_Llama3_1_8B_GRPO_91f52fa_n250"
#: Cuts of the stop history.
STOP_CUTS = 20
#: Runs predicted from their metadata alone: verl Qwen GRPO/PPO on gsm8k, reward range 0..1.
TRANSFER_RUNS = (
    "verl_pr3389_dp_2_gpu_20251110_100611",  # Qwen2.5 0.5B, PPO
    "verl_asyncRA_q3b_fsdp_base",  # Qwen2.5 3B, GRPO
    "verl_asyncRA_q7b_fsdp_base",  # Qwen2.5 7B, GRPO
)
#: Fractions of the gain of the t80 figure.
T80_FRACTIONS = (0.8, 0.95)
#: Parameters of the shrinkage and scaling figures.
SHRINKAGE_PARAM = "tau"
SCALING_PARAM = "r1"

#: Model sizes (B parameters) labelled on the scaling figure's axis.
SIZE_TICKS = (0.5, 1, 2, 4, 8, 20, 32, 70)
#: Largest PNG written as rendered; a larger one (60 runs' lines or rows, 200 KB and more) is
#: written as a 256-colour palette PNG instead (about a third of the size; a colour bar then shows
#: steps).
MAX_PNG_BYTES = 120_000
#: Colours a palette PNG keeps exactly: the plots' key colours, then the most frequent ones.
PNG_EXACT_COLORS = 96

#: The figures, in the order they are drawn.
FIGURE_NAMES: tuple[str, ...] = (
    "runs_by_family", "runs_by_size", "fan", "stop_probability", "t80", "transfer", "shrinkage", "scaling",
)


def figure_runs(table: RunsTable, color_by: str) -> Figure:
    """Every logged curve on its own reward range, smoothed over :data:`RUNS_SMOOTH` of its points,
    on a log step axis.

    Parameters
    ----------
    table : RunsTable
        The bundled runs.
    color_by : {"family", "size_b"}

    Returns
    -------
    matplotlib Figure
    """
    from bayesgrpo.interfaces import plotting

    figure, ax = plotting.subplots(figsize=(6.4, 3.6))
    plotting.plot_runs(table, color_by=color_by, normalise=True, smooth=RUNS_SMOOTH, ax=ax)
    # a log step axis from step 1: most runs end before step 250, a few run to 1000, and the
    # rises of small and large models (tens of steps against a few) only part on a log axis
    ax.set_xscale("log")
    ax.set_xlim(1.0, 1.1 * float(table.points["step"].max()))
    what = "family" if color_by == "family" else "model size"
    ax.set_title(f"{len(table.run_ids)} bundled runs by {what}: each on its reward range, "
                 f"smoothed over {RUNS_SMOOTH:.0%} of its points", fontsize=8)
    return figure


def figure_fan(table: RunsTable, population: RewardModel) -> Figure:
    """A run's forecast after a live update on its first :data:`FAN_SHARE` of steps.

    Parameters
    ----------
    table : RunsTable
        The bundled runs (:data:`FAN_RUN` among them).
    population : RewardModel
        The shipped population.

    Returns
    -------
    matplotlib Figure
    """
    from bayesgrpo.interfaces import plotting
    from bayesgrpo.questions.history import run_horizon
    from bayesgrpo.questions.live import LiveForecaster
    from bayesgrpo.logs.table import RunsTable as Table

    run = table.select([FAN_RUN])
    horizon = run_horizon(run)
    points = run.points
    seen = points[points["step"] <= FAN_SHARE * horizon].reset_index(drop=True)
    prefix = Table(points=seen, runs=run.runs, report=run.report)
    update = LiveForecaster(population, n_draws=N_DRAWS, random_seed=SEED).update(prefix, horizon=horizon)
    logger.info("fan: %s conditioned on %d points up to step %g of %g (Pareto k %.2f)", FAN_RUN,
                len(prefix.points), update.step, horizon, update.posterior.pareto_k)
    figure, ax = plotting.subplots(figsize=(5.6, 3.4))
    plotting.plot_fan(update.curve_draws, FAN_RUN, observed=run, step_now=update.step, ax=ax,
                      title=f"{FAN_RUN} (Qwen2 7B, verl)\nlive update on its first {FAN_SHARE:.0%} of steps")
    ax.legend(fontsize=7, frameon=False, loc="lower right")
    return figure


def figure_stop_probability(table: RunsTable, population: RewardModel) -> Figure:
    """The plateau rule's probability and the phase at :data:`STOP_CUTS` steps of a run.

    Parameters
    ----------
    table : RunsTable
    population : RewardModel

    Returns
    -------
    matplotlib Figure
    """
    from bayesgrpo.interfaces import plotting
    from bayesgrpo.questions.history import stop_history
    from bayesgrpo.questions.stopping import PlateauRule

    rule = PlateauRule(eps=0.01, prob=0.9, relative=True)  # the plateau's probability, drawn against its threshold
    history = stop_history(population, table.select([STOP_RUN]), steps=STOP_CUTS, rule=rule, n_draws=N_DRAWS,
                           random_seed=SEED)
    stops = history.loc[history["decision"] == "stop", "step"]
    logger.info("stop history: %s, first stop at step %s of %g", STOP_RUN,
                f"{stops.iloc[0]:g}" if len(stops) else "none", history["horizon_step"].iloc[0])
    figure, ax = plotting.subplots(figsize=(6.4, 3.2))
    plotting.plot_stop_probability(history, threshold=rule.prob, ax=ax)
    ax.set_title(f"{STOP_RUN}\nP(gain to the horizon < {rule.eps:.0%} of the reward range), "
                 f"live at {len(history)} steps", fontsize=8)
    return figure


def _figure_per_run(population: RewardModel, row_inches: float, draw: Callable[[Any], Any]) -> Figure:
    """A figure with a row per fitted run, drawn by ``draw(ax)``."""
    from bayesgrpo.interfaces import plotting

    assert population.data is not None
    figure, ax = plotting.subplots(figsize=(7.2, 1.2 + row_inches * population.data.n_runs))
    draw(ax)
    return figure


def figure_t80(population: RewardModel) -> Figure:
    """Steps to 80% and 95% of each fitted run's gain, as shares of its horizon.

    Parameters
    ----------
    population : RewardModel

    Returns
    -------
    matplotlib Figure
    """
    from bayesgrpo.interfaces import plotting

    return _figure_per_run(population, 0.17, lambda ax: plotting.plot_t80(population, fractions=T80_FRACTIONS, ax=ax))


def figure_transfer(table: RunsTable, population: RewardModel) -> Figure:
    """Zero-shot predictions of :data:`TRANSFER_RUNS` from their metadata, against their logs.

    Parameters
    ----------
    table : RunsTable
    population : RewardModel

    Returns
    -------
    matplotlib Figure
    """
    from bayesgrpo.interfaces import plotting
    from bayesgrpo.questions.history import run_horizon
    from bayesgrpo.questions.transfer import predict_new_run

    predictions = {}
    for run_id in TRANSFER_RUNS:
        run = table.select([run_id])
        metadata = run.runs.iloc[0].to_dict()  # family, size_b, task, batch, reward_min/max (0, 1)
        predictions[run_id] = predict_new_run(population, metadata, horizon=run_horizon(run), n_draws=N_DRAWS,
                                              random_seed=SEED)
        final = predictions[run_id].table.iloc[-1]
        logger.info("transfer: %s (%gB) predicted %.3f [%.3f, %.3f] at step %g", run_id, metadata["size_b"],
                    final["mean"], final["q05"], final["q95"], final["step"])
    figure, ax = plotting.subplots(figsize=(7.6, 3.4))
    plotting.plot_transfer(predictions, table.select(list(TRANSFER_RUNS)), ax=ax)
    ax.set_title("transfer: zero-shot curves from metadata (family, task, size, batch, reward range 0..1)",
                 fontsize=8)
    return figure


def figure_shrinkage(population: RewardModel) -> Figure:
    """Each run's own ``tau`` and its partially pooled estimate.

    Parameters
    ----------
    population : RewardModel

    Returns
    -------
    matplotlib Figure
    """
    from bayesgrpo.interfaces import plotting

    return _figure_per_run(population, 0.16, lambda ax: plotting.plot_shrinkage(population, param=SHRINKAGE_PARAM, ax=ax))


def figure_scaling(population: RewardModel) -> Figure:
    """The level at the horizon ``r1`` by model size, with the population's size curve.

    Parameters
    ----------
    population : RewardModel

    Returns
    -------
    matplotlib Figure
    """
    from bayesgrpo.interfaces import plotting

    figure, ax = plotting.subplots(figsize=(6.6, 3.6))
    plotting.plot_scaling(population, param=SCALING_PARAM, ax=ax)
    # plot_scaling labels the sizes of the runs it shows; its curve spans every known size (to the
    # 20B runs it leaves out), so label the whole axis
    low, high = ax.get_xlim()
    ticks = [s for s in SIZE_TICKS if low <= s <= high]
    ax.set_xticks(ticks, [f"{s:g}" for s in ticks])
    return figure


def key_colours() -> np.ndarray:
    """The colours the plots draw with, as 0-255 RGB rows: matplotlib's ``C0``-``C9`` (the family
    colours), the phase colours of ``plotting.PHASE_COLORS``, black and white."""
    from matplotlib.colors import to_rgb

    from bayesgrpo.interfaces import plotting

    names = [f"C{i}" for i in range(10)] + list(plotting.PHASE_COLORS.values()) + ["k", "w"]
    return np.unique(np.rint(255 * np.array([to_rgb(name) for name in names])).astype(np.int64), axis=0)


def palette_image(image: Image.Image, *, exact: int = PNG_EXACT_COLORS) -> Image.Image:
    """An RGB image as a 256-colour palette image that keeps its key colours exactly.

    The palette is :func:`key_colours` (so that families and phases keep their colours, which a
    plain median cut merges), then the image's most frequent colours up to ``exact`` in all (greys
    of text and bands), then a median cut of the image for the rest (anti-aliasing); each pixel
    takes its nearest palette colour.

    Parameters
    ----------
    image : PIL.Image.Image
        Mode ``"RGB"``.
    exact : int
        Colours kept exactly (key colours included), fewer than 256.

    Returns
    -------
    PIL.Image.Image
        Mode ``"P"``.
    """
    from PIL import Image

    pixels = np.asarray(image, dtype=np.int64)
    codes = (pixels[..., 0] << 16) | (pixels[..., 1] << 8) | pixels[..., 2]
    unique, inverse, counts = np.unique(codes.ravel(), return_inverse=True, return_counts=True)
    colours = np.stack([(unique >> 16) & 255, (unique >> 8) & 255, unique & 255], axis=1)
    key = key_colours()
    by_count = colours[np.argsort(-counts, kind="stable")]
    others = by_count[~(by_count[:, None, :] == key[None, :, :]).all(axis=2).any(axis=1)]
    frequent = np.concatenate([key, others[: max(exact - len(key), 0)]])
    cut = image.quantize(colors=256 - len(frequent), method=Image.Quantize.MEDIANCUT)
    median_cut = np.asarray(cut.getpalette()[: 3 * (256 - len(frequent))], dtype=np.int64).reshape(-1, 3)
    palette = np.concatenate([frequent, median_cut])
    # nearest palette colour of each distinct colour (Pillow's own palette mapping is approximate)
    distance = (palette**2).sum(axis=1)[None, :] - 2 * colours @ palette.T  # + |colour|^2, the same per row
    indices = np.argmin(distance, axis=1)[inverse].reshape(codes.shape).astype(np.uint8)
    result = Image.fromarray(indices, mode="P")
    result.putpalette(palette.astype(np.uint8).ravel().tolist())
    return result


def save_png(figure: Figure, path: Path, *, dpi: int = DPI) -> Path:
    """Write a figure as PNG (tight bounding box) and close it; over :data:`MAX_PNG_BYTES`, as a
    256-colour palette PNG (:func:`palette_image`). No metadata: a rerun writes the same bytes.

    Parameters
    ----------
    figure : matplotlib Figure
    path : Path
    dpi : int

    Returns
    -------
    Path
        ``path``.
    """
    import io

    from PIL import Image

    from bayesgrpo.interfaces import plotting

    image = Image.open(io.BytesIO(plotting.figure_png(figure, dpi=dpi))).convert("RGB")  # closes the figure
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    if buffer.tell() > MAX_PNG_BYTES:
        buffer = io.BytesIO()
        palette_image(image).save(buffer, format="PNG", optimize=True)
    path.write_bytes(buffer.getvalue())
    return path


def make_figures(out: Path | str = FIGURES_DIR, *, dpi: int = DPI) -> dict[str, Path]:
    """Draw every figure of :data:`FIGURE_NAMES` into ``out``.

    Parameters
    ----------
    out : Path or str
        Folder to write ``<name>.png`` into (created if missing).
    dpi : int

    Returns
    -------
    dict of str to Path
        Each figure's name and the file written.
    """
    import bayesgrpo
    from bayesgrpo.model.datasets import bundled_population
    from bayesgrpo.model.laplace import LiveUpdateWarning

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = bayesgrpo.load_bundled(warn=False)
    population = bundled_population()
    builders: dict[str, Callable[[], Figure]] = {
        "runs_by_family": lambda: figure_runs(table, "family"),
        "runs_by_size": lambda: figure_runs(table, "size_b"),
        "fan": lambda: figure_fan(table, population),
        "stop_probability": lambda: figure_stop_probability(table, population),
        "t80": lambda: figure_t80(population),
        "transfer": lambda: figure_transfer(table, population),
        "shrinkage": lambda: figure_shrinkage(population),
        "scaling": lambda: figure_scaling(population),
    }
    written = {}
    for name in FIGURE_NAMES:
        started = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", LiveUpdateWarning)
            written[name] = save_png(builders[name](), out / f"{name}.png", dpi=dpi)
        for warning in caught:  # e.g. a live update's unreliable importance weights: said, not hidden
            logger.warning("%s: %s", name, warning.message)
        logger.info("wrote %s (%.0f KB, %.1f s)", written[name], written[name].stat().st_size / 1024,
                    time.perf_counter() - started)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """``python docs/make_figures.py [--out DIR] [--dpi N]``: redraw the documentation's figures.

    Parameters
    ----------
    argv : sequence of str, optional
        Command-line arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status, 0.
    """
    parser = argparse.ArgumentParser(prog="python docs/make_figures.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=FIGURES_DIR,
                        help=f"folder to write into (default {FIGURES_DIR})")
    parser.add_argument("--dpi", type=int, default=DPI, help=f"resolution (default {DPI})")
    parser.add_argument("--quiet", action="store_true", help="log warnings only")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    logger.setLevel(logging.WARNING if args.quiet else logging.INFO)
    started = time.perf_counter()
    written = make_figures(args.out, dpi=args.dpi)
    logger.info("%d figures in %s, %.1f s", len(written), args.out, time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
