"""Processes the benchmark starts, and what it reads about them from /proc."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


class Managed:
    """A child in its own session (so its whole group can be stopped), logging to a file."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            args,
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 15) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
        else:
            # The leader is gone; make sure nothing it left behind in its group lingers.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)
        self._log.close()

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def descendants(pid: int, tree: dict[int, list[int]] | None = None) -> list[int]:
    tree = tree if tree is not None else _children()
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(tree.get(current, []))
    return found


def tree_cpu(pid: int, tree: dict[int, list[int]] | None = None) -> float:
    """CPU seconds (user + system) of a process and its live descendants, plus what
    their already-exited children used."""
    total = 0
    for p in descendants(pid, tree):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return total / TICK


def children_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each direct child of `pid` (each gunicorn worker of its master)."""
    tree = _children()
    return {child: tree_cpu(child, tree) for child in tree.get(pid, [])}


def shares(before: dict[int, float], after: dict[int, float], wall: float) -> list[float]:
    """% of one core each child used between two `children_cpu` readings, busiest first."""
    used = [after[pid] - before.get(pid, 0.0) for pid in after]
    return sorted((round(100 * seconds / wall, 1) for seconds in used), reverse=True)


def tree_rss_mb(pid: int, tree: dict[int, list[int]] | None = None) -> float:
    total_kb = 0
    for p in descendants(pid, tree):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total_kb += int(line.split()[1])
                        break
        except OSError:
            continue
    return total_kb / 1024


class RssSampler:
    """Every `interval` s, the RSS (MiB, children included) of each named process tree."""

    def __init__(self, pids: dict[str, int], interval: float = 0.5) -> None:
        self.pids, self.interval = pids, interval
        self.series: dict[str, list[tuple[float, float]]] = {name: [] for name in pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            tree, now = _children(), time.monotonic()
            for name, pid in self.pids.items():
                self.series[name].append((now, tree_rss_mb(pid, tree)))
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def summary(self, running_from: float = 0.0) -> dict[str, dict[str, float]]:
        """`start_mb` is the first sample at or after `running_from` (when the process
        was up and working, not still importing), `peak_mb` the largest of all."""
        out = {}
        for name, series in self.series.items():
            if not series:
                continue
            values = [v for _, v in series]
            working = [v for t, v in series if t >= running_from] or values
            out[name] = {
                "start_mb": round(working[0], 1),
                "peak_mb": round(max(values), 1),
                "end_mb": round(values[-1], 1),
                "samples": len(values),
            }
        return out


def cpu_snapshot(pids: dict[str, int]) -> dict[str, float]:
    tree = _children()
    return {name: tree_cpu(pid, tree) for name, pid in pids.items()}


def system_busy() -> float:
    """CPU seconds the whole machine has spent busy (all cores) since boot."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / TICK
