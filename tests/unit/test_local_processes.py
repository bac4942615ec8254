"""A run's processes end with it: when one host fails, SageMaker fails the job and stops the other
hosts, so the local run stops them too (a rank waiting for a dead peer would otherwise wait out its
collective's timeout) and reports the failed host's code."""

from __future__ import annotations

import sys
from pathlib import Path

from sagestack.local.training.processes import Command, Processes


def test_the_first_failure_stops_the_other_hosts(tmp_path: Path) -> None:
    finished = tmp_path / "algo-1-finished"
    waiting = f"import time, pathlib; time.sleep(30); pathlib.Path({str(finished)!r}).touch()"
    commands = [
        Command([sys.executable, "-c", waiting], tmp_path, {}, tmp_path / "algo-1.log"),
        Command(
            [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"],
            tmp_path,
            {},
            tmp_path / "algo-2.log",
        ),
    ]
    lines: list[tuple[str, str]] = []
    outcome = Processes(commands).follow(
        interrupt_at=None, on_line=lambda label, text: lines.append((label, text)), on_metrics=lambda _: None
    )
    assert outcome.failed == 1 and outcome.exit_code == 3
    assert outcome.codes[1] == 3 and outcome.codes[0] != 0  # algo-1 was stopped, not left to finish
    assert not finished.exists()
    assert ("algo-2", "boom") in lines


def test_a_run_that_succeeds_has_no_failure(tmp_path: Path) -> None:
    commands = [
        Command([sys.executable, "-c", "pass"], tmp_path, {}, tmp_path / f"algo-{i}.log") for i in (1, 2)
    ]
    outcome = Processes(commands).follow(
        interrupt_at=None, on_line=lambda *_: None, on_metrics=lambda _: None
    )
    assert outcome.codes == [0, 0] and outcome.failed is None and outcome.exit_code == 0


def test_interrupt_at_n_kills_the_run_at_step_n_not_after_it(tmp_path: Path) -> None:
    """`local train --interrupt-at N` stands for a spot reclaim at step N: the run is killed once a
    `metrics:` line reaches step N, so the resume starts from N's checkpoint (not N+1's)."""
    after = tmp_path / "kept-running"
    script = (
        "import sys, time, pathlib\n"
        "for step in (1, 2, 3, 4):\n"
        "    print(f'metrics: step={step} loss={1 / step}', flush=True)\n"
        "    time.sleep(0.1 if step < 2 else 10)\n"
        f"pathlib.Path({str(after)!r}).touch()\n"
    )
    commands = [Command([sys.executable, "-c", script], tmp_path, {}, tmp_path / "algo-1.log")]
    seen: list[dict[str, float]] = []
    outcome = Processes(commands).follow(interrupt_at=2, on_line=lambda *_: None, on_metrics=seen.append)
    assert outcome.interrupted_at == 2
    assert [m["step"] for m in outcome.metrics] == [1.0, 2.0]
    assert outcome.codes[0] != 0 and not after.exists()
    # a step the script skips over still interrupts at the first step past it
    jumping = script.replace("(1, 2, 3, 4)", "(1, 5, 6)")
    commands = [Command([sys.executable, "-c", jumping], tmp_path, {}, tmp_path / "algo-2.log")]
    outcome = Processes(commands).follow(interrupt_at=2, on_line=lambda *_: None, on_metrics=lambda _: None)
    assert outcome.interrupted_at == 5
