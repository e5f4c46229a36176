"""Webhooks that carry an OAuth2 bearer token (tokens.py caches them): the attempt's one
retry with a fresh token after a 401, and the token request's bytes.

Pure, like the rest of the transport: the Sender hands in its exchange and its sending.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import quote

from deliveries.transport import http1
from deliveries.transport.tokens import ClientCredentials, TokenFailed, Tokens

Answer = tuple[int, bytes, str | None]  # status, body kept, Retry-After


async def exchange_with_token(
    *,
    tokens: Tokens,
    auth: ClientCredentials,
    headers: Mapping[str, str],
    deadline: float,
    exchange: Callable[[Mapping[str, str]], Awaitable[Answer]],
) -> Answer:
    """`exchange` with `Authorization: Bearer <token>`; a 401 drops that token and the
    request is made once more with a fresh one, within the same deadline."""
    for last_try in (False, True):
        try:
            async with asyncio.timeout_at(deadline):
                token = await tokens.token(auth, deadline)
        except TimeoutError:
            raise TokenFailed(f"OAuth2 token request to {auth.token_url} failed: timeout") from None
        answer = await exchange({**headers, "Authorization": f"Bearer {token}"})
        if answer[0] != 401 or last_try:
            return answer
        tokens.refused(auth, token)  # the receiver refused it: fetch a new one
    raise AssertionError("unreachable")


def token_request(
    *, auth: ClientCredentials, request_target: str, host: str, user_agent: str
) -> bytes:
    """The client-credentials POST (form body, HTTP Basic client authentication)."""
    basic = base64.b64encode(
        f"{quote(auth.client_id, safe='')}:{quote(auth.client_secret, safe='')}".encode()
    ).decode("ascii")
    return http1.request_bytes(
        request_target=request_target,
        host=host,
        headers=[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Accept", "application/json"),
            ("Authorization", f"Basic {basic}"),
            ("User-Agent", user_agent),
        ],
        body=auth.form(),
    )
