"""The attempts charts (the dashboard's per minute, an endpoint's per period bucket),
drawn server side as SVG geometry.

Pure: takes counts per interval, returns coordinates the template writes into an <svg>.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

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
    starts = [start + timedelta(minutes=i) for i in range(minutes)]
    series = {o: [counts.get((at, o), 0) for at in starts] for o in OUTCOMES}
    return _draw(series=series, starts=starts, tick_every=60, label="%H:%M")


def buckets_chart(*, buckets: Sequence[Any], tick_every: int, label: str) -> Chart:
    """One point per bucket (`start` and a count per outcome, as the endpoint statistics'
    buckets), an x label every `tick_every` buckets formatted by `label` (strftime)."""
    series = {o: [getattr(b, o) for b in buckets] for o in OUTCOMES}
    return _draw(
        series=series, starts=[b.start for b in buckets], tick_every=tick_every, label=label
    )


def _draw(
    *, series: Mapping[str, list[int]], starts: list[datetime], tick_every: int, label: str
) -> Chart:
    chart = Chart()
    points = len(starts)
    peak = _nice_ceiling(max((v for values in series.values() for v in values), default=0) or 1)
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    step = plot_w / max(points - 1, 1)
    for outcome in OUTCOMES:
        chart.totals[outcome] = sum(series[outcome])
    chart.empty = not any(chart.totals.values())
    # No lines on an empty chart: all three lie on the axis, the last drawn (fatal, red)
    # over it, and read as failures.
    for outcome in () if chart.empty else OUTCOMES:
        chart.lines[outcome] = " ".join(
            f"{LEFT + i * step:.1f},{TOP + plot_h - value * plot_h / peak:.1f}"
            for i, value in enumerate(series[outcome])
        )
    # Attempts are whole: a middle tick only where half the peak is a whole number (with a
    # peak of 1 or 5, "0.5" rounded to "0" labelled the wrong height).
    values = [0, peak // 2, peak] if peak % 2 == 0 else [0, peak]
    chart.y_ticks = [
        Tick(position=TOP + plot_h - value * plot_h / peak, label=f"{value:,}") for value in values
    ]
    for i in range(0, points, tick_every):
        chart.x_ticks.append(Tick(position=LEFT + i * step, label=starts[i].strftime(label)))
    return chart


# The endpoint statistics' periods (dlq.selectors.STATS_PERIODS): an x label every so many
# buckets, and how to write it.
PERIOD_TICKS = {"1h": (15, "%H:%M"), "24h": (16, "%H:%M"), "7d": (24, "%a %d")}


def endpoint_stats_chart(*, period: str, buckets: Sequence[Any]) -> Chart:
    """The endpoint page's chart (console and portal) of dlq.selectors.endpoint_stats."""
    tick_every, label = PERIOD_TICKS[period]
    return buckets_chart(buckets=buckets, tick_every=tick_every, label=label)
