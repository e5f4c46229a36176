"""Durations as people write them in settings: `30s`, `5m`, `2h`, `1d`, `250ms`.

Pure (no Django), so the settings module and the retry policy can both use it.
"""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[a-z]*)")
# Longer than any setting or request needs, and inside what datetime arithmetic takes (now
# plus this is the year ~4700; datetime ends at 9999): `99999999999999999999d` (or 400
# digits, an infinite float) overflowed timedelta, a 500 from the API.
MAX_DURATION_SECONDS = 1_000_000 * 86400.0


def parse_duration(text: str) -> float:
    """Seconds in `30s`, `5m`, `2h`, `1d`, `250ms` or a plain number of seconds."""
    item = text.strip().lower()
    match = _DURATION.fullmatch(item)
    if not match:
        if item.startswith("-"):
            raise ValueError(f"duration {text!r} is negative")
        raise ValueError(f"duration {text!r} is not a number with an optional unit")
    unit = match["unit"] or "s"
    if unit not in _UNITS:
        raise ValueError(f"duration {text!r} has unknown unit {unit!r} (use ms, s, m, h or d)")
    seconds = float(match["number"]) * _UNITS[unit]
    if not seconds <= MAX_DURATION_SECONDS:  # also false for an infinite float
        raise ValueError(f"duration {text!r} is too long (at most 1000000d)")
    return seconds


def duration_text(seconds: float) -> str:
    """The shortest way `parse_duration` reads back: 3600 → `1h`, 90 → `90s`, 1.5 → `1500ms`."""
    for unit in ("d", "h", "m", "s", "ms"):
        count = seconds / _UNITS[unit]
        if count >= 1 and count == int(count):
            return f"{int(count)}{unit}"
    return f"{seconds:g}s"


def parse_schedule(text: str) -> tuple[float, ...]:
    """`1s,5s,30s,5m` → (1.0, 5.0, 30.0, 300.0); ValueError naming the bad item."""
    if not text or not text.strip():
        raise ValueError("retry schedule is empty: give delays like '1s,5s,30s,5m'")
    steps = []
    for position, item in enumerate(text.split(","), start=1):
        if not item.strip():
            raise ValueError(f"retry schedule {text!r}: step {position} is empty")
        try:
            steps.append(parse_duration(item))
        except ValueError as exc:
            raise ValueError(f"retry schedule {text!r}: step {position}: {exc}") from None
    return tuple(steps)
