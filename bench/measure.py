"""Shared measuring helpers of the bench steps: CPU per process, load figures,
webhook-id accounting, signature checks and py-spy."""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from bench import load, procs
from bench import profile as pyspy
from bench.stack import BenchError, say

if TYPE_CHECKING:
    from bench.stack import Stack as _Base  # the mixin's attributes are the Stack's
else:
    _Base = object


class Measure(_Base):
    def _check(self, records: list[list[Any]], ids: AbstractSet[str | None]) -> dict[str, int]:
        counts = Counter(webhook_id for webhook_id, _ in records)
        return {
            "accepted": len(ids),
            "received": len(records),
            "unique_seen": len(set(counts) & ids),
            "duplicates": sum(c - 1 for i, c in counts.items() if c > 1),
            "missing": len(ids - set(counts)),
            "unexpected": len(set(counts) - ids),
        }

    def _verify_samples(self, samples: list[dict[str, Any]]) -> None:
        from homing_receiver import Webhook

        for sample in samples:
            errors = []
            for secret in self.endpoint_secrets:
                try:
                    Webhook(secret).verify(sample["body"], sample["headers"])
                    break
                except Exception as exc:  # another endpoint's secret
                    errors.append(exc)
            else:
                raise BenchError(f"a received webhook failed verification: {errors[0]}")
        self.results["signatures_verified"] = self.results.get("signatures_verified", 0) + len(
            samples
        )

    def _load_figures(
        self, result: load.LoadResult, ok_status: int | None = None
    ) -> dict[str, Any]:
        good = [s for s in result.samples if s.status == ok_status] if ok_status else result.ok
        lat = [s.latency for s in good]
        return {
            "requests": len(result.samples) + result.errors,
            "ok": len(good),
            "errors": result.errors + len(result.samples) - len(good),
            "rate": round(len(good) / result.wall, 1) if result.wall else 0,
            "p50_ms": round(load.percentile(lat, 50) * 1e3, 1),
            "p99_ms": round(load.percentile(lat, 99) * 1e3, 1),
            "max_ms": round(max(lat) * 1e3, 1) if lat else None,
            "clients": self.args.clients,
            "load_generator_cpu_percent": round(100 * result.client_cpu / result.wall, 1)
            if result.wall
            else None,
        }

    def _snap(self, pids: dict[str, int]) -> dict[str, float]:
        return {**procs.cpu_snapshot(pids), "_system": procs.system_busy()}

    def _cpu_delta(
        self, before: dict[str, float], wall: float, bench_cpu: float | None = None
    ) -> dict[str, float]:
        by_name = {process.name: process.pid for process in self.started}
        pids = {name: self.cpu_pids.get(name) or by_name.get(name) for name in before}
        after = self._snap({k: v for k, v in pids.items() if v})
        cpu = {
            name: round(100 * (after.get(name, before[name]) - before[name]) / wall, 1)
            for name in before
        }
        if bench_cpu is not None:
            cpu["load-generator"] = round(100 * bench_cpu / wall, 1)
        # Everything else on the machine (e.g. someone's test suite): the figures above
        # are only comparable between runs when this stays near zero.
        machine = cpu.pop("_system")
        cpu["OTHER-processes"] = round(max(0.0, machine - sum(cpu.values())), 1)
        return cpu

    def _spy(
        self, pid: int, seconds: float, name: str, subprocesses: bool = False, gil: bool = False
    ):
        if not pyspy.py_spy():
            say("--profile: py-spy is not installed (.venv/bin/pip install py-spy); skipping")
            return None
        say(f"  py-spy recording pid {pid} for {max(1, int(seconds))} s -> {name}")
        return pyspy.start(pid, seconds, self.profile_dir / name, subprocesses, gil)

    def _spy_report(self, spy, name: str, what: str) -> None:
        try:
            spy.wait(timeout=60)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait()
        summary = pyspy.summarise(self.profile_dir / name)
        self.results.setdefault("profiles", {})[name] = str(self.profile_dir / name)
        print(f"py-spy profile of the {what} ({self.profile_dir / name}):\n{summary}", flush=True)
