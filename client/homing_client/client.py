"""A small HTTP client for Homing's events API (standard library only)."""

from __future__ import annotations

import http.client
import json
import random
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from homing_client.errors import HomingError, HomingThrottled, HomingUnavailable

__all__ = ["Client"]

USER_AGENT = "homing-client/0.1"


def new_idempotency_key() -> str:
    # 128 random bits: unique per logical publish, reused by every retry of it.
    return f"hc_{secrets.token_hex(16)}"


API_ROOT = "/api/v1"


def trace_headers() -> dict[str, str]:
    """The W3C trace context (`traceparent`, `tracestate`) of the caller's current span
    when OpenTelemetry is installed (the `[otel]` extra), so every webhook of the event
    continues the producer's trace; nothing without it or outside a span."""
    try:
        from opentelemetry.propagate import inject
    except ImportError:
        return {}
    carrier: dict[str, str] = {}
    inject(carrier)
    return {k: v for k, v in carrier.items() if k in ("traceparent", "tracestate")}


def server_root(base_url: str) -> str:
    """Homing's root URL from its root or its API root, without a trailing slash."""
    root = base_url.rstrip("/")
    return root[: -len(API_ROOT)] if root.endswith(API_ROOT) else root


class Client:
    """Publishes events to Homing, retrying what is safe to retry.

    ``base_url`` is Homing's root URL (``https://homing.example.com``); its API root
    (``…/api/v1``) works too, and so does a trailing slash.

    Every publish carries an ``Idempotency-Key`` (one is generated when none is given)
    and every retry reuses it, so a retry after a lost answer replays the first result
    instead of creating a second event. Connection errors, timeouts, 5xx and 409 (the
    first request with this key is still being processed) are retried with
    exponential backoff and full jitter for up to ``retry_for`` seconds. A 429
    (backpressure: nothing was written) is waited out as its ``Retry-After`` says and
    sent again, within ``retry_for``; then :class:`HomingThrottled`. Any other 4xx raises
    :class:`HomingError` at once.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        timeout: float = 10,
        *,
        retry_for: float = 60,
        backoff: float = 0.5,
        max_backoff: float = 10,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = server_root(base_url)
        self.api_key = api_key
        self.timeout = timeout
        self.retry_for = retry_for
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._sleep = sleep

    def publish(
        self,
        type: str,
        data: Mapping[str, Any],
        idempotency_key: str | None = None,
        ordering_key: str | None = None,
    ) -> dict[str, Any]:
        """Create one event; returns Homing's 202 body (``id``, ``deliveries``, ...).
        Events with one ``ordering_key`` reach each endpoint one at a time, in order."""
        event: dict[str, Any] = {"type": type, "data": data}
        if ordering_key is not None:
            event["ordering_key"] = ordering_key
        return self._post(
            f"{API_ROOT}/events", _encode(event), idempotency_key or new_idempotency_key()
        )

    def publish_batch(
        self, events: Iterable[Mapping[str, Any]], idempotency_key: str | None = None
    ) -> list[dict[str, Any]]:
        """Create several events at once, all or nothing; returns them in order."""
        items = [
            {
                "type": event["type"],
                "data": event["data"],
                **({"ordering_key": event["ordering_key"]} if event.get("ordering_key") else {}),
            }
            for event in events
        ]
        body = _encode({"events": items})
        answer = self._post(
            f"{API_ROOT}/events/batch", body, idempotency_key or new_idempotency_key()
        )
        return answer["events"]

    def healthy(self) -> bool:
        """True when Homing's ``/healthz`` answers 200 (Homing and its database are up)."""
        request = urllib.request.Request(  # noqa: S310 - base_url is the operator's setting
            self.base_url + "/healthz", headers={"User-Agent": USER_AGENT}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                return response.status == 200
        except (urllib.error.URLError, http.client.HTTPException, OSError):
            return False

    def _post(self, path: str, body: bytes, key: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.retry_for
        attempt = 0
        while True:
            try:
                return self._send(path, body, key)
            except HomingThrottled as error:
                attempt += 1
                # As Homing says; a little later for some, so that the producers it
                # refused in one second do not all come back in the same one.
                delay = (
                    error.retry_after if error.retry_after is not None else self._backoff(attempt)
                )
                delay *= random.uniform(1.0, 1.1)
                if delay > deadline - time.monotonic():
                    raise  # still refused when retry_for runs out: no use waiting
                self._sleep(delay)
            except HomingUnavailable as error:
                attempt += 1
                delay = max(self._backoff(attempt), error.retry_after or 0.0)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise
                self._sleep(min(delay, remaining))

    def _backoff(self, attempt: int) -> float:
        # Full jitter: clients that failed together do not retry together.
        return random.uniform(0, min(self.max_backoff, self.backoff * 2 ** (attempt - 1)))

    def _send(self, path: str, body: bytes, key: str) -> dict[str, Any]:
        request = urllib.request.Request(  # noqa: S310 - base_url is the operator's setting
            self.base_url + path,
            data=body,
            method="POST",
            headers={
                "Authorization": f"Bearer {self.api_key}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                "Idempotency-Key": key,
                "User-Agent": USER_AGENT,
                **trace_headers(),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                raw = response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, _read_quietly(error)
            message = _error_message(raw, error.reason)
            if status >= 500 or status == 409:
                raise _unavailable(message, status, error.headers.get("Retry-After")) from None
            if status == 429:
                throttled = HomingThrottled(message, status=status)
                throttled.retry_after = _seconds(error.headers.get("Retry-After"))
                throttled.code = _error_code(raw)
                raise throttled from None
            raise HomingError(message, status=status) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
            # URLError wraps refused connections and DNS failures; a timeout or a
            # connection dropped mid-answer surfaces as OSError or HTTPException.
            reason = getattr(error, "reason", None) or error
            raise _unavailable(f"Homing unreachable: {reason}", None, None) from None
        try:
            return json.loads(raw)
        except ValueError:
            raise _unavailable("Homing answered with a body that is not JSON", None, None) from None


def _encode(payload: dict[str, Any]) -> bytes:
    # Raises TypeError (unserializable) or ValueError (NaN, Infinity, cycles) before
    # anything is sent: Homing would refuse them anyway.
    return json.dumps(payload, allow_nan=False, separators=(",", ":")).encode()


def _unavailable(message: str, status: int | None, retry_after: str | None) -> HomingUnavailable:
    error = HomingUnavailable(message, status=status)
    error.retry_after = _seconds(retry_after)
    return error


def _seconds(value: str | None) -> float | None:
    try:
        return min(float(value), 60.0) if value else None
    except ValueError:
        return None  # an HTTP date: rare enough to fall back to our own backoff


def _read_quietly(error: urllib.error.HTTPError) -> bytes:
    try:
        return error.read()
    except (OSError, http.client.HTTPException):
        return b""


def _error_code(raw: bytes) -> str | None:
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    code = body.get("code") if isinstance(body, dict) else None
    return code if isinstance(code, str) else None


def _error_message(raw: bytes, reason: str) -> str:
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    text = raw.decode("utf-8", "replace").strip()
    return text[:500] or str(reason)
