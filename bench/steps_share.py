"""Bench step: a quiet tenant beside another tenant's slow-but-healthy endpoints.

Tenant A has 10 endpoints that answer `200` after 9 s (healthy: no circuit opens) and a
backlog of 30,000 deliveries; once its attempts have filled what they may of the Procfile's
one worker, tenant B posts 30 events/s to a fast endpoint. B's first attempts' start
(202 -> the receiver) p50/p99 is the figure (target p99 <= 2 s), with
HOMING_TENANT_SHARE=1 (no share: A may hold every place) and at its default 0.5.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from bench import load
from bench.stack import event_body, say

if TYPE_CHECKING:
    from bench.steps_flow import FlowSteps as _Base  # mixed into bench.run.Bench with it
else:
    _Base = object

SLOW_ENDPOINTS = 10
SLOW_SECONDS = 9
SLOW_EVENTS = 3_000  # to each of the 10 endpoints: 30,000 deliveries
QUIET_RATE = 30.0  # events/s


class ShareSteps(_Base):
    def tenant_share(self) -> None:
        runs = {share: self._share_run(share) for share in ("1", "0.5")}
        self.results["tenant_share"] = {"target_p99_ms": 2000, **runs}
        say(
            "tenant share: the quiet tenant's first attempts beside 10 slow endpoints: "
            + "; ".join(
                f"HOMING_TENANT_SHARE={share} p99 {r['p99_ms']} ms (p50 {r['p50_ms']} ms)"
                for share, r in runs.items()
            )
            + " (target p99 <= 2000 ms)"
        )

    def _share_run(self, share: str) -> dict[str, Any]:
        self.reset_backlog()
        _, slow_auth = self.create_tenant(f"share-{share}-slow")
        for k in range(SLOW_ENDPOINTS):
            self.create_endpoint(
                slow_auth,
                url=f"http://127.0.0.1:{self.receiver_port}/slow/{SLOW_SECONDS}/s{share}-{k}",
            )
        _, quiet_auth = self.create_tenant(f"share-{share}-quiet")
        self.create_endpoint(quiet_auth, url=f"http://127.0.0.1:{self.receiver_port}/hook/q")
        self.receiver("POST", "/_reset")
        events = SLOW_EVENTS if not self.args.quick else SLOW_EVENTS // 3
        say(
            f"tenant share [{share}]: queueing {events} events x {SLOW_ENDPOINTS} slow "
            f"endpoints ({SLOW_SECONDS} s each), then 1 worker"
        )
        self.queue_events(slow_auth, events)
        seconds = 5 if self.args.quick else 10
        with self.extra_env(HOMING_TENANT_SHARE=share):
            running = [*self.start_workers(1), self.start_scheduler()]
        try:
            deadline = time.monotonic() + 30
            while self.dump()["slow"]["open"] < 150 and time.monotonic() < deadline:
                time.sleep(0.2)  # the slow tenant's attempts fill the worker first
            result = load.paced(
                port=self.web_port,
                path="/api/v1/events",
                rate=QUIET_RATE,
                duration=seconds,
                headers=quiet_auth,
                body=event_body,
            )
            sent = {s.event_id: s.done_at for s in result.ok}
            self.wait_received(len(sent), running, timeout=SLOW_SECONDS * 3)
            dump = self.dump()
        finally:
            self.stop(*running)
        self.reset_backlog()
        seen: dict[str, float] = {}
        for webhook_id, at in dump["records"]:
            seen.setdefault(webhook_id, at)
        starts = [seen[i] - t for i, t in sent.items() if i in seen]
        figures = {
            "share": float(share),
            "quiet_events": len(sent),
            "quiet_seen": len(starts),
            "p50_ms": round(load.percentile(starts, 50) * 1e3, 1) if starts else None,
            "p99_ms": round(load.percentile(starts, 99) * 1e3, 1) if starts else None,
            "max_ms": round(max(starts) * 1e3, 1) if starts else None,
            "slow_requests": dump["slow"]["requests"],
            "slow_most_open": dump["slow"]["most_open"],
        }
        say(
            f"tenant share [{share}]: quiet tenant's starts p50 {figures['p50_ms']} ms, p99 "
            f"{figures['p99_ms']} ms ({len(starts)}/{len(sent)} seen); the slow tenant had at "
            f"most {figures['slow_most_open']} requests open"
        )
        return figures
