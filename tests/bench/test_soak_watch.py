"""The soak reads the scheduler's log: each drop's and create's time, and how long it
held the locks others wait on (bench/soak_watch.py)."""

from __future__ import annotations

from pathlib import Path

from bench import soak_watch


def test_drops_and_creates_are_read_with_their_lock_times(tmp_path: Path) -> None:
    log = tmp_path / "scheduler.log"
    log.write_text(
        "2026-11-28 06:11:00,123 INFO dlq.services.retention retention: dropped"
        " 2026-11-28 06:04 .. 2026-11-28 06:05 (deliveries_attempt_p20261128060400,"
        " webhooks_event_p20261128060400) in 630 ms: about 4999998 rows,"
        " history locked for 5 ms\n"
        "2026-11-28 06:11:01,000 INFO deliveries.lifecycle.partitions partitions: created"
        " 2026-11-28 06:13 .. 2026-11-28 06:14 (webhooks_event_p20261128061300) in 12 ms:"
        " webhooks_event_default locked for 3 ms\n"
        "2026-11-28 06:11:02,000 INFO dlq.services.retention retention: kept 2026-11-28"
        " 06:05 .. 2026-11-28 06:06 (x): it holds unfinished deliveries (dlv_1, ...)\n"
    )

    dropped, kept = soak_watch.drops(log)
    created, _ = soak_watch.creates(log)

    assert [(d.ms, d.locked_ms) for d in dropped] == [(630.0, 5.0)]
    assert dropped[0].partitions == [
        "deliveries_attempt_p20261128060400",
        "webhooks_event_p20261128060400",
    ]
    assert [(c.ms, c.locked_ms) for c in created] == [(12.0, 3.0)]
    assert len(kept) == 1 and "unfinished deliveries" in kept[0]
