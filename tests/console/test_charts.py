"""The dashboard chart: every y label is the value at the height it is drawn; an empty
chart draws no line over its axis."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from console.charts import BOTTOM, HEIGHT, TOP, attempts_chart

START = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


def labels(largest: int) -> list[tuple[float, str]]:
    chart = attempts_chart(counts={(START, "success"): largest}, start=START, minutes=60)
    return [(tick.position, tick.label) for tick in chart.y_ticks]


def test_a_largest_value_of_one_labels_the_axis_0_and_1():
    # It read "1, 0, 0" top to bottom: the middle tick (0.5) was rounded to 0.
    assert [label for _, label in labels(1)] == ["0", "1"]


@pytest.mark.parametrize("largest", [1, 2, 3, 5, 7, 10, 40, 900, 12_345])
def test_each_label_is_the_value_at_its_height(largest):
    chart = attempts_chart(counts={(START, "success"): largest}, start=START, minutes=60)
    peak = int(chart.y_ticks[-1].label.replace(",", ""))
    plot_h = HEIGHT - TOP - BOTTOM
    for tick in chart.y_ticks:
        value = int(tick.label.replace(",", ""))
        assert tick.position == pytest.approx(TOP + plot_h - value * plot_h / peak)
    assert len({tick.label for tick in chart.y_ticks}) == len(chart.y_ticks)  # no repeats


def test_an_empty_chart_draws_no_line_over_its_axis():
    # The fatal line (red, drawn last) lay on the axis and read as failures.
    empty = attempts_chart(counts={}, start=START, minutes=60)
    assert empty.empty and empty.lines == {}

    one = attempts_chart(counts={(START, "success"): 1}, start=START, minutes=60)
    assert not one.empty and set(one.lines) == {"success", "retryable", "fatal"}
