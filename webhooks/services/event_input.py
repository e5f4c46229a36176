"""Parsing and validating event bodies (CONTRACT section 2), shared by every entry point.

An event is stored in PostgreSQL's jsonb and later re-sent, byte for byte, to receivers:
anything that cannot survive that trip is refused here with a 400 naming the field,
before a row is written. Python's `json` would accept much of it (`NaN`, `1e999`,
`"\\u0000"`, a lone `"\\ud800"`) or fail with a 500 (`RecursionError`, a 5,000-digit
integer), so the checks are explicit.

The checks cost little for ordinary payloads: a walk of the parsed value happens only
when the raw bytes could hold what it looks for (`\\u` escapes, more than 64 brackets).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from core.exceptions import InvalidInput
from core.tracing import trace_context_of

MAX_DEPTH = 64
MAX_INT_DIGITS = 4300
EVENT_TYPE = re.compile(r"[A-Za-z0-9_.:\-]{1,255}")
RESERVED_TYPE_PREFIX = "homing."
# Printable: no control characters (C0, DEL, C1), no lone surrogates; 1 to 255 of them.
ORDERING_KEY = re.compile(r"[^\x00-\x1f\x7f-\x9f\ud800-\udfff]{1,255}")


@dataclass(frozen=True)
class EventInput:
    type: str
    data: dict[str, Any]
    ordering_key: str | None = None
    trace_context: str | None = None  # core.tracing.trace_context_of the producer's headers


def json_body_parse(*, body: bytes) -> Any:
    """The request body as JSON, refusing what cannot be stored and re-sent faithfully."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("body", f"Not valid JSON: not UTF-8 ({exc.reason}).") from exc
    try:
        value = json.loads(
            text, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_short_int
        )
    except RecursionError as exc:
        raise InvalidInput("body", f"JSON nested deeper than {MAX_DEPTH} levels.") from exc
    except _Unstorable as exc:
        raise InvalidInput("body", str(exc)) from exc
    except ValueError as exc:
        raise InvalidInput("body", f"Not valid JSON: {exc}") from exc
    # Cheap gates on the raw text: no `\u` escape means no NUL nor lone surrogate (only
    # the depth is left to check), and at most 64 opening brackets means at most 64 levels.
    if "\\u" in text:
        _check_storable(value)
    elif text.count("[") + text.count("{") > MAX_DEPTH:
        _check_depth(value)  # a batch of any size: containers only, no string checks
    return value


def event_input_validate(item: Any, *, field_prefix: str = "") -> EventInput:
    """One `{type, data}` object; errors name the field as `<prefix>type`."""
    if not isinstance(item, dict):
        raise InvalidInput(field_prefix.rstrip(".") or "non_field_errors", "Must be a JSON object.")
    if "type" not in item:
        raise InvalidInput(f"{field_prefix}type", "This field is required.")
    event_type = item["type"]
    if not isinstance(event_type, str) or not EVENT_TYPE.fullmatch(event_type):
        raise InvalidInput(
            f"{field_prefix}type",
            "Must be 1 to 255 characters among letters, digits and `_.:-`, e.g. `invoice.paid`.",
        )
    if event_type.startswith(RESERVED_TYPE_PREFIX):
        raise InvalidInput(
            f"{field_prefix}type", f"Types starting `{RESERVED_TYPE_PREFIX}` are Homing's own."
        )
    if "data" not in item:
        raise InvalidInput(f"{field_prefix}data", "This field is required.")
    data = item["data"]
    if not isinstance(data, dict):
        raise InvalidInput(f"{field_prefix}data", "Must be a JSON object.")
    ordering_key = item.get("ordering_key")
    if ordering_key is not None and not (
        isinstance(ordering_key, str) and ORDERING_KEY.fullmatch(ordering_key)
    ):
        raise InvalidInput(
            f"{field_prefix}ordering_key",
            "Must be null or 1 to 255 printable characters (no control characters).",
        )
    trace_context = None
    if "traceparent" in item:
        trace_context = _trace_context(item, field_prefix)
    return EventInput(
        type=event_type, data=data, ordering_key=ordering_key, trace_context=trace_context
    )


def _trace_context(item: dict[str, Any], field_prefix: str) -> str | None:
    """An item's own `traceparent` (and `tracestate`): the W3C trace context of the
    producer's span for this event. Sent in the body on purpose, so a malformed one is a
    400 naming it (a header's is ignored, as the W3C spec says for headers)."""
    traceparent, tracestate = item["traceparent"], item.get("tracestate")
    if traceparent is None:
        return None
    if tracestate is not None and not isinstance(tracestate, str):
        raise InvalidInput(f"{field_prefix}tracestate", "Must be a string or null.")
    kept = trace_context_of(traceparent, tracestate) if isinstance(traceparent, str) else None
    if kept is None:
        raise InvalidInput(
            f"{field_prefix}traceparent",
            "Must be null or a W3C traceparent, e.g. "
            "`00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01`.",
        )
    return kept


def json_storable_check(*, value: Any, field: str) -> None:
    """`value` (any parsed JSON) as PostgreSQL's jsonb can store it: no NUL character and
    no lone surrogate in a string or key, at most MAX_DEPTH levels; else a 400 on `field`."""
    try:
        _check_storable(value)
    except InvalidInput as exc:
        raise InvalidInput(field, exc.detail) from None


class _Unstorable(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _Unstorable(f"`{name}` is not JSON: send a number or null.")


def _short_int(text: str) -> int:
    # Bounded whatever the interpreter's int_max_str_digits: receivers parse it too.
    if len(text) - text.startswith("-") > MAX_INT_DIGITS:
        raise _Unstorable(f"An integer has more than {MAX_INT_DIGITS} digits.")
    return int(text)


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _Unstorable(f"The number {text[:40]} is too large to store.")
    return number


def _check_storable(value: Any) -> None:
    """Refuse nesting over MAX_DEPTH and strings PostgreSQL or receivers cannot take."""
    # A stack of one iterator per open container: memory grows with the depth, never with
    # the size (a stack of every child took as much again as the parsed body).
    stack = [iter([value])]
    while stack:
        for node in stack[-1]:
            if isinstance(node, dict | list):
                if len(stack) > MAX_DEPTH:
                    raise InvalidInput("body", f"JSON nested deeper than {MAX_DEPTH} levels.")
                if isinstance(node, dict):
                    for key in node:
                        _check_string(key)
                stack.append(iter(node.values() if isinstance(node, dict) else node))
                break
            if isinstance(node, str):
                _check_string(node)
        else:
            stack.pop()


def _check_depth(value: Any) -> None:
    stack = [iter([value])]  # as in _check_storable
    while stack:
        for node in stack[-1]:
            if isinstance(node, dict | list):
                if len(stack) > MAX_DEPTH:
                    raise InvalidInput("body", f"JSON nested deeper than {MAX_DEPTH} levels.")
                stack.append(iter(node.values() if isinstance(node, dict) else node))
                break
        else:
            stack.pop()


def _check_string(text: str) -> None:
    if "\x00" in text:
        raise InvalidInput("body", "A string contains a NUL character (\\u0000).")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput("body", "A string contains a lone surrogate (e.g. \\ud800).") from exc


def event_batch_validate(
    payload: Any, *, max_events: int, max_item_bytes: int, body_bytes: int
) -> list[EventInput]:
    """`{"events": [{type, data}, ...]}`: every item valid, or a 400 naming the first bad one."""
    if not isinstance(payload, dict):
        raise InvalidInput("non_field_errors", 'Must be a JSON object: {"events": [...]}.')
    items = payload.get("events")
    if not isinstance(items, list):
        raise InvalidInput("events", "Must be a list of {type, data} objects.")
    if not 1 <= len(items) <= max_events:
        raise InvalidInput(
            "events", f"Must hold 1 to {max_events} events (HOMING_MAX_BATCH_EVENTS)."
        )
    inputs = []
    for index, item in enumerate(items):
        field = f"events[{index}]"
        # Only a body over the per-event limit can hold an item over it: skip the sizing.
        if body_bytes > max_item_bytes and _encoded_size(item) > max_item_bytes:
            raise InvalidInput(
                field, f"Larger than {max_item_bytes} bytes (HOMING_MAX_PAYLOAD_BYTES)."
            )
        inputs.append(event_input_validate(item, field_prefix=f"{field}."))
    return inputs


def _encoded_size(item: Any) -> int:
    return len(json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode())
