"""Bench step: one endpoint's backlog drained with and without ordering keys.

The same run drains N events without keys, then N events spread over N/10 ordering keys
(10 per key, each key's deliveries one at a time), with the same workers; the keyed
figure as a share of the unkeyed one is what ordering costs.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from bench.stack import BenchError, say

if TYPE_CHECKING:
    from bench.measure import Measure as _Base  # mixed into bench.run.Bench with it
else:
    _Base = object

BATCH = 100  # events per POST /events/batch while filling the backlog
EVENTS_PER_KEY = 10


class OrderingSteps(_Base):
    def ordering(self, workers: int) -> None:
        n = self.args.events
        figures: dict[str, Any] = {
            "unkeyed": self._drain_backlog(n, workers, keys=0),
            "keyed": self._drain_backlog(n, workers, keys=max(n // EVENTS_PER_KEY, 1)),
        }
        unkeyed = figures["unkeyed"]["deliveries_per_s"] or 0
        keyed = figures["keyed"]["deliveries_per_s"] or 0
        figures["keyed_share_of_unkeyed"] = round(keyed / unkeyed, 3) if unkeyed else None
        self.results["ordering"] = figures
        say(
            f"ordering: keyed {keyed}/s vs unkeyed {unkeyed}/s "
            f"({figures['keyed_share_of_unkeyed']} of it; target >= 0.6)"
        )

    def _drain_backlog(self, n: int, workers: int, keys: int) -> dict[str, Any]:
        label = f"{keys} keys" if keys else "no keys"
        self.receiver("POST", "/_reset")
        say(f"ordering [{label}]: {n} events into the backlog, no worker running")
        for start in range(0, n, BATCH):
            events = [
                {
                    "type": "bench.ordered",
                    "data": {"n": i},
                    **({"ordering_key": f"key-{i % keys}"} if keys else {}),
                }
                for i in range(start, min(start + BATCH, n))
            ]
            status, body = self.http(
                self.web_port, "POST", "/api/v1/events/batch", {"events": events}, self.auth
            )
            if status != 202:
                raise BenchError(f"a batch answered {status}: {body[:300]!r}")
        launched = time.monotonic()
        running = [*self.start_workers(workers), self.start_scheduler()]
        try:
            complete = self.wait_received(n, running, timeout=self.args.drain_seconds * 3)
            time.sleep(1.0)
        finally:
            self.stop(*running)
        records = self.dump()["records"]
        leftover = self.reset_backlog()
        times = sorted(t for _, t in records) or [launched]
        unique = len({webhook_id for webhook_id, _ in records})
        seconds = times[-1] - times[0]
        figures = {
            "events": n,
            "keys": keys,
            "workers": workers,
            "complete": complete,
            "received": len(records),
            "unique": unique,
            "left_undelivered": leftover,
            "deliveries_per_s": round(unique / seconds, 1) if seconds > 0 else None,
            "seconds_first_to_last": round(seconds, 2),
        }
        say(f"ordering [{label}]: {figures['deliveries_per_s']} deliveries/s, {figures}")
        return figures
