"""Parse durations such as `30s`, `5m`, `24h` from configuration."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_duration(text: str) -> float:
    """Seconds in `text`; a bare number is seconds. Raises ValueError naming the input."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"not a duration: {text!r} (use e.g. 30s, 5m, 24h)")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]
