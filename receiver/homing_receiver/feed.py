"""Read an endpoint's catch-up feed: every webhook after a sequence, oldest first.

``GET {base_url}/api/v1/endpoints/{id}/messages?after=N&limit=L`` answers
``{"results": [...], "next_after": M, "done": bool}``, or 410 ``{"message",
"oldest_sequence"}`` once the messages after N were purged. Standard library only.
"""

from __future__ import annotations

import http.client
import json
import math
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from homing_receiver.errors import FeedError, FeedExpired

USER_AGENT = "homing-receiver/0.1"
MAX_PAGE_SIZE = 500  # the feed's own limit
# Answers worth asking again: the server or a proxy is overloaded or restarting.
_RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


API_ROOT = "/api/v1"


def server_root(base_url: str) -> str:
    """Homing's root URL from its root or its API root, without a trailing slash."""
    root = base_url.rstrip("/")
    return root[: -len(API_ROOT)] if root.endswith(API_ROOT) else root


@dataclass(frozen=True)
class _Page:
    results: list[dict[str, Any]]
    next_after: int
    done: bool


class _Unavailable(Exception):
    """One attempt failed in a way worth retrying."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # A redirect would carry the API key to wherever it points; urllib then raises
    # HTTPError with the 3xx status, which we report.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Feed:
    """The catch-up feed of one endpoint, read with the tenant's (or consumer's) API key.

    ``base_url`` is Homing's root URL, as ``homing_client.Client`` takes it (e.g.
    ``https://homing.example.com``); its API root (``…/api/v1``) works too, and so does
    a trailing slash. Connection errors, timeouts, 408, 429 and 5xx are retried
    with exponential backoff and full jitter for up to ``retry_for`` seconds per page;
    then, or on any other answer than 200, the page raises :class:`FeedError`
    (:class:`FeedExpired` on 410).
    """

    def __init__(
        self,
        base_url: str,
        key: str,
        endpoint_id: str,
        timeout: float = 10,
        retry_for: float = 60,
        *,
        page_size: int = 100,
        backoff: float = 0.5,
        max_backoff: float = 10,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page_size must be 1..{MAX_PAGE_SIZE}")
        if not endpoint_id:
            raise ValueError("endpoint_id must not be empty")
        self.base_url = server_root(base_url)
        self.key = key
        self.endpoint_id = endpoint_id
        self.timeout = timeout
        self.retry_for = retry_for
        self.page_size = page_size
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._sleep = sleep
        self._opener = urllib.request.build_opener(_NoRedirects)

    def since(self, after: int) -> Iterator[dict[str, Any]]:
        """Yield every message with a sequence above *after*, ascending, page by page.

        Each message is the feed's dict: ``sequence, event_id, type, created_at,
        ordering_key, data, delivery_id, status``. Pages are fetched as you iterate.
        """
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise ValueError("after must be an int >= 0")
        while True:
            page = self._fetch(after)
            yield from page.results
            if page.done:
                return
            after = page.next_after

    def _fetch(self, after: int) -> _Page:
        deadline = time.monotonic() + self.retry_for
        attempt = 0
        while True:
            try:
                return _parse_page(self._get(after), after)
            except _Unavailable as error:
                attempt += 1
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise FeedError(
                        f"catch-up feed unavailable after {attempt} attempts: {error}"
                    ) from None
                # Full jitter: receivers that failed together do not retry together.
                delay = random.uniform(0, min(self.max_backoff, self.backoff * 2 ** (attempt - 1)))
                self._sleep(min(max(delay, error.retry_after or 0.0), remaining))

    def _get(self, after: int) -> bytes:
        query = urllib.parse.urlencode({"after": after, "limit": self.page_size})
        endpoint = urllib.parse.quote(self.endpoint_id, safe="")
        request = urllib.request.Request(  # noqa: S310 - base_url is the receiver's setting
            f"{self.base_url}{API_ROOT}/endpoints/{endpoint}/messages?{query}",
            headers={
                "Authorization": f"Bearer {self.key}",
                "Accept": "application/json",
                "User-Agent": USER_AGENT,
            },
        )
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return response.read()
        except urllib.error.HTTPError as error:
            raise _answer_error(error.code, _read_quietly(error), error.headers) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
            # URLError wraps refused connections and DNS failures; a timeout or a
            # connection dropped mid-answer surfaces as OSError or HTTPException.
            reason = getattr(error, "reason", None) or error
            raise _Unavailable(f"Homing unreachable: {reason!r}") from None


def _answer_error(status: int, raw: bytes, headers: Any) -> Exception:
    body = _json_or_none(raw)
    message = _error_message(body, raw) or f"HTTP {status}"
    if status in _RETRYABLE_STATUSES:
        return _Unavailable(f"HTTP {status}: {message}", _seconds(headers.get("Retry-After")))
    if status == 410:
        oldest = body.get("oldest_sequence") if isinstance(body, dict) else None
        if isinstance(oldest, int) and not isinstance(oldest, bool):
            return FeedExpired(oldest, message)
        return FeedError(f"{message} (and no oldest_sequence in the answer)", status=status)
    if 300 <= status < 400:
        message = f"redirect to {headers.get('Location', '?')[:200]!r} not followed"
    return FeedError(message, status=status)


def _parse_page(raw: bytes, after: int) -> _Page:
    body = _json_or_none(raw)
    if body is None:
        # A proxy's error page or a cut-off body: asking again usually helps.
        raise _Unavailable("the answer is not JSON")
    if not isinstance(body, dict) or not isinstance(body.get("results"), list):
        raise FeedError("the answer has no results list", status=200)
    done, next_after = body.get("done"), body.get("next_after")
    if not isinstance(done, bool):
        raise FeedError("the answer has no done flag", status=200)
    previous = after
    for message in body["results"]:
        sequence = message.get("sequence") if isinstance(message, dict) else None
        if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence <= previous:
            raise FeedError(
                f"message after sequence {previous} has sequence {sequence!r}: "
                "expected ascending sequences above the one asked for",
                status=200,
            )
        if not isinstance(message.get("event_id"), str):
            raise FeedError(f"message {sequence} has no event_id", status=200)
        previous = sequence
    if not done and (
        not isinstance(next_after, int)
        or isinstance(next_after, bool)
        or next_after < previous
        or next_after <= after
    ):
        # Following it would repeat messages or never end.
        raise FeedError(f"next_after {next_after!r} does not move past {previous}", status=200)
    return _Page(body["results"], next_after if isinstance(next_after, int) else previous, done)


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # also UnicodeDecodeError; absurd nesting
        return None


def _error_message(body: Any, raw: bytes) -> str:
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"][:500]
    return raw.decode("utf-8", "replace").strip()[:500]


def _seconds(value: str | None) -> float | None:
    try:
        seconds = float(value) if value else None
    except ValueError:
        return None  # an HTTP date: rare enough to fall back to our own backoff
    if seconds is None or not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), 60.0)


def _read_quietly(error: urllib.error.HTTPError) -> bytes:
    try:
        return error.read()
    except (OSError, http.client.HTTPException):
        return b""
