"""The sweep drawn: latency against throughput, a line per configuration, the target drawn on it —
as a PNG (matplotlib, Agg: no display) and as text for an 80-column terminal."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sagestack.local.bench.report import Point, Sweep

MARKS = "ABCDEFGHJKLMNPQRSTUVWXYZ"


@dataclass(frozen=True)
class Panel:
    """One plot: a figure of the points against their requests per second, and its target."""

    figure: str  # a Point field: p95_ms, ttft_p95_ms, tokens_per_second
    label: str
    target: float | None
    upper: bool  # the target is a ceiling (latency) rather than a floor (tokens/s)


def panels(targets: dict[str, float], llm: bool) -> list[Panel]:
    if llm:
        return [
            Panel("ttft_p95_ms", "time to first token, p95 (ms)", targets.get("ttft_ms"), True),
            Panel("tokens_per_second", "tokens/s per user (median)", targets.get("tokens_per_second"), False),
        ]
    figure = "p99_ms" if "p99_ms" in targets and "p95_ms" not in targets else "p95_ms"
    return [Panel(figure, f"latency {figure[:3]} (ms)", targets.get(figure), True)]


def _series(points: Sequence[Point], figure: str) -> dict[str, list[tuple[float, float]]]:
    found: dict[str, list[tuple[float, float]]] = {}
    for p in points:
        y = getattr(p, figure)
        if y is not None and not math.isnan(y):
            found.setdefault(p.configuration, []).append((p.requests_per_second, y))
    return found


def write_png(
    path: Path, points: Sequence[Point], targets: dict[str, float], title: str, *, llm: bool
) -> None:
    """The chart as a PNG: per configuration, p50 / p95 / p99 (an LLM: time to first token and
    tokens/s per user) against requests per second; the targets as dashed red lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = panels(targets, llm)
    fig, axes = plt.subplots(1, len(shown), figsize=(6.4 * len(shown), 4.8), squeeze=False)
    for ax, panel in zip(axes[0], shown, strict=True):
        for i, (name, xy) in enumerate(_series(points, panel.figure).items()):
            color = f"C{i % 10}"
            xs, ys = zip(*xy, strict=True)
            ax.plot(xs, ys, marker="o", color=color, label=f"{MARKS[i % len(MARKS)]}  {name}")
            if not llm:  # the other percentiles, fainter
                for other, style in (("p50_ms", ":"), ("p99_ms", "--")):
                    oxy = _series([p for p in points if p.configuration == name], other).get(name, [])
                    if other != panel.figure and oxy:
                        ox, oy = zip(*oxy, strict=True)
                        ax.plot(ox, oy, linestyle=style, color=color, alpha=0.5)
        if panel.target is not None:
            ax.axhline(panel.target, color="red", linestyle="--", label=f"target {panel.target:g}")
        if not llm and panel.figure == "p95_ms" and "p99_ms" in targets:
            ax.axhline(targets["p99_ms"], color="red", linestyle="-.", alpha=0.6, label="target p99")
        if "requests_per_second" in targets:
            ax.axvline(targets["requests_per_second"], color="red", linestyle=":", label="target req/s")
        ax.set_xlabel("throughput (requests/s)")
        ax.set_ylabel(panel.label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    if not llm:
        axes[0][0].text(0.01, 0.01, "dotted: p50, dashed: p99", transform=axes[0][0].transAxes, fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def draw(sweep: Sweep, path: Path) -> None:
    """A run's chart as `local bench` writes it (the docs' pictures are drawn from recorded runs here)."""
    write_png(path, sweep.points, sweep.targets, sweep.title, llm=sweep.llm)


def text_chart(points: Sequence[Point], panel: Panel, width: int = 80, height: int = 12) -> list[str]:
    """The panel as lines of at most `width` characters: each configuration's points by its letter
    (the legend below), the target as a row of '-', requests/s along the bottom."""
    series = _series(points, panel.figure)
    xy = [v for values in series.values() for v in values]
    if not xy:
        return [f"{panel.label}: nothing measured"]
    ys = [y for _, y in xy] + ([panel.target] if panel.target is not None else [])
    x_max = max(x for x, _ in xy) * 1.05 or 1.0
    y_max = max(ys) * 1.1 or 1.0
    left = 8
    cols = width - left - 1
    grid = [[" "] * cols for _ in range(height)]

    def row(y: float) -> int:
        return min(height - 1, max(0, height - 1 - round(y / y_max * (height - 1))))

    if panel.target is not None:
        for c in range(cols):
            grid[row(panel.target)][c] = "-"
    for i, values in enumerate(series.values()):
        for x, y in values:
            grid[row(y)][min(cols - 1, round(x / x_max * (cols - 1)))] = MARKS[i % len(MARKS)]
    lines = [panel.label + (f" (target {panel.target:g}: ---)" if panel.target is not None else "")]
    for r, cells in enumerate(grid):
        value = y_max * (height - 1 - r) / (height - 1)
        label = f"{value:>7.4g}" if r in (0, height // 2, height - 1) else " " * 7
        lines.append(f"{label}|{''.join(cells)}".rstrip())
    lines.append(" " * left + "+" + "-" * (cols - 1))
    right = f"{x_max:.4g} req/s"
    lines.append(" " * left + "0" + right.rjust(cols - 1))
    for i, name in enumerate(series):
        lines.append(f"  {MARKS[i % len(MARKS)]}  {name}"[:width])
    return lines
