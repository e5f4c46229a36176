"""Optional sampling profiles with py-spy (`make bench ARGS=--profile`).

py-spy is not a dependency of Homing: install it with `.venv/bin/pip install py-spy`.
It samples a running process from outside (no code change, little overhead with
--nonblocking) and writes collapsed stacks, which we summarise here as the share of
samples spent inside chosen Homing functions and the hottest leaf frames.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

PROJECT_DIRS = ("webhooks/", "deliveries/", "dlq/", "config/")
FRAME = re.compile(r"^(?P<func>[^ ]+) \((?P<file>[^:)]+)(?::\d+)?\)$")


def py_spy() -> str | None:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return found if Path(found).exists() else None


def start(
    pid: int, seconds: float, out: Path, subprocesses: bool = False, gil: bool = False
) -> subprocess.Popen:
    binary = py_spy()
    assert binary
    args = [
        binary,
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(max(1, int(seconds))),
        "--rate",
        "200",
        "--format",
        "raw",
        "--nonblocking",
        "--output",
        str(out),
    ]
    if subprocesses:
        args.append("--subprocesses")
    if gil:  # only the thread holding the GIL: where the Python CPU goes
        args.append("--gil")
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _parse(line: str) -> tuple[list[str], int] | None:
    stack, _, count = line.rstrip("\n").rpartition(" ")
    if not stack or not count.isdigit():
        return None
    return stack.split(";"), int(count)


def _name(frame: str) -> tuple[str, str]:
    match = FRAME.match(frame)
    return (match["func"], match["file"]) if match else (frame, "")


def summarise(path: Path, top: int = 14) -> str:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return f"  (no profile written to {path})"
    total = 0
    inclusive: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    for line in lines:
        parsed = _parse(line)
        if not parsed:
            continue
        stack, count = parsed
        total += count
        seen = set()
        for frame in stack:
            func, file = _name(frame)
            short = _short(file)
            if short.startswith(PROJECT_DIRS) and ".venv" not in file:
                seen.add(f"{func} ({short})")
        for name in seen:
            inclusive[name] += count
        func, file = _name(stack[-1])
        leaves[f"{func} ({_short(file)})"] += count
    if not total:
        return "  (no samples: the process was idle or py-spy could not attach)"
    out = [f"  {total} samples (all non-idle threads; waits in C count); Homing frames, inclusive:"]
    for name, count in inclusive.most_common(top):
        out.append(f"    {100 * count / total:5.1f}%  {name}")
    out.append("  hottest leaf frames (self time):")
    for leaf, count in leaves.most_common(top):
        out.append(f"    {100 * count / total:5.1f}%  {leaf}")
    return "\n".join(out)


def _short(file: str) -> str:
    for marker in ("site-packages/", "lib/python3"):
        if marker in file:
            return file.split(marker, 1)[1]
    return file.rsplit("/work/main/", 1)[-1]
