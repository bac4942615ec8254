"""`sagestack local train` on the init skeleton, as a user sees it: in tmux at 80x24 (the bar with
step/total and an ETA, the metrics on a line of their own, no line wider than the terminal, no word
cut) and in a pipe (one plain line per log window, whole); a --set key the job does not define is a
warning before the run; metrics.json holds the series SageMaker would publish from the same log."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from sagestack.ops.init import init_project
from tests.synth.test_first_ten_minutes import WIDTH, Terminal

pytestmark = pytest.mark.train

WARNING = (
    "warning: --set epoch: the job defines no hyperparameter 'epoch' (did you mean 'epochs'?); "
    "it is passed to the script as --epoch"
)


@pytest.fixture
def demo(tmp_path):
    if shutil.which("tmux") is None:
        pytest.fail("tmux is part of the test set-up (apt-get install tmux)")
    init_project(tmp_path / "demo", "demo")
    term = Terminal(tmp_path / "demo")
    yield tmp_path / "demo", term
    term.close()


def test_the_skeleton_trains_with_a_bar_metrics_and_curves_in_a_terminal_and_a_pipe(demo):
    root, terminal = demo
    code, screen = terminal.run("sagestack local train train --set epoch=3", timeout=600)
    text = "\n".join(screen)
    assert code == 0, text
    assert [line for line in screen if len(line) > WIDTH] == [], text
    # the warning, once, before the run; wrapped between words (joined, it reads whole)
    assert " ".join(" ".join(screen).split()).count(WARNING) == 1, text
    assert screen[0].startswith("warning: --set epoch"), text
    bars = [i for i, line in enumerate(screen) if "━" in line]
    assert bars, text
    bar = screen[bars[-1]]
    assert re.search(r"\b(\d+)/\1\b", bar), bar  # step/total, all done
    assert re.search(r"\d+:\d\d elapsed · eta \d+:\d\d", bar), bar
    assert "=" not in bar, bar  # no metric on the bar's line...
    assert re.match(r"\s+val_accuracy=0\.\d+ train_loss=\d", screen[bars[-1] + 1]), text  # ...but under it
    from sagestack.project import load_project

    defined = list(load_project(root, "dev").spec.jobs["train"].metric_definitions)  # what init wrote
    assert defined[:2] == ["val_accuracy", "train_loss"], defined
    final = next(line for line in screen if line.startswith("✓ trained"))
    shown = " ".join(f"{name}=[0-9.]+" for name in defined)
    assert re.fullmatch(rf"✓ trained train: {shown}", final) and "val_accuracy=0." in final, final
    assert "n/a" not in text

    run = root / ".sagestack" / "local" / "dev" / "train"
    document = json.loads((run / "metrics.json").read_text())
    assert [m["MetricName"] for m in document["FinalMetricDataList"]] == defined
    assert f"val_accuracy={document['FinalMetricDataList'][0]['Value']:.4g}" in final
    assert {(s["MetricName"], s["Dimensions"][0]["Value"]) for s in document["Series"]} == {
        (name, "algo-1") for name in defined
    }
    assert (run / "training_curves.png").stat().st_size > 10_000
    assert "curves: .sagestack/local/dev/train/training_curves.png" in text

    code, piped = terminal.run("sagestack local train train | cat", timeout=600)
    assert code == 0, "\n".join(piped)
    steps = [line for line in piped if line.startswith("step ")]
    assert len(steps) >= 5, piped  # one line per window, not one final line
    for line in steps:
        assert re.fullmatch(r"step (\d+)/(\d+) · \d+:\d\d elapsed · eta (\d+:\d\d|-:--) · \S.*", line), line
    last = re.match(r"step (\d+)/\1 · .* · eta 0:00 · (?P<values>.*)", steps[-1])
    assert last, steps[-1]
    values = dict(pair.split("=") for pair in last["values"].split())
    assert {*defined, "epoch"} <= set(values) and values["val_accuracy"].startswith("0."), steps[-1]
    assert not any("━" in line for line in piped), piped
