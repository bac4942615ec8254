"""The pictures a local run leaves: training_curves.png draws every series (losses in one panel,
accuracy in another) with a legend and a grammatical title; objective.png's log axis has a few
readable labels that do not overlap (the labels matplotlib drew are read back, not pixels)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from sagestack.local.training.metric_series import MetricSeries
from sagestack.local.training.train import curves_figure, curves_title, plot_curves
from sagestack.local.training.tuning import Trial, log_ticks, objective_figure
from sagestack.tuning.models import TuningSpec

# what the init skeleton prints: train_loss every few steps, val_loss and val_accuracy each epoch
LOG = [
    "metrics: epoch=0 step=5 total_steps=20 train_loss=1.5000",
    "metrics: epoch=0 step=10 total_steps=20 train_loss=0.9000 val_loss=1.0000 val_accuracy=0.6000",
    "metrics: epoch=1 step=15 total_steps=20 train_loss=0.5000",
    "metrics: epoch=1 step=20 total_steps=20 train_loss=0.3000 val_loss=0.7000 val_accuracy=0.8500",
]
DEFINITIONS = {"val_accuracy": r"val_accuracy=([0-9.]+)", "train_loss": r"train_loss=([0-9.]+)"}


def _series(hosts: tuple[str, ...] = ("algo-1",)) -> MetricSeries:
    series = MetricSeries(DEFINITIONS)
    for host in hosts:
        for i, line in enumerate(LOG):
            series.read(host, line, 1_700_000_000.0 + i)
    return series


def _legend(ax) -> list[str]:  # type: ignore[no-untyped-def]
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_curves_draw_every_series_with_a_legend_accuracy_in_its_own_panel():
    import matplotlib.pyplot as plt

    fig = curves_figure(_series(), curves_title("train", 1, 1))
    try:
        losses, metrics = fig.axes
        # val_loss is no metric definition of this job: the `metrics:` line still gives it
        assert sorted(_legend(losses)) == ["train_loss", "val_loss"]
        assert _legend(metrics) == ["val_accuracy"]
        assert losses.get_xlabel() == "optimizer step"
        assert list(losses.get_lines()[0].get_xdata()) == [5.0, 10.0, 15.0, 20.0]
        assert fig._suptitle.get_text() == "train: 1 host, 1 process"
    finally:
        plt.close(fig)


def test_several_hosts_are_labelled_and_the_title_says_hosts(tmp_path: Path):
    import matplotlib.pyplot as plt

    assert curves_title("classifier", 2, 4) == "classifier: 2 hosts x 4 processes each"
    fig = curves_figure(_series(("algo-1", "algo-2")), curves_title("classifier", 2, 4))
    try:
        assert "train_loss (algo-2)" in _legend(fig.axes[0])
    finally:
        plt.close(fig)
    png = plot_curves(_series(), tmp_path / "c.png", "t")
    assert png is not None and png.read_bytes()[:4] == b"\x89PNG"
    assert plot_curves(MetricSeries(DEFINITIONS), tmp_path / "none.png", "t") is None


@pytest.mark.parametrize(
    ("low", "high"), [(0.002, 0.02), (1e-4, 1e-1), (1e-6, 1.0), (0.0031, 0.0049), (1e-5, 3e-3)]
)
def test_the_log_axis_labels_are_few_readable_and_apart(low: float, high: float):
    import matplotlib.pyplot as plt

    spec = TuningSpec.model_validate(
        {
            "job": "classifier",
            "objective": {"metric": "val_accuracy", "type": "Maximize"},
            "ranges": {"lr": {"continuous": [low, high], "scaling": "Logarithmic"}},
            "max_jobs": 4,
        }
    )
    xs = [low, (low * high) ** 0.5, high]
    trials = [Trial(i, {"lr": x}, 0.5 + i / 10, "Completed", None, Path(".")) for i, x in enumerate(xs)]
    fig = objective_figure(trials, spec)
    try:
        fig.canvas.draw()
        ax = fig.axes[0]
        labels = [t for t in ax.get_xticklabels() if t.get_text() and t.get_visible()]
        lo, hi = ax.get_xlim()
        labels = [t for t in labels if lo <= t.get_position()[0] <= hi]
        texts = [t.get_text() for t in labels]
        assert 1 <= len(texts) <= 5, texts
        assert all(
            "10^" not in t and "times" not in t and "\N{MULTIPLICATION SIGN}" not in t for t in texts
        ), texts  # plain numbers
        assert all(float(t) > 0 for t in texts), texts
        assert [t.get_text() for t in ax.get_xticklabels(minor=True) if t.get_text()] == []
        boxes = sorted((b.x0, b.x1) for b in (t.get_window_extent() for t in labels))
        assert all(a[1] < b[0] for a, b in itertools.pairwise(boxes)), (texts, boxes)
    finally:
        plt.close(fig)


def test_log_ticks():
    assert log_ticks(0.002, 0.02) == [0.002, 0.005, 0.01, 0.02]
    assert log_ticks(1e-4, 1e-1) == [1e-4, 1e-3, 1e-2, 1e-1]
    assert len(log_ticks(1e-9, 1.0)) <= 5
