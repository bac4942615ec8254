"""What `sagestack local train` shows while the run goes: in a terminal, a bar with step/total,
elapsed and ETA on one line and the latest metrics on a line of their own under it (the bar
shrinks before either goes, at any width); elsewhere (a pipe, a CI log), one plain line per log
window, never cut to the terminal's width."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sagestack.ops.screen import fit

if TYPE_CHECKING:
    from rich.console import Console

# values of a `metrics:` line that say where the run is, not how it does
POSITION = ("step", "total_steps")
WINDOW_SECONDS = 30.0  # a plain line at least this often while steps advance...
WINDOW_FRACTION = 0.1  # ...and at every tenth of the steps


def clock(seconds: float | None) -> str:
    """0:07, 12:30, 1:02:03; '-:--' when unknown."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "-:--"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def metrics_text(values: dict[str, float], first: Iterable[str] = ()) -> str:
    """name=value pairs: the job's metric definitions first (in their order), then the rest."""
    order = [k for k in first if k in values] + sorted(k for k in values if k not in set(first))
    shown = []
    for name in order:
        if name in POSITION:
            continue
        value = values[name]
        shown.append(f"{name}={int(value)}" if name == "epoch" else f"{name}={value:.4g}")
    return " ".join(shown)


def wrap_pairs(text: str, width: int) -> list[str]:
    """name=value pairs on lines of at most `width` columns, broken between pairs only."""
    return fit(text, width, "", "") if text.strip() else []


# The least time the steps since the first report must span before their pace is an estimate.
# A report's time is when the CLI read its line, not when the step ended: lines written while the
# CLI was not scheduled arrive together, and fast steps (the init skeleton's take a millisecond)
# report faster than that. A pace over milliseconds said "eta 0:00" at step 23 of 115.
MIN_PACE_SECONDS = 2.0


@dataclass
class Pace:
    """The time left at the pace of the steps since the first one reported (the seconds before it,
    starting the processes and loading data, are no measure of a step); none (shown '-:--') until
    those steps span MIN_PACE_SECONDS."""

    first: tuple[int, float] | None = None  # (step, elapsed) of the first report

    def eta(self, step: int, total: int | None, elapsed: float) -> float | None:
        if self.first is None:
            self.first = (step, elapsed)
        if not total:
            return None
        if step >= total:
            return 0.0
        first_step, first_elapsed = self.first
        span = elapsed - first_elapsed
        if step <= first_step or span < MIN_PACE_SECONDS:
            return None
        return span / (step - first_step) * (total - step)


def plain_line(
    step: int,
    total: int | None,
    elapsed: float,
    left: float | None,
    values: dict[str, float],
    first: Iterable[str],
) -> str:
    """`step 40/100 · 0:12 elapsed · eta 0:18 · train_loss=0.21 val_accuracy=0.91`"""
    position = f"step {step}/{total}" if total else f"step {step}"
    parts = [position, f"{clock(elapsed)} elapsed"]
    if total:
        parts.append(f"eta {clock(left)}")
    text = metrics_text(values, first)
    return " · ".join([*parts, text] if text else parts)


@dataclass
class Window:
    """When a plain line is due: each tenth of the steps, every WINDOW_SECONDS, and the last step."""

    last_step: int = -1
    last_time: float = 0.0
    printed: list[int] = field(default_factory=list)

    def due(self, step: int, total: int | None, now: float) -> bool:
        if step <= self.last_step:
            return False
        every = max(1, int(total * WINDOW_FRACTION)) if total else None
        if (
            (total and step >= total)
            or (every and step // every > max(self.last_step, 0) // every)
            or now - self.last_time >= WINDOW_SECONDS
            or self.last_step < 0
        ):
            self.last_step, self.last_time = step, now
            self.printed.append(step)
            return True
        return False


Callbacks = tuple[
    AbstractContextManager[object], Callable[[dict[str, float]], None], Callable[[str, str], None]
]


def training_progress(out: Console, job: str, hosts: int, procs: int, definitions: list[str]) -> Callbacks:
    """The display's context and the run's callbacks that feed it (`on_metrics`, `on_line`)."""
    if out.is_terminal:
        return _live(out, f"{job} {hosts}x{procs}", definitions)
    return _plain(out, definitions)


def _host_line(host: str, line: str) -> object:
    from rich.text import Text

    return Text.assemble((host, "dim"), " ", line)  # the line as written: no markup read in it


def _plain(out: Console, definitions: list[str]) -> Callbacks:
    start = time.monotonic()
    stats: dict[str, float] = {}
    window, pace = Window(last_time=start), Pace()

    def on_metrics(values: dict[str, float]) -> None:
        stats.update(values)
        if "step" not in values:
            return
        step, total = int(values["step"]), int(stats.get("total_steps", 0)) or None
        now = time.monotonic()
        left = pace.eta(step, total, now - start)
        if window.due(step, total, now):
            line = plain_line(step, total, now - start, left, stats, definitions)
            out.print(line, soft_wrap=True, markup=False, highlight=False)

    def on_line(host: str, line: str) -> None:
        if line and not line.startswith("metrics:"):
            out.print(_host_line(host, line), soft_wrap=True, highlight=False)

    @contextmanager
    def nothing() -> Iterator[None]:
        yield

    return nothing(), on_metrics, on_line


def _live(out: Console, label: str, definitions: list[str]) -> Callbacks:
    from rich.console import RenderableType
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn
    from rich.table import Column
    from rich.text import Text

    class Times(ProgressColumn):
        def render(self, task: Task) -> Text:
            elapsed = task.finished_time if task.finished else task.elapsed
            left = task.fields.get("left")
            if left is not None and task.finished_time is None:  # counts down between reports
                left = max(0.0, left - (time.monotonic() - task.fields["at"]))
            return Text(f"{clock(elapsed)} elapsed · eta {clock(left)}", style="progress.elapsed")

    class BarAndMetrics(Progress):
        metrics = ""

        def get_renderables(self) -> Iterable[RenderableType]:
            yield self.make_tasks_table(self.tasks)
            for line in wrap_pairs(self.metrics, out.width - 2):  # folded here: the live
                yield Text("  " + line, style="cyan", overflow="fold")  # display may not wrap

    progress = BarAndMetrics(
        TextColumn(f"[bold]{label}[/]", table_column=Column(no_wrap=True, overflow="ellipsis", max_width=24)),
        BarColumn(bar_width=None, table_column=Column(min_width=8, ratio=1)),
        MofNCompleteColumn(),
        Times(),
        console=out,
        transient=False,
        expand=True,
    )
    task = progress.add_task("train", total=None, left=None, at=0.0)
    stats: dict[str, float] = {}
    pace, start = Pace(), time.monotonic()

    def on_metrics(values: dict[str, float]) -> None:
        stats.update(values)
        total = values.get("total_steps")
        if total:
            progress.update(task, total=int(total))
        progress.metrics = metrics_text(stats, definitions)
        if "step" in values:
            now = time.monotonic()
            step, known = int(values["step"]), int(stats.get("total_steps", 0)) or None
            left = pace.eta(step, known, now - start)
            progress.update(task, completed=step, left=left, at=now)
        progress.refresh()

    def on_line(host: str, line: str) -> None:
        if line and not line.startswith("metrics:"):
            progress.console.print(_host_line(host, line), highlight=False, soft_wrap=False)

    return progress, on_metrics, on_line
