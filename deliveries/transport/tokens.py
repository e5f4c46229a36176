"""OAuth2 client-credentials tokens for endpoints whose receivers want a bearer token.

One `Tokens` per Sender (its event loop): a token is cached until REFRESH_MARGIN seconds
before it expires and shared by every attempt of the process; while one is being
fetched, the other attempts for the same credentials wait for that fetch (one request in
flight per credentials, not one per attempt: 1,000 deliveries/s to one endpoint cost one
token request per token lifetime). A receiver's 401 drops the token it refused, so the
attempt's one retry fetches a fresh one (unless another attempt already did).

The cache key is the credentials themselves (a frozen value): an endpoint whose settings
change gets a new key, hence a new token. Pure: the caller builds `ClientCredentials`
from the endpoint (decrypted) and the Sender supplies `fetch`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlencode

REFRESH_MARGIN = 60.0  # seconds before expiry that a token is fetched anew (the contract)
DEFAULT_LIFETIME = 300.0  # a token answer without expires_in: kept this long
MAX_LIFETIME = 86400.0  # whatever expires_in says
CACHE_SIZE = 10_000  # credentials; a token entry is well under a kilobyte


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    token_url: str
    client_id: str
    client_secret: str
    scope: str | None = None
    audience: str | None = None

    def form(self) -> bytes:
        """The token request's body (RFC 6749 section 4.4.2; the client authenticates with
        HTTP Basic as section 2.3.1 requires every server to accept, and also in the body,
        which some servers want instead)."""
        fields = {
            "grant_type": "client_credentials",
            "client_id": self.client_id,
            "client_secret": self.client_secret,
        }
        if self.scope:
            fields["scope"] = self.scope
        if self.audience:
            fields["audience"] = self.audience
        return urlencode(fields).encode("ascii")

    def __repr__(self) -> str:  # never the secret, in a log or a traceback
        return f"ClientCredentials(token_url={self.token_url!r}, client_id={self.client_id!r})"


class TokenFailed(Exception):
    """The token request failed; the message names the token URL (it is the stored error)."""


# (credentials, deadline on the loop's clock) -> (status, body)
Fetch = Callable[[ClientCredentials, float], Awaitable[tuple[int, bytes]]]


class Tokens:
    def __init__(self, fetch: Fetch, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._fetch = fetch
        self._clock = clock
        self._cache: OrderedDict[ClientCredentials, tuple[str, float]] = OrderedDict()
        self._pending: dict[ClientCredentials, asyncio.Future[str]] = {}
        self.fetches = 0  # token requests made (tests and benchmarks read it)

    async def token(self, credentials: ClientCredentials, deadline: float) -> str:
        cached = self._cache.get(credentials)
        if cached is not None and self._clock() < cached[1]:
            self._cache.move_to_end(credentials)
            return cached[0]
        future = self._pending.get(credentials)
        if future is None:
            future = asyncio.ensure_future(self._fetched(credentials, deadline))
            self._pending[credentials] = future
            future.add_done_callback(lambda _: self._pending.pop(credentials, None))
        # Shielded: one waiter's deadline must not cancel the fetch the others wait for.
        return await asyncio.shield(future)

    def refused(self, credentials: ClientCredentials, token: str) -> None:
        """The receiver answered 401 to `token`: forget it (not a newer one)."""
        cached = self._cache.get(credentials)
        if cached is not None and cached[0] == token:
            del self._cache[credentials]

    async def _fetched(self, credentials: ClientCredentials, deadline: float) -> str:
        self.fetches += 1
        where = credentials.token_url
        try:
            status, body = await self._fetch(credentials, deadline)
        except TimeoutError:
            raise TokenFailed(f"OAuth2 token request to {where} failed: timeout") from None
        except TokenFailed:
            raise
        except Exception as exc:
            raise TokenFailed(f"OAuth2 token request to {where} failed: {exc}") from None
        if not 200 <= status < 300:
            raise TokenFailed(f"OAuth2 token request to {where} failed: HTTP {status}")
        token, lifetime = _parsed(body, where)
        expires = self._clock() + max(lifetime - REFRESH_MARGIN, 0.0)
        self._cache[credentials] = (token, expires)
        self._cache.move_to_end(credentials)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return token


def _parsed(body: bytes, where: str) -> tuple[str, float]:
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):  # at most 4 KiB kept, but 4 KiB nests 2,000 deep
        raise TokenFailed(f"OAuth2 token answer from {where} is not JSON") from None
    token = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token or not token.isprintable():
        raise TokenFailed(f"OAuth2 token answer from {where} has no access_token")
    lifetime = answer.get("expires_in", DEFAULT_LIFETIME)
    if isinstance(lifetime, str) and lifetime.isdigit():
        lifetime = int(lifetime)  # some servers send it as a string
    if not isinstance(lifetime, int | float) or isinstance(lifetime, bool) or lifetime <= 0:
        lifetime = DEFAULT_LIFETIME
    # JSON as Python reads it allows Infinity and NaN: a token is kept a day at most.
    if not lifetime < MAX_LIFETIME:
        lifetime = MAX_LIFETIME
    return token, float(lifetime)
