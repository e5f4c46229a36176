"""The line of deliveries claimed ahead: first in, first out, per endpoint, and none
sent after waiting too long."""

from __future__ import annotations

import time

from deliveries.worker.line import NextInLine


def test_each_endpoint_has_its_own_line_first_in_first_out() -> None:
    line: NextInLine[str] = NextInLine(max_wait=5)
    for item in ("a1", "a2"):
        line.join("a", item)
    line.join("b", "b1")
    assert (line.waiting("a"), line.waiting("b"), line.waiting("c")) == (2, 1, 0)
    assert [line.next("a"), line.next("a"), line.next("a")] == ["a1", "a2", None]
    assert line.next("b") == "b1" and line.waiting("b") == 0


def test_one_that_waited_too_long_is_not_sent_but_taken_out_to_be_given_back() -> None:
    line: NextInLine[str] = NextInLine(max_wait=0.05)
    line.join("a", "old")
    time.sleep(0.06)
    line.join("a", "new")
    assert line.next("a") is None  # the first waited too long: nothing goes
    assert line.leave(waited=0.05) == ["old"]
    assert line.next("a") == "new"


def test_leaving_with_no_wait_empties_every_line() -> None:
    line: NextInLine[str] = NextInLine(max_wait=5)
    line.join("a", "a1")
    line.join("b", "b1")
    assert sorted(line.leave(waited=0)) == ["a1", "b1"]
    assert line.waiting("a") == line.waiting("b") == 0
