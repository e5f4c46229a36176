"""rate_limit as GCRA: evenly spaced send times, shared through Redis or in-process."""

from __future__ import annotations

import itertools

import pytest

from deliveries.worker import rate_limits


@pytest.fixture(params=["redis", "in-process"])
def where(request, settings):
    if request.param == "in-process":
        settings.REDIS_URL = ""
    rate_limits._local_tat.clear()
    return request.param


def test_it_spaces_attempts_evenly_and_refuses_beyond_the_hold(where) -> None:
    endpoint = f"ep_gcra_{where}_{id(where)}"
    delays = rate_limits.send_delays(
        endpoint_ids=[endpoint] * 12 + ["ep_free"], limits={endpoint: 5}, hold=2.0
    )
    held, refused = [d for d in delays[:12] if d >= 0], [d for d in delays[:12] if d < 0]
    assert len(held) == 10 and len(refused) == 2
    gaps = [b - a for a, b in itertools.pairwise(held)]
    assert all(0.2 < gap < 0.23 for gap in gaps)  # wider than 1/5 s: never 6 in a second
    assert held[0] < 0.05
    assert delays[12] == 0.0  # no limit: no wait
    # A second batch continues the same schedule rather than starting again.
    [later] = rate_limits.send_delays(endpoint_ids=[endpoint], limits={endpoint: 5}, hold=5.0)
    assert later > 1.5  # slot 11 of the same schedule (about 2.1 s), not a fresh one


def test_refused_attempts_do_not_use_up_the_schedule(where) -> None:
    endpoint = f"ep_refuse_{where}_{id(where)}"
    first = rate_limits.send_delays(endpoint_ids=[endpoint] * 3, limits={endpoint: 1}, hold=0.5)
    assert first[0] >= 0 and first[1] < 0 and first[2] < 0
    assert -first[1] == pytest.approx(1.1, abs=0.05)  # ask again when the next slot comes
    [again] = rate_limits.send_delays(endpoint_ids=[endpoint], limits={endpoint: 1}, hold=2.0)
    assert 0.7 < again <= 1.11  # the refused ones took no slot: the next is still ~1.1 s
