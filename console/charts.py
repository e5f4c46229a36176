"""The dashboard's attempts-per-minute chart, drawn server side as SVG geometry.

Pure: takes per-minute counts, returns coordinates the template writes into an <svg>.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

OUTCOMES = ("success", "retryable", "fatal")
WIDTH, HEIGHT = 720, 220  # viewBox units; the stylesheet scales it to the page width
LEFT, RIGHT, TOP, BOTTOM = 48, 8, 10, 24  # room for the axis labels


@dataclass(frozen=True)
class Tick:
    position: float
    label: str


@dataclass
class Chart:
    width: int = WIDTH
    height: int = HEIGHT
    lines: dict[str, str] = field(default_factory=dict)  # outcome -> polyline points
    totals: dict[str, int] = field(default_factory=dict)
    x_ticks: list[Tick] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    left: int = LEFT
    right_edge: int = WIDTH - RIGHT
    baseline: int = HEIGHT - BOTTOM
    empty: bool = True
    mid_x: float = LEFT + (WIDTH - LEFT - RIGHT) / 2
    mid_y: float = TOP + (HEIGHT - TOP - BOTTOM) / 2


def _nice_ceiling(value: int) -> int:
    """The smallest of 1, 2, 5 times 10^k at or above `value` (a readable axis maximum)."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor >= value:
                return step * factor
        step *= 10


def attempts_chart(
    *, counts: Mapping[tuple[datetime, str], int], start: datetime, minutes: int
) -> Chart:
    """`counts[(minute, outcome)]`: attempts; one point per minute from `start`."""
    chart = Chart()
    peak = _nice_ceiling(max(counts.values(), default=0) or 1)
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    step = plot_w / max(minutes - 1, 1)
    for outcome in OUTCOMES:
        values = [counts.get((start + timedelta(minutes=i), outcome), 0) for i in range(minutes)]
        chart.totals[outcome] = sum(values)
        chart.lines[outcome] = " ".join(
            f"{LEFT + i * step:.1f},{TOP + plot_h - value * plot_h / peak:.1f}"
            for i, value in enumerate(values)
        )
    chart.empty = not any(chart.totals.values())
    # Attempts are whole: a middle tick only where half the peak is a whole number (with a
    # peak of 1 or 5, "0.5" rounded to "0" labelled the wrong height).
    values = [0, peak // 2, peak] if peak % 2 == 0 else [0, peak]
    chart.y_ticks = [
        Tick(position=TOP + plot_h - value * plot_h / peak, label=f"{value:,}") for value in values
    ]
    for i in range(0, minutes, 60):
        moment = start + timedelta(minutes=i)
        chart.x_ticks.append(Tick(position=LEFT + i * step, label=moment.strftime("%H:%M")))
    return chart
