"""`sagestack local train`'s display at 80 columns: the bar keeps step/total, elapsed and ETA with
the metrics on a line of their own; in a pipe, one plain line per log window, never cut; a --set key
the job does not define is a warning with a suggestion."""

from __future__ import annotations

import io
import re

from rich.console import Console

from sagestack.cli.local_training import undefined_keys
from sagestack.cli.training_progress import (
    MIN_PACE_SECONDS,
    Pace,
    Window,
    clock,
    metrics_text,
    plain_line,
    training_progress,
)

DEFINED = ["val_accuracy", "train_loss"]
LONG = {f"metric_number_{i}": 0.123456 + i for i in range(8)}  # far more than 80 columns of metrics


def _terminal() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    # as the CLI makes its consoles (soft_wrap=True: what a print does not fold, the display must)
    console = Console(file=buffer, width=80, force_terminal=True, color_system=None, soft_wrap=True)
    return console, buffer


def _feed(on_metrics, steps=range(10, 101, 10)):  # type: ignore[no-untyped-def]
    for step in steps:
        on_metrics({"step": step, "total_steps": 100, "train_loss": 1 / step, "val_accuracy": 0.5, **LONG})


def test_the_bar_keeps_step_total_and_eta_at_80_columns_with_the_metrics_under_it(monkeypatch):
    import sagestack.cli.training_progress as module

    now = [100.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])
    console, _ = _terminal()
    progress, on_metrics, on_line = training_progress(console, "classifier", 1, 1, DEFINED)
    for step in range(10, 51, 10):  # a report a second: a pace the ETA can be measured from
        _feed(on_metrics, [step])
        now[0] += 1.0
    with console.capture() as captured:
        on_line("sagestack", "launch: " + "word " * 30)  # a host's line above the bar: wrapped too
    lines = captured.get().splitlines()
    assert lines[0].startswith("sagestack launch: word") and lines[1].startswith("word"), lines
    # the display as rich's Live renders it under the CLI's soft-wrapping console: no wrapping of
    # its own, every line cropped at the width (so the display must fold its lines itself)
    options = console.options.update(no_wrap=True, overflow="ignore")
    rendered = console.render_lines(progress.get_renderable(), options, pad=False)  # type: ignore[attr-defined]
    lines = ["".join(segment.text for segment in line).rstrip() for line in rendered]
    assert all(len(line) <= 80 for line in lines), lines
    bar = next(line for line in lines if "━" in line)
    assert re.search(r"\b50/100\b", bar), bar
    assert re.search(r"\d+:\d\d elapsed · eta \d+:\d\d", bar), bar
    assert re.search(r"━{8,}", bar.replace("╺", "━").replace("╸", "━")), f"the bar shrank to nothing: {bar}"
    assert "train_loss" not in bar
    below = "\n".join(lines[lines.index(bar) + 1 :])
    assert below.split()[0] == "val_accuracy=0.5", below  # the job's definitions first
    # the long metrics wrap between pairs, never inside one
    words = below.split()
    assert all(re.fullmatch(r"[a-z_0-9]+=[-0-9.e+]+", w) for w in words), words
    assert {w.split("=")[0] for w in words} == {"val_accuracy", "train_loss", *LONG}


def test_a_pipe_gets_one_plain_line_per_window_never_cut():
    buffer = io.StringIO()
    console = Console(file=buffer, width=80, force_terminal=False, soft_wrap=True)
    context, on_metrics, on_line = training_progress(console, "classifier", 1, 1, DEFINED)
    with context:
        on_line("algo-1", "loading [data] " + "x" * 120)  # brackets are not markup; long lines stay whole
        _feed(on_metrics, range(1, 101))
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "algo-1 loading [data] " + "x" * 120
    steps = [int(m.group(1)) for line in lines if (m := re.match(r"step (\d+)/100 · ", line))]
    assert steps[0] == 1 and steps[-1] == 100 and 10 <= len(steps) <= 12, steps  # every tenth, and the last
    last = lines[-1]
    assert re.fullmatch(
        r"step 100/100 · \d+:\d\d elapsed · eta 0:00 · val_accuracy=0\.5 train_loss=0\.01 .*", last
    )
    assert len(last) > 80 and last.endswith("metric_number_7=7.123"), last  # whole, not cut


def test_the_window_prints_every_tenth_of_the_steps_every_30_seconds_and_the_last_step():
    window = Window(last_time=0.0)
    assert [s for s in range(1, 101) if window.due(s, 100, 0.0)] == [1, *range(10, 101, 10)]
    window = Window(last_time=0.0)
    assert window.due(1, None, 0.0) and not window.due(2, None, 10.0) and window.due(3, None, 31.0)


def test_eta_follows_the_pace_since_the_first_report_not_the_start_up():
    pace = Pace()
    assert pace.eta(5, 105, 60.0) is None  # a minute of start-up before step 5 is no pace
    assert pace.eta(55, 105, 70.0) == 10.0  # 50 steps in 10 s: 50 more take 10 s
    assert pace.eta(105, 105, 80.0) == 0.0
    assert plain_line(55, 105, 70.0, 10.0, {"train_loss": 0.25}, DEFINED) == (
        "step 55/105 · 1:10 elapsed · eta 0:10 · train_loss=0.25"
    )


def test_no_eta_from_reports_read_together_only_from_a_measured_span():
    """The trial's run (init skeleton, 115 steps, a report every 5): steps 5 to 23 reached the CLI
    within milliseconds of each other (read from the pipe together, 24 s into the run), and the line
    said "eta 0:00" at step 23 of 115 — a pace measured over no time. No ETA until the steps since
    the first report span MIN_PACE_SECONDS; then the pace over that span."""
    pace = Pace()
    for i, step in enumerate((5, 10, 15, 20, 23)):
        left = pace.eta(step, 115, 24.0 + i * 0.004)
        assert left is None, (step, left)
    assert plain_line(23, 115, 24.016, None, {}, DEFINED) == "step 23/115 · 0:24 elapsed · eta -:--"
    assert pace.eta(46, 115, 24.0 + MIN_PACE_SECONDS) == MIN_PACE_SECONDS / 41 * 69  # 41 steps measured
    assert pace.eta(115, 115, 30.0) == 0.0  # the last step: nothing left, however fast


def test_a_pipe_shows_no_eta_of_zero_for_steps_read_at_once(monkeypatch):
    import sagestack.cli.training_progress as module

    now = [100.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])
    buffer = io.StringIO()
    console = Console(file=buffer, width=80, force_terminal=False, soft_wrap=True)
    context, on_metrics, _ = training_progress(console, "train", 1, 1, DEFINED)
    with context:
        now[0] += 24.0  # start-up
        for step in (5, 10, 15, 20, 23):
            on_metrics({"step": step, "total_steps": 115})
            now[0] += 0.004
    etas = [line.split(" · ")[2] for line in buffer.getvalue().splitlines()]
    assert etas and "eta 0:00" not in etas, etas


def test_clock_and_metrics_text():
    assert [clock(7), clock(750), clock(3723), clock(None)] == ["0:07", "12:30", "1:02:03", "-:--"]
    text = metrics_text(
        {"step": 3, "total_steps": 9, "epoch": 1.0, "val_accuracy": 0.9, "lr": 0.001}, DEFINED
    )
    assert text == "val_accuracy=0.9 epoch=1 lr=0.001"


def test_a_set_key_the_job_does_not_define_is_a_warning_with_a_suggestion():
    assert undefined_keys({"epoch": 3, "lr": 0.1}, ["epochs", "lr"]) == [
        "--set epoch: the job defines no hyperparameter 'epoch' (did you mean 'epochs'?); "
        "it is passed to the script as --epoch"
    ]
    assert undefined_keys({"zzz": 1}, ["epochs"]) == [
        "--set zzz: the job defines no hyperparameter 'zzz'; it is passed to the script as --zzz"
    ]
    assert undefined_keys({"epochs": 1}, ["epochs"]) == []
