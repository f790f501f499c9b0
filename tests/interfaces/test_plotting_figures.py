"""Plots of runs, fan charts from curve draws, stop history, t80, transfer, shrinkage and scaling,
and the numbers behind them (``bayesgrpo.questions.history``, ``bayesgrpo.questions.shrinkage``).

Sampling is mocked (the ``population`` fixture: prior draws shaped like a posterior). Each test
checks what was drawn against values computed here, not only that the plot ran.
"""

from __future__ import annotations

import copy

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.container import ErrorbarContainer
from matplotlib.quiver import Quiver
from scipy import special

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.interfaces import plotting
from bayesgrpo.logs.report import ReadReport
from bayesgrpo.logs.table import RunsTable, coerce_metadata
from bayesgrpo.questions.history import HISTORY_COLUMNS, _cut_steps, stop_history
from bayesgrpo.questions.shrinkage import laplace_modes, scaling_table, shrinkage_table
from bayesgrpo.questions.stopping import CurveDraws
from bayesgrpo.questions.transfer import predict_new_run


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _table(runs: list[dict], points: dict[str, tuple[np.ndarray, np.ndarray]]) -> RunsTable:
    frames = [
        pd.DataFrame({"run_id": run_id, "step": steps, "reward": reward})
        for run_id, (steps, reward) in points.items()
    ]
    return RunsTable(
        points=pd.concat(frames, ignore_index=True),
        runs=coerce_metadata(pd.DataFrame(runs)),
        report=ReadReport(),
    )


@pytest.fixture(scope="module")
def three_runs() -> RunsTable:
    steps = np.arange(0, 50)
    return _table(
        [
            {"run_id": "a", "family": "qwen", "size_b": 0.5, "reward_min": 0.0, "reward_max": 1.0},
            {"run_id": "b", "family": "qwen", "size_b": 7.0, "reward_min": 0.0, "reward_max": 2.0},
            {"run_id": "c", "family": "llama", "size_b": np.nan},
        ],
        {
            "a": (steps, 0.2 + 0.5 * (1 - np.exp(-steps / 10))),
            "b": (steps, 1.0 + 0.5 * (1 - np.exp(-steps / 20))),
            "c": (steps, np.linspace(3.0, 5.0, 50)),
        },
    )


@pytest.fixture(scope="module")
def modes(population):
    model, _ = population
    return laplace_modes(model)


def _exp_draws(tau: np.ndarray, horizon: float = 100.0, run_ids=("r",)) -> CurveDraws:
    """Exponential curves from 0 to 1 with the given rate draws (S, R): g = 1 - exp(-t / tau)."""
    tau = np.atleast_2d(np.asarray(tau, dtype=float))
    return CurveDraws(
        curve="exp",
        params={"r0": np.zeros_like(tau), "asymptote": np.ones_like(tau), "tau": tau},
        step_scale=horizon,
        reward_scale=1.0,
        horizon_step=horizon,
        run_ids=tuple(run_ids),
    )


# ------------------------------------------------------------------------------------------
# plot_runs
# ------------------------------------------------------------------------------------------


def test_runs_by_family_one_line_per_run_and_one_colour_per_family(three_runs):
    ax = plotting.plot_runs(three_runs, color_by="family")
    lines = ax.get_lines()
    assert len(lines) == 3
    colors = {line.get_label(): line.get_color() for line in lines}
    assert lines[0].get_color() == lines[1].get_color()  # a and b are both qwen
    assert lines[0].get_color() != lines[2].get_color()
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == ["llama", "qwen"]
    assert "qwen" in colors and "llama" in colors


def test_runs_by_size_has_a_log_colour_bar_and_dashes_unknown_sizes(three_runs):
    ax = plotting.plot_runs(three_runs, color_by="size_b")
    figure = ax.figure
    assert len(figure.axes) == 2  # the plot and its colour bar
    colorbar_axis = figure.axes[1]
    assert colorbar_axis.get_yscale() == "log"
    lines = ax.get_lines()
    assert lines[2].get_linestyle() == "--"  # run c has no size
    assert lines[0].get_color() != lines[1].get_color()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["size unknown"]


def test_normalise_puts_runs_on_their_range_and_smooth_is_a_rolling_mean(three_runs):
    ax = plotting.plot_runs(three_runs, normalise=True)
    a, b, c = (line.get_ydata() for line in ax.get_lines())
    steps = np.arange(50)
    np.testing.assert_allclose(a, 0.2 + 0.5 * (1 - np.exp(-steps / 10)))  # bounds 0..1
    np.testing.assert_allclose(b, (1.0 + 0.5 * (1 - np.exp(-steps / 20))) / 2.0)  # bounds 0..2
    np.testing.assert_allclose(c, np.linspace(0.0, 1.0, 50))  # its own observed range
    smooth = plotting.plot_runs(three_runs, smooth=0.1, ax=plt.subplots()[1]).get_lines()[0].get_ydata()
    raw = 0.2 + 0.5 * (1 - np.exp(-steps / 10))
    # a centred window of 5 points (10% of 50)
    np.testing.assert_allclose(smooth[2:48], [raw[i - 2 : i + 3].mean() for i in range(2, 48)])
    assert smooth[0] == pytest.approx(raw[:3].mean())  # the edge: at least half a window


def test_runs_rejects_an_unknown_colouring(three_runs):
    with pytest.raises(BayesGRPOError, match="color_by"):
        plotting.plot_runs(three_runs, color_by="colour")


# ------------------------------------------------------------------------------------------
# plot_fan
# ------------------------------------------------------------------------------------------


def test_fan_from_curve_draws_draws_the_closed_form_mean():
    tau = np.array([[0.2], [0.4]])
    cd = _exp_draws(tau)
    _, ax = plt.subplots()
    returned = plotting.plot_fan(cd, step_now=30.0, ax=ax, n_steps=11)
    assert returned is ax
    mean_line = next(line for line in ax.get_lines() if line.get_label() == "forecast median")
    steps = np.linspace(0, 100, 11)
    t = steps / 100.0
    np.testing.assert_allclose(
        mean_line.get_ydata(), 0.5 * (1 - np.exp(-t / 0.2)) + 0.5 * (1 - np.exp(-t / 0.4))
    )
    assert sum(isinstance(c, PolyCollection) for c in ax.collections) == 2  # 50% and 90% bands
    now = next(line for line in ax.get_lines() if line.get_label() == "now")
    assert now.get_xdata()[0] == 30.0
    assert ax.get_xlim() == (0.0, 100.0)


def test_fan_unknown_run_is_an_error():
    with pytest.raises(BayesGRPOError, match="not in the curve draws"):
        plotting.plot_fan(_exp_draws(np.array([[0.2]])), "zzz")


# ------------------------------------------------------------------------------------------
# stop history and its plot
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cuts", "expected"),
    [(3, [2.0, 6.0, 10.0]), (1, [2.0]), ([4.0, 4.0, 7.0], [4.0, 7.0])],
)
def test_cut_steps(cuts, expected):
    logged = np.arange(0.0, 11.0)  # steps 0..10
    np.testing.assert_array_equal(_cut_steps(logged, cuts), expected)


def test_cut_before_the_first_point_is_an_error():
    with pytest.raises(BayesGRPOError, match="before the run's first logged step"):
        _cut_steps(np.arange(5.0, 10.0), [1.0])


def test_stop_history_of_a_finished_run(population):
    model, sim = population
    run = sim.table.select(["sim001"])
    history = stop_history(model, run, steps=[20, 100, 199], random_seed=0)
    assert list(history.columns) == list(HISTORY_COLUMNS)
    assert history["step"].tolist() == [20.0, 100.0, 199.0]
    # the prefix holds the points logged at or before the cut (steps start at 0)
    assert history["n_points"].tolist() == [21, 101, 200]
    assert (history["horizon_step"] == 200.0).all()  # the run's total_steps, fixed over cuts
    assert history[["p_stop", "p_phase"]].apply(lambda c: c.between(0, 1)).all().all()
    np.testing.assert_allclose(history[["slow_start", "rapid", "plateau"]].sum(axis=1), 1.0)
    assert (history["p_phase"] == history[["slow_start", "rapid", "plateau"]].max(axis=1)).all()
    assert history["rule"].iloc[0].startswith("FixedBudgetRule")  # the default rule


def test_stop_history_at_the_horizon_stops(population):
    model, sim = population
    history = stop_history(model, sim.table.select(["sim002"]), steps=[200], horizon=200, random_seed=0)
    assert history["decision"].tolist() == ["stop"] and history["p_stop"].iloc[0] == 1.0


def test_stop_history_takes_one_run(population):
    model, sim = population
    with pytest.raises(BayesGRPOError, match="one run"):
        stop_history(model, sim.table, steps=2)


def _history() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "step": [10.0, 20.0, 30.0, 40.0],
            "horizon_step": 100.0,
            "p_stop": [0.1, 0.5, 0.95, 0.97],
            "decision": ["continue", "continue", "stop", "stop"],
            "phase": ["slow_start", "rapid", "plateau", "plateau"],
            "p_phase": [0.6, 0.7, 0.8, 1.0],
            "rule": "PlateauRule(eps=0.01, prob=0.9)",
        }
    )


def test_stop_probability_plot_draws_the_line_the_phase_bars_and_the_first_stop():
    ax = plotting.plot_stop_probability(_history(), threshold=0.9)
    line = next(line for line in ax.get_lines() if line.get_label() == "P(gain < eps)")
    np.testing.assert_allclose(line.get_ydata(), [0.1, 0.5, 0.95, 0.97])
    bars = {c.get_label(): c for c in ax.collections if isinstance(c, PolyCollection)}
    assert set(bars) == {"slow start", "rapid", "plateau"}
    assert len(bars["plateau"].get_paths()) == 2  # one bar per cut in that phase
    # opacity is the phase's probability
    np.testing.assert_allclose(bars["plateau"].get_facecolors()[:, 3], [0.8, 1.0])
    np.testing.assert_allclose(bars["slow start"].get_facecolors()[:, 3], [0.6])
    # the first bar spans step 0 to the first cut, the last ends at the last cut
    first = bars["slow start"].get_paths()[0].vertices
    assert first[:, 0].min() == 0.0 and first[:, 0].max() == 10.0
    last = bars["plateau"].get_paths()[1].vertices
    assert last[:, 0].max() == 40.0
    first_stop = next(line for line in ax.get_lines() if line.get_label().startswith("first stop"))
    assert first_stop.get_xdata()[0] == 30.0
    threshold = next(line for line in ax.get_lines() if line.get_label() == "threshold 0.9")
    assert threshold.get_ydata()[0] == 0.9
    assert ax.get_xlim() == (0.0, 100.0)
    low, high = ax.get_ylim()
    assert low < -0.2 and high > 1.0  # the phase band below 0, the probabilities up to 1


def test_stop_probability_needs_its_columns():
    with pytest.raises(BayesGRPOError, match="lacks columns"):
        plotting.plot_stop_probability(pd.DataFrame({"step": [1.0]}))


# ------------------------------------------------------------------------------------------
# plot_t80
# ------------------------------------------------------------------------------------------


def test_t80_positions_are_the_closed_form_share_of_the_horizon():
    # exp: g(t) = 0.8 at t = tau ln 5; three runs of different rates, constant across draws
    tau = np.tile([0.1, 0.3, 1.0], (50, 1))
    cd = _exp_draws(tau, horizon=200.0, run_ids=("fast", "middle", "slow"))
    ax = plotting.plot_t80(cd, fractions=(0.8,), max_ratio=1.5)
    containers = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(containers) == 1
    x = containers[0].lines[0].get_xdata()
    np.testing.assert_allclose(x, np.minimum([0.1 * np.log(5), 0.3 * np.log(5), 1.0 * np.log(5)], 1.5))
    assert [t.get_text() for t in ax.get_yticklabels()] == ["fast", "middle", "slow"]  # sorted by t80
    horizon = next(line for line in ax.get_lines() if line.get_label() == "horizon")
    assert horizon.get_xdata()[0] == 1.0
    beyond = [line for line in ax.get_lines() if line.get_label().startswith("beyond")]
    assert len(beyond) == 1 and beyond[0].get_ydata().tolist() == [2.0]  # slow: 1.61 > 1.5


def test_t80_two_fractions_give_two_containers_and_absolute_steps(population):
    model, _ = population
    ax = plotting.plot_t80(model, fractions=(0.8, 0.95), relative=False)
    containers = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(containers) == 2
    assert len(ax.get_yticklabels()) == model.data.n_runs
    assert ax.get_xlabel().startswith("step (")


def test_t80_rejects_what_it_cannot_read():
    with pytest.raises(BayesGRPOError, match="RewardModel, CurveDraws"):
        plotting.plot_t80([1, 2, 3])


# ------------------------------------------------------------------------------------------
# plot_transfer
# ------------------------------------------------------------------------------------------


def test_transfer_draws_a_band_and_a_mean_per_prediction_and_the_truth_in_its_colour(population):
    model, sim = population
    bounds = {"reward_min": 0.0, "reward_max": 1.0}
    truth_id = "sim003"
    meta = sim.table.runs.set_index("run_id").loc[truth_id]
    predictions = {
        truth_id: predict_new_run(
            model, {"family": meta["family"], "size_b": meta["size_b"], **bounds}, horizon=200, random_seed=0
        ),
        "a new 70B": predict_new_run(
            model, {"family": "qwen", "size_b": 70.0, **bounds}, horizon=150, random_seed=0
        ),
    }
    ax = plotting.plot_transfer(predictions, sim.table.select(["sim003", "sim004"]))
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 2
    means = [line for line in ax.get_lines() if line.get_linewidth() == 1.6]
    assert len(means) == 2
    np.testing.assert_allclose(means[0].get_ydata(), predictions[truth_id].table["mean"])
    logged = [line for line in ax.get_lines() if line.get_marker() == "."]
    assert len(logged) == 1 and logged[0].get_color() == means[0].get_color()  # the truth of sim003
    context = [line for line in ax.get_lines() if line.get_color() == "0.65"]
    assert len(context) == 1  # sim004, in grey
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0] == "sim003 (mean, 5-95%)" and "other logged runs" in labels
    assert ax.get_xlim() == (0.0, 200.0)


def test_transfer_with_nothing_to_draw_is_an_error():
    with pytest.raises(BayesGRPOError, match="no transfer predictions"):
        plotting.plot_transfer({})


# ------------------------------------------------------------------------------------------
# shrinkage and scaling
# ------------------------------------------------------------------------------------------


def _posterior(model, name: str) -> np.ndarray:
    return model.idata.posterior[name].stack(sample=("chain", "draw")).transpose("sample", ...).to_numpy()


def test_shrinkage_table_against_the_posterior_and_the_laplace_fits(population, modes):
    model, _ = population
    frame = shrinkage_table(model, "r0", unpooled=modes)
    r0_run = _posterior(model, "r0_run")
    np.testing.assert_allclose(frame["pooled"], np.median(special.expit(r0_run), axis=0))
    np.testing.assert_allclose(frame["unpooled"], special.expit(modes["r0"]))
    # the start's location: mean + family effect + size slope x standardised log size
    family = _posterior(model, "r0_family")
    levels = [str(v) for v in model.idata.posterior["r0_family"]["family"].values]
    index = [levels.index(model.data.families[i]) for i in model.data.family_index]
    loc = (
        _posterior(model, "r0_mu")[:, None]
        + family[:, index]
        + _posterior(model, "r0_size_slope")[:, None] * model.data.log_size[None, :]
    )
    np.testing.assert_allclose(frame["target"], np.median(special.expit(loc), axis=0))
    assert frame["population"].nunique() == 1
    assert frame["population"].iloc[0] == pytest.approx(np.median(special.expit(_posterior(model, "r0_mu"))))
    assert ((frame["pooled_lower"] <= frame["pooled"]) & (frame["pooled"] <= frame["pooled_upper"])).all()


def test_shrinkage_rejects_unknown_parameters_and_mismatched_unpooled_models(population):
    model, _ = population
    with pytest.raises(BayesGRPOError, match="choose one of"):
        shrinkage_table(model, "sigma")

    class Other:
        curve, idata = model.curve, model.idata
        data = type("D", (), {"run_ids": ("x",)})()

    with pytest.raises(BayesGRPOError, match="same runs"):
        shrinkage_table(model, "r1", unpooled=Other())


def test_shrinkage_plot_arrows_go_from_own_fit_to_pooled(population, modes):
    model, _ = population
    table = shrinkage_table(model, "tau", unpooled=modes)
    ax = plotting.plot_shrinkage(model, param="tau", table=table)
    quivers = [c for c in ax.collections if isinstance(c, Quiver)]
    assert len(quivers) == 1
    ordered = table.sort_values("pooled", kind="stable")
    np.testing.assert_allclose(quivers[0].U, ordered["pooled"] - ordered["unpooled"])
    np.testing.assert_allclose(quivers[0].X, ordered["unpooled"])
    assert [t.get_text() for t in ax.get_yticklabels()] == ordered["run_id"].tolist()
    population_line = next(line for line in ax.get_lines() if line.get_label() == "population mean")
    assert population_line.get_xdata()[0] == pytest.approx(table["population"].iloc[0])
    assert ax.get_xscale() == "log"  # a rate
    assert "tau" in ax.get_xlabel()


def test_scaling_curve_at_the_mean_size_is_the_population_mean(population):
    model, sim = population
    scaling = scaling_table(model, "r0", n_grid=5)
    # the runs: every run has a size, read back from the standardised covariate
    np.testing.assert_allclose(scaling.runs["size_b"], sim.table.runs["size_b"].to_numpy(dtype=float))
    assert scaling.n_unknown_size == 0
    # the curve at the mean standardised log size is expit(r0_mu)
    centre = np.exp(model.data.size_standardizer.centre)
    line = scaling.line
    z = model.data.size_standardizer(np.log(line["size_b"].to_numpy()))
    draws = special.expit(
        _posterior(model, "r0_mu")[:, None] + _posterior(model, "r0_size_slope")[:, None] * z[None, :]
    )
    np.testing.assert_allclose(line["median"], np.median(draws, axis=0))
    assert line["size_b"].iloc[0] == pytest.approx(0.5) and line["size_b"].iloc[-1] == pytest.approx(14.0)
    assert line["size_b"].min() <= centre <= line["size_b"].max()
    assert set(scaling.slopes["name"]) == {"r0_size_slope"}


def test_scaling_plot_has_one_errorbar_per_family_and_the_population_band(population):
    model, _ = population
    ax = plotting.plot_scaling(model, param="r1")
    containers = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert sorted(c.get_label() for c in containers) == ["gemma", "llama", "qwen"]
    assert sum(len(c.lines[0].get_xdata()) for c in containers) == model.data.n_runs
    assert ax.get_xscale() == "log"
    assert sum(isinstance(c, PolyCollection) for c in ax.collections) == 1  # the band
    assert "r1_size_slope" in ax.get_title() and "r0_size_slope" in ax.get_title()


def test_scaling_without_size_slopes_has_no_curve(population):
    model, _ = population

    stripped = copy.copy(model)
    stripped.idata = copy.copy(model.idata)
    posterior = model.idata.posterior
    stripped.idata.posterior = posterior.drop_vars(
        [v for v in posterior.data_vars if v.endswith("_size_slope")]
    )
    scaling = scaling_table(stripped, "r1")
    assert scaling.line is None and scaling.slopes.empty
    ax = plotting.plot_scaling(stripped, param="r1")
    assert "no size slope" in ax.get_title()
    assert not any(isinstance(c, PolyCollection) for c in ax.collections)


def test_log_text_with_dollar_signs_is_drawn_literally():
    # "$\\frac$" would be a malformed mathtext formula that fails the whole figure
    name = r"run $\frac$ one"
    table = _table([{"run_id": name, "family": r"fam$\frac$"}], {name: (np.arange(5), np.arange(5.0))})
    ax = plotting.plot_runs(table)
    ax2 = plotting.plot_t80(_exp_draws(np.full((5, 1), 0.3), run_ids=(name,)))
    for axis in (ax, ax2):
        assert plotting.figure_png(axis.figure)[:4] == b"\x89PNG"
    assert [t.get_text() for t in ax2.get_yticklabels()] == [r"run \$\frac\$ one"]
