"""keras_mgu.plotting: training curves, every run of an identification, simulations and residual
analyses as PNG files."""

import os
import struct
import sys

import keras
import numpy as np
import pytest

from keras_mgu.callbacks import LearningRateDecayPoints, WeightedEarlyStopping
from keras_mgu.plotting import moving_average, plot_training
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_size(path):
    """(width, height) from the IHDR chunk of a PNG file."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == PNG_MAGIC and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def _assert_drawn_png(path):
    assert os.path.getsize(path) > 10_000
    assert _png_size(path) == (800, 600)
    import matplotlib.image

    pixels = matplotlib.image.imread(path)
    # Not a blank canvas: many distinct colours (curves, markers, text).
    colours = np.unique(pixels.reshape(-1, pixels.shape[-1]).round(2), axis=0)
    assert len(colours) > 20


@pytest.fixture
def trained(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 3, 2)).astype("float32")
    y = x.sum(axis=(1, 2))[:, None].astype("float32") * 0.3
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((3, 2)), keras.layers.GRU(3), keras.layers.Dense(1)])
    model.compile(
        keras.optimizers.Adam(2e-2),
        "mse",
        metrics=[keras.metrics.RootMeanSquaredError(name="rmse")],
    )
    es = WeightedEarlyStopping(
        {"val_rmse": 1.0, "loss": 0.1}, validation_data=(x[:8], y[:8]), validation_frequency=3
    )
    history = model.fit(
        x,
        y,
        batch_size=4,
        epochs=4,
        validation_data=(x[:8], y[:8]),
        verbose=0,
        callbacks=[LearningRateDecayPoints((0.5,)), es],
    )
    return es, history


def test_moving_average_matches_direct_means():
    values = np.array([4.0, 2.0, 6.0, 1.0, 3.0, 5.0])
    expected = [np.mean(values[max(0, i - 2) : i + 1]) for i in range(len(values))]
    np.testing.assert_allclose(moving_average(values, 3), expected)
    np.testing.assert_allclose(moving_average(values, 1), values)


def test_plots_from_callback_and_history(trained, tmp_path):
    es, history = trained
    assert len(es.history) == 11 and len(es.train_history) == 32
    out = plot_training(es, tmp_path / "checks.png", window=5)
    assert out == str(tmp_path / "checks.png")
    _assert_drawn_png(out)
    for source, name in ((history, "history.png"), (history.history, "dict.png")):
        _assert_drawn_png(plot_training(source, tmp_path / name))
    assert sorted(os.listdir(tmp_path)) == ["checks.png", "dict.png", "history.png"]


def test_plot_replaces_an_existing_file(tmp_path):
    path = tmp_path / "curves.png"
    path.write_bytes(b"old")
    history = {"loss": [1.0, 0.5, 0.4], "val_loss": [1.2, 0.7, float("nan")]}
    plot_training(history, path)
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert os.listdir(tmp_path) == ["curves.png"]


def test_plot_of_a_run_without_a_finite_best(tmp_path):
    es = WeightedEarlyStopping({"loss": 1.0}, validation_frequency=1)
    es.history = [{"iteration": i, "epoch": 1, "score": np.nan, "loss": np.nan} for i in (1, 2)]
    es.train_history = [{"iteration": i, "epoch": 1, "loss": np.nan} for i in (1, 2)]
    assert plot_training(es, tmp_path / "nan.png") == str(tmp_path / "nan.png")
    assert (tmp_path / "nan.png").read_bytes()[:8] == PNG_MAGIC


def test_bad_plot_arguments(tmp_path):
    history = {"loss": [1.0, 0.5]}
    with pytest.raises(ValueError, match="'.png'"):
        plot_training(history, tmp_path / "curves.pdf")
    with pytest.raises(ValueError, match="window"):
        plot_training(history, tmp_path / "curves.png", window=0)
    with pytest.raises(TypeError, match="WeightedEarlyStopping"):
        plot_training([1.0, 0.5], tmp_path / "curves.png")
    with pytest.raises(ValueError, match="run `fit` first"):
        plot_training(WeightedEarlyStopping({"loss": 1.0}), tmp_path / "curves.png")
    with pytest.raises(ValueError, match="empty"):
        plot_training({}, tmp_path / "curves.png")
    assert os.listdir(tmp_path) == []


def test_missing_matplotlib_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"pip install keras-mgu\[plot\]"):
        plot_training({"loss": [1.0]}, tmp_path / "curves.png")


def test_trials_plot_marks_the_best_and_the_failed(tmp_path):
    from keras_mgu.plotting import plot_trials

    table = [
        {"trial": "0", "status": "COMPLETED", "validation_rmse": 0.5},
        {"trial": "1", "status": "FAILED", "validation_rmse": float("nan")},
        {"trial": "2", "status": "COMPLETED", "validation_rmse": 0.3},
    ]
    path = plot_trials(table, tmp_path / "trials.png")
    assert path.endswith("trials.png") and (tmp_path / "trials.png").read_bytes()[:4] == b"\x89PNG"
    # Trials are whole numbers on the x axis.
    from keras_mgu.plotting import trials_figure

    ticks = trials_figure(table).axes[0].get_xticks()
    assert len(ticks) and all(float(t).is_integer() for t in ticks)
    with pytest.raises(ValueError, match="no trials"):
        plot_trials([], tmp_path / "empty.png")
    with pytest.raises(ValueError, match=".png"):
        plot_trials(table, tmp_path / "trials.jpg")


def test_a_score_that_is_one_check_gets_one_panel():
    """``val_rmse`` alone, no training loss recorded: the score panel would repeat the curve."""
    from matplotlib.figure import Figure

    from keras_mgu.plotting.training import _plot_callback

    def drawn(weights, train):
        data = (np.zeros((2, 3, 2), "float32"), np.zeros((2, 1), "float32"))
        es = WeightedEarlyStopping(weights, validation_data=data, validation_frequency=1)
        es.history = [
            {"iteration": i, "epoch": 1, "score": v, "val_rmse": v, "loss": v}
            for i, v in ((1, 0.5), (2, 0.3), (3, 0.4))
        ]
        es.train_history = [{"iteration": 1, "epoch": 1, "loss": 0.6}] if train else []
        es.best_iteration, es.best_score = 2, 0.3
        fig = Figure()
        _plot_callback(fig, es, 2)
        return fig.axes

    (ax,) = drawn({"val_rmse": 1.0}, train=False)
    assert [line.get_label() for line in ax.lines][0] == "val_rmse (the score)"
    assert len(drawn({"val_rmse": 1.0}, train=True)) == 2
    assert len(drawn({"val_rmse": 0.8, "loss": 0.2}, train=False)) == 2


def test_simulation_plot_has_one_panel_per_output_by_name(tmp_path):
    from keras_mgu.plotting import plot_simulation, simulation_figure

    t = np.arange(50) * 0.5
    y = np.stack([np.sin(t), np.cos(t)], axis=1)
    y_sim = y + 0.1
    fig = simulation_figure(t, y, y_sim, ("pos", "vel"), "test", "MGU", scored_from=10)
    titles = [ax.get_title() for ax in fig.axes]
    assert len(titles) == 2 and titles[0].startswith("pos: RMSE 0.1, fit ")
    assert titles[1].startswith("vel: ") and titles[1].endswith("from sample 10")
    assert [ax.get_ylabel() for ax in fig.axes] == ["pos", "vel"]
    residual = simulation_figure(t, y, y_sim, ("pos", "vel"), residual=True)
    np.testing.assert_allclose(residual.axes[1].lines[0].get_ydata(), -0.1)
    unnamed = simulation_figure(t, y[:, 0], y_sim[:, 0])
    assert unnamed.axes[0].get_title().startswith("y0: ")
    path = plot_simulation(t, y, y_sim, tmp_path / "sim.png", ("pos", "vel"))
    assert open(path, "rb").read(8) == PNG_MAGIC
    with pytest.raises(ValueError, match="must end in '.png'"):
        plot_simulation(t, y, y_sim, tmp_path / "sim.pdf")


def test_simulation_plot_shades_the_band_and_draws_a_reference_beside(tmp_path):
    from keras_mgu.plotting import simulation_figure

    t = np.arange(50) * 0.1
    y = np.stack([np.sin(t), np.cos(t)], axis=1)
    y_sim, width = y + 0.05, np.array([0.2, 0.4])
    band = (y_sim - width, y_sim + width)
    fig = simulation_figure(t, y, y_sim, ("a", "b"), band=band, others=[("ARX", y - 0.1)])
    for i, ax in enumerate(fig.axes):
        (shade,) = ax.collections
        vertices = shade.get_paths()[0].vertices[:, 1]
        assert vertices.min() == pytest.approx((y_sim[:, i] - width[i]).min())
        assert vertices.max() == pytest.approx((y_sim[:, i] + width[i]).max())
        labels = [line.get_label() for line in ax.get_lines()]
        assert labels == ["measured", "simulation", "ARX"]
        np.testing.assert_allclose(ax.get_lines()[2].get_ydata(), y[:, i] - 0.1)
    residual = simulation_figure(t, y, y_sim, ("a", "b"), residual=True, band=band)
    vertices = residual.axes[1].collections[0].get_paths()[0].vertices[:, 1]
    assert vertices.min() == pytest.approx(-0.4) and vertices.max() == pytest.approx(0.4)


def test_simulation_plot_draws_the_inputs_below_the_outputs(tmp_path):
    from keras_mgu.plotting import plot_simulation, simulation_figure

    t = np.arange(40) * 0.5
    y = np.stack([np.sin(t), np.cos(t)], axis=1)
    u = np.stack([np.sign(np.sin(t / 3)), 0.5 * t], axis=1)
    fig = simulation_figure(t, y, y + 0.1, ("pos", "vel"), u=u, input_names=("force", "ramp"))
    assert len(fig.axes) == 3  # the outputs, then the inputs
    outputs, inputs = fig.axes[:2], fig.axes[2]
    assert [ax.get_ylabel() for ax in outputs] == ["pos", "vel"]
    assert inputs.get_ylabel() == "inputs" and inputs.get_title() == "inputs: force, ramp"
    assert inputs.get_shared_x_axes().joined(inputs, outputs[0])  # one time axis
    assert [line.get_label() for line in inputs.get_lines()] == ["force", "ramp"]
    for line, column in zip(inputs.get_lines(), u.T, strict=True):
        np.testing.assert_allclose(line.get_xdata(), t)
        np.testing.assert_allclose(line.get_ydata(), column)
    assert inputs.get_xlabel() == "time [s]" and outputs[1].get_xlabel() == ""
    one = simulation_figure(t, y[:, 0], y[:, 0], u=u[:, 0])  # one input, unnamed
    assert len(one.axes) == 2 and one.axes[1].get_ylabel() == "u0"
    assert len(simulation_figure(t, y, y).axes) == 2  # no inputs: the outputs alone
    path = plot_simulation(t, y, y, tmp_path / "sim.png", u=u)
    assert open(path, "rb").read(8) == PNG_MAGIC
    with pytest.raises(ValueError, match="`u` must be"):
        simulation_figure(t, y, y, u=u[:-1])


def test_residual_analysis_plot_has_a_column_per_output(tmp_path):
    from keras_mgu.plotting import plot_residual_analysis, residual_analysis_figure
    from keras_mgu.sysid import residual_analysis

    rng = np.random.default_rng(0)
    analysis = residual_analysis(
        rng.normal(size=(80, 2)), rng.normal(size=(80, 1)), max_lag=5,
        output_names=("pos", "vel"), input_names=("force",),
    )  # fmt: skip
    fig = residual_analysis_figure(analysis, "residuals")
    titles = sorted(ax.get_title() for ax in fig.axes)
    assert titles == sorted(
        ["autocorrelation of e (pos)", "autocorrelation of e (vel)", "e (pos) vs force",
         "e (vel) vs force"]
    )  # fmt: skip
    path = plot_residual_analysis(analysis, tmp_path / "residuals.png")
    assert open(path, "rb").read(8) == PNG_MAGIC


def test_simulation_plot_marks_the_samples_outside_the_estimation_range():
    from keras_mgu.plotting import simulation_figure

    t = np.arange(20.0)
    y = np.sin(t)[:, None]
    outside = np.zeros(20, dtype=bool)
    outside[[3, 4, 5, 12, 19]] = True  # three spans: 3-5, 12, 19
    fig = simulation_figure(t, y, y, ("y",), u=t, outside=outside)
    out_ax, in_ax = fig.axes[:2]
    spans = [p for p in out_ax.patches if p.get_label() != "band"]
    assert len(spans) == 3 and len(in_ax.patches) == 3  # in every panel
    xs = sorted((round(p.get_x(), 6), round(p.get_x() + p.get_width(), 6)) for p in spans)
    assert xs == [(3.0, 5.0), (12.0, 12.0), (19.0, 19.0)]
    (legend,) = fig.legends  # one legend for the figure
    labels = [text.get_text() for text in legend.get_texts()]
    assert labels.count("outside the estimation range") == 1


def _drawn(fig):
    """``fig`` drawn on its Agg canvas; its renderer (window extents are then final)."""
    fig.canvas.draw()
    return fig.canvas.get_renderer()


@pytest.mark.parametrize("residual", [False, True])
def test_simulation_legend_covers_no_panel(residual):
    """One legend for the figure, outside every panel: the first output's data stay in view."""
    from keras_mgu.plotting import simulation_figure

    t = np.arange(200) * 0.1
    y = np.stack([np.sin(t), np.cos(t)], axis=1)
    y_sim = 0.95 * y
    fig = simulation_figure(
        t, y, y_sim, ("a", "b"), "title", "a long label of the simulated curve", 8,
        residual=residual, band=(y_sim - 0.1, y_sim + 0.1), others=[("ARX reference", y)],
        u=np.sign(np.sin(t))[:, None], outside=t > 15,
    )  # fmt: skip
    renderer = _drawn(fig)
    legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent(renderer)), ax.get_title()
    (legend,) = legends  # one for the figure
    labels = [text.get_text() for text in legend.get_texts()]
    assert "band" in labels and "outside the estimation range" in labels
    if not residual:
        assert labels[:3] == ["measured", "a long label of the simulated curve", "ARX reference"]


def test_simulation_band_is_outlined_and_filled_under_the_curves():
    """A narrow band stays visible: an opaque outline, a fill of alpha >= 0.3, named in the
    legend by its level, under the measured curve."""
    from matplotlib.colors import to_rgba

    from keras_mgu.plotting import simulation_figure

    t = np.arange(100) * 0.1
    y = np.sin(t)[:, None]
    band = (y - 0.02, y + 0.02)  # 2 % of the output's span
    fig = simulation_figure(t, y, y, band=band)
    ax = fig.axes[0]
    (shade,) = ax.collections
    assert shade.get_facecolor()[0][3] >= 0.3
    assert shade.get_linewidth()[0] > 0 and shade.get_edgecolor()[0][3] == 1.0
    assert to_rgba(shade.get_edgecolor()[0]) != to_rgba(shade.get_facecolor()[0])
    measured = next(line for line in ax.get_lines() if line.get_label() == "measured")
    assert shade.get_zorder() < measured.get_zorder()
    labels = [text.get_text() for text in fig.legends[0].get_texts()]
    assert "band" in labels
    named = simulation_figure(t, y, y, band=band, band_label="0.95 band")
    assert named.axes[0].collections[0].get_label() == "0.95 band"


def _network_run(structure, losses, checks, linear=None):
    """A network run: its early stopping's batches (``losses``) and ``(iteration, score)``s."""
    from types import SimpleNamespace

    from keras_mgu.sysid import RunResult

    es = WeightedEarlyStopping({"val_rmse": 1.0})
    es.train_history = [{"iteration": i + 1, "epoch": 1, "loss": v} for i, v in enumerate(losses)]
    es.history = [{"iteration": i, "epoch": 1, "score": v, "val_rmse": v} for i, v in checks]
    best_iteration, best = min(checks, key=lambda check: check[1])
    run = RunResult(None, 0, best, best_iteration, 1.0, es, structure=structure)
    run.path = SimpleNamespace(linear=linear)
    return run


def _lag_run(structure, checks):
    """A lag-class run: its ``(iteration, validation RMSE)`` checks, no early stopping kept."""
    from keras_mgu.sysid import RunResult

    best_iteration, best = min(checks, key=lambda check: check[1]) if checks else (0, 0.5)
    run = RunResult(None, 0, best, best_iteration, 1.0, None, structure=structure)
    run.validation_history = list(checks)
    return run


@pytest.fixture
def identification_runs():
    return [
        _lag_run("narx", [(0, 0.4), (100, 0.3), (110, 0.2), (120, 0.25)]),
        _lag_run("polynomial", [(0, 0.15)]),  # the least-squares fit alone
        _lag_run("linear", []),  # nothing recorded (a run read from a model file)
        _network_run("network", [2.0, 1.5, 1.2, 1.0], [(1, 0.9), (2, 0.6), (4, 0.7)]),
        _network_run("linear+network", [1.0, 0.8, 0.7, 0.6], [(1, 0.5), (4, 0.45)], "ARX"),
    ]


def test_training_png_draws_every_run_by_class(identification_runs):
    """Each run by number and class, its checks with its best starred, the training loss where
    recorded, against iterations; a run without a curve is named, not dropped."""
    from keras_mgu.plotting import runs_figure

    fig = runs_figure(identification_runs, "narx: training", kept=(0, 0, 3))
    loss_ax, val_ax = fig.axes
    assert fig.get_suptitle() == "narx: training"
    assert val_ax.get_xlabel() == "iteration (optimiser steps)"
    assert not any("epoch" in ax.get_xlabel() for ax in fig.axes)
    assert val_ax.get_ylabel() == "validation RMSE (standardised)"
    assert loss_ax.get_ylabel() == "training loss (MSE)"
    assert "2 of the 5 runs" in loss_ax.get_title()
    (legend,) = fig.legends
    texts = [text.get_text() for text in legend.get_texts()]
    assert texts == [
        "best check of a run",
        "run 1 (narx), kept: best 0.2 at 110",
        "run 2 (polynomial): best 0.15 at 0 (one check: no curve)",
        "run 3 (linear): no checks recorded, nothing to draw",
        "run 4 (network), kept: best 0.6 at 2",
        "run 5 (linear+network): best 0.45 at 4 (of its linear model's residual)",
    ]
    curves = {line.get_label(): line for line in val_ax.get_lines()}
    narx = curves["run 1 (narx), kept: best 0.2 at 110"]
    np.testing.assert_array_equal(narx.get_xdata(), [0, 100, 110, 120])
    np.testing.assert_array_equal(narx.get_ydata(), [0.4, 0.3, 0.2, 0.25])
    stars = [line for line in val_ax.get_lines() if line.get_marker() == "*"]
    points = sorted((float(s.get_xdata()[0]), float(s.get_ydata()[0])) for s in stars)
    assert points == [(0.0, 0.15), (2.0, 0.6), (4.0, 0.45), (110.0, 0.2)]
    assert narx.get_linewidth() > curves["run 5 (linear+network): best 0.45 at 4 (of its "
                                         "linear model's residual)"].get_linewidth()  # fmt: skip
    losses = loss_ax.get_lines()
    assert len(losses) == 2
    np.testing.assert_array_equal(losses[0].get_xdata(), [1, 2, 3, 4])
    np.testing.assert_array_equal(losses[0].get_ydata(), [2.0, 1.5, 1.2, 1.0])
    assert losses[0].get_color() == curves["run 4 (network), kept: best 0.6 at 2"].get_color()


def test_training_png_of_runs_without_a_training_loss_has_one_panel(identification_runs, tmp_path):
    from keras_mgu.plotting import plot_runs, runs_figure

    fig = runs_figure(identification_runs[:3])
    (ax,) = fig.axes
    assert fig.get_suptitle() == "Training of each run"
    assert ax.get_xlabel() == "iteration (optimiser steps)"
    path = plot_runs(identification_runs, tmp_path / "training.png", "t", kept=(1,))
    assert open(path, "rb").read(8) == PNG_MAGIC
    with pytest.raises(ValueError, match="no runs"):
        runs_figure([])
    with pytest.raises(ValueError, match="'.png'"):
        plot_runs(identification_runs, tmp_path / "training.pdf")


def test_identify_writes_training_png_of_every_run(identification_runs, tmp_path, monkeypatch):
    """``keras-mgu identify``'s plots: training.png draws the identification's runs, the runs it
    keeps thicker, and the band's legend names its level."""
    from types import SimpleNamespace

    import keras_mgu.plotting
    from keras_mgu.cli.report import plot_results
    from keras_mgu.sysid import residual_analysis

    figures = {}
    for name in ("runs_figure", "simulation_figure"):
        real = getattr(keras_mgu.plotting, name)
        monkeypatch.setattr(keras_mgu.plotting, name,
                            lambda *a, _real=real, _name=name, **k:
                            figures.setdefault(_name, _real(*a, **k)))  # fmt: skip
    rng = np.random.default_rng(0)
    t = np.arange(40.0)
    record = SimpleNamespace(time=t, y=np.sin(t)[:, None], u=np.cos(t)[:, None],
                             output_names=("y",), input_names=("u",))  # fmt: skip
    simulation = record.y + 0.1
    evaluation = SimpleNamespace(
        headline={"simulation": simulation, "lower": simulation - 0.2, "upper": simulation + 0.2,
                  "start": "the first 5 measured outputs", "scored_from": 5},
        reference_simulation=None, outside=None, n_initial=5, band={"level": 0.95},
        residuals=residual_analysis(rng.normal(size=(35, 1)), rng.normal(size=(35, 1)), 5),
    )  # fmt: skip
    found = SimpleNamespace(runs=identification_runs, kept=(0, 0, 3))
    line = plot_results("narx (MLP 8)", record, evaluation, found, str(tmp_path))
    assert str(tmp_path / "training.png") in line
    assert (tmp_path / "training.png").read_bytes()[:8] == PNG_MAGIC
    fig = figures["runs_figure"]
    assert fig.get_suptitle() == "narx (MLP 8): training of each of the 5 runs"
    texts = [text.get_text() for text in fig.legends[0].get_texts()]
    assert [text.split(":")[0] for text in texts[1:]] == [
        "run 1 (narx), kept", "run 2 (polynomial)", "run 3 (linear)", "run 4 (network), kept",
        "run 5 (linear+network)",
    ]  # fmt: skip
    band_legend = [text.get_text() for text in figures["simulation_figure"].legends[0].get_texts()]
    assert "0.95 band" in band_legend
