"""SequenceTracker on every store (memory, Redis, Django/PostgreSQL)."""

from __future__ import annotations

import random
import threading
import uuid
from typing import Any

import pytest
from django.db import connection, connections
from homing_receiver import (
    MemoryStore,
    RedisStore,
    SequenceStore,
    SequenceTracker,
    sequence_from_headers,
)


@pytest.fixture
def endpoint_id() -> str:
    return f"ep_{uuid.uuid4().hex}"


@pytest.fixture
def tracker(store: SequenceStore, endpoint_id: str) -> SequenceTracker:
    return SequenceTracker(store, endpoint_id)


def see_all(tracker: SequenceTracker, *sequences: int) -> None:
    for sequence in sequences:
        tracker.see(sequence)


def stored_above_mark(store: Any, endpoint_id: str) -> int:
    """What the store really keeps for the endpoint, read behind the tracker's back."""
    if isinstance(store, MemoryStore):
        return len(store.sequence_state(endpoint_id)[1])
    if isinstance(store, RedisStore):
        return int(store._redis.zcard(store._sequence_keys(endpoint_id)[1]))
    from homing_receiver.django.models import SeenSequence

    return SeenSequence.objects.filter(endpoint_id=endpoint_id).count()


def test_a_new_endpoint_has_seen_nothing(tracker: SequenceTracker) -> None:
    assert tracker.last_contiguous() == 0
    assert tracker.gaps() == []


def test_sequences_in_order_advance_the_mark(tracker: SequenceTracker) -> None:
    see_all(tracker, 1, 2, 3, 4, 5)

    assert tracker.last_contiguous() == 5
    assert tracker.gaps() == []


def test_out_of_order_sequences_leave_gaps_until_they_are_filled(
    tracker: SequenceTracker,
) -> None:
    see_all(tracker, 3, 1, 7, 5)

    assert tracker.last_contiguous() == 1
    assert tracker.gaps() == [(2, 2), (4, 4), (6, 6)]

    tracker.see(2)
    assert tracker.last_contiguous() == 3
    assert tracker.gaps() == [(4, 4), (6, 6)]

    see_all(tracker, 6, 4)
    assert tracker.last_contiguous() == 7
    assert tracker.gaps() == []


def test_a_gap_names_the_whole_missing_range(tracker: SequenceTracker) -> None:
    see_all(tracker, 1, 2, 10, 11, 20)

    assert tracker.gaps() == [(3, 9), (12, 19)]
    assert tracker.state().seen_above == (10, 11, 20)


def test_seeing_a_sequence_again_changes_nothing(tracker: SequenceTracker) -> None:
    see_all(tracker, 1, 1, 4, 4, 2, 2, 1)

    assert tracker.last_contiguous() == 2
    assert tracker.gaps() == [(3, 3)]


def test_only_sequences_above_the_mark_are_stored(
    store: SequenceStore, tracker: SequenceTracker, endpoint_id: str
) -> None:
    # 2..2501: more than one read chunk of DjangoStore's advance.
    see_all(tracker, *range(2, 2502))
    assert stored_above_mark(store, endpoint_id) == 2500
    assert tracker.gaps() == [(1, 1)]

    tracker.see(1)

    assert tracker.last_contiguous() == 2501
    assert stored_above_mark(store, endpoint_id) == 0


def test_endpoints_are_tracked_apart(store: SequenceStore, endpoint_id: str) -> None:
    alice = SequenceTracker(store, endpoint_id + "_alice")
    bob = SequenceTracker(store, endpoint_id + "_bob")

    see_all(alice, 1, 2, 3)
    bob.see(2)

    assert (alice.last_contiguous(), alice.gaps()) == (3, [])
    assert (bob.last_contiguous(), bob.gaps()) == (0, [(1, 1)])


def test_reset_treats_everything_up_to_it_as_seen_and_keeps_what_is_above(
    store: SequenceStore, tracker: SequenceTracker, endpoint_id: str
) -> None:
    see_all(tracker, 1, 2, 4, 6, 9)

    tracker.reset(to=5)

    assert tracker.last_contiguous() == 6
    assert tracker.gaps() == [(7, 8)]
    assert stored_above_mark(store, endpoint_id) == 1

    tracker.reset(to=0)
    assert tracker.last_contiguous() == 0
    assert tracker.gaps() == [(1, 8)]


def test_large_sequences_are_kept_exactly(tracker: SequenceTracker) -> None:
    # Redis' Lua would write 1e+15 for these with tostring().
    big = 10**15
    tracker.reset(to=big)
    see_all(tracker, big + 1, big + 3)

    assert tracker.last_contiguous() == big + 1
    assert tracker.gaps() == [(big + 2, big + 2)]
    tracker.see(2**53)
    assert tracker.state().seen_above == (big + 3, 2**53)


@pytest.mark.parametrize("bad", [0, -1, 2**53 + 1])
def test_a_sequence_out_of_range_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        SequenceTracker(MemoryStore(), "ep_1").see(bad)


@pytest.mark.parametrize("bad", [True, "3", 3.0, None])
def test_a_sequence_that_is_not_an_int_is_refused(bad: Any) -> None:
    with pytest.raises(TypeError, match="sequence is an int"):
        SequenceTracker(MemoryStore(), "ep_1").see(bad)


def test_redis_store_works_with_decoded_responses(redis_url: str, redis_prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    tracker = SequenceTracker(RedisStore(client, sequence_prefix=redis_prefix), "ep_1")

    see_all(tracker, 3, 1)

    assert (tracker.last_contiguous(), tracker.gaps()) == (1, [(2, 2)])
    client.close()


def test_redis_keys_of_one_endpoint_share_a_cluster_slot(redis_client: Any) -> None:
    mark, seen = RedisStore(redis_client)._sequence_keys("ep_1")

    assert (mark, seen) == ("homing:sequence:{ep_1}:mark", "homing:sequence:{ep_1}:seen")


def test_many_threads_seeing_shuffled_sequences_end_with_the_right_mark(
    store: SequenceStore, tracker: SequenceTracker, endpoint_id: str
) -> None:
    if type(store).__name__ == "DjangoStore" and connection.vendor != "postgresql":
        pytest.skip("concurrent see() is only promised on PostgreSQL")
    sequences = list(range(1, 401)) * 2  # every one twice: duplicates race too
    random.Random(7).shuffle(sequences)
    threads_count = 16
    shares = [sequences[i::threads_count] for i in range(threads_count)]
    barrier = threading.Barrier(threads_count)
    errors: list[BaseException] = []

    def worker(share: list[int]) -> None:
        try:
            barrier.wait()
            see_all(tracker, *share)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()  # DjangoStore opened one per thread

    threads = [threading.Thread(target=worker, args=(share,)) for share in shares]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert errors == []
    assert tracker.last_contiguous() == 400
    assert tracker.gaps() == []
    assert stored_above_mark(store, endpoint_id) == 0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"homing-sequence": "42"}, 42),
        ({"Homing-Sequence": " 7 "}, 7),
        ({"HTTP_HOMING_SEQUENCE": "9"}, 9),  # a WSGI environ
        ([(b"homing-sequence", b"12")], 12),  # ASGI scope headers
        ({"webhook-id": "msg_1"}, None),
    ],
)
def test_sequence_from_headers_reads_every_header_shape(headers: Any, expected: int) -> None:
    assert sequence_from_headers(headers) == expected


@pytest.mark.parametrize("value", ["abc", "0", "-3", "1e3", "4.0", "1" * 16, ""])
def test_sequence_from_headers_ignores_a_malformed_value_with_a_warning(
    value: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="homing_receiver"):
        assert sequence_from_headers({"homing-sequence": value}) is None

    assert "malformed homing-sequence" in caplog.text
