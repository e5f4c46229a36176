"""OAuth2 client-credentials tokens: fetched from a real local token server, shared by
every attempt, refreshed once on a receiver's 401, and a failing token URL named."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from deliveries.results import ErrorKind
from deliveries.transport.sender import Sender
from deliveries.transport.tokens import REFRESH_MARGIN, ClientCredentials, TokenFailed, Tokens
from tests.receivers import Answer, Receiver
from tests.token_server import TokenServer, bearer_behaviour


@pytest.fixture
def tokens() -> Iterator[TokenServer]:
    server = TokenServer().start()
    yield server
    server.stop()


@pytest.fixture
def receiver(tokens: TokenServer) -> Iterator[Receiver]:
    started = Receiver(bearer_behaviour(tokens)).start()
    yield started
    started.stop()


def credentials(server: TokenServer, **changes: str) -> ClientCredentials:
    fields = {"token_url": server.url, "client_id": "homing", "client_secret": "s3cr3t"}
    return ClientCredentials(**{**fields, **changes})


def post(sender: Sender, url: str, auth: ClientCredentials):
    return sender.send(url=url, body=b"{}", headers={}, timeout=5, auth=auth)


def test_each_webhook_carries_the_bearer_token_fetched_once(sender, tokens, receiver):
    auth = credentials(tokens, scope="webhooks:write", audience="https://api.example")
    results = [post(sender, receiver.url, auth) for _ in range(5)]
    assert [r.status_code for r in results] == [200] * 5
    assert tokens.fetches == 1
    assert {r.headers["authorization"] for r in receiver.requests} == {f"Bearer {tokens.current}"}
    assert tokens.forms[0] == {
        "grant_type": "client_credentials",
        "client_id": "homing",
        "client_secret": "s3cr3t",
        "scope": "webhooks:write",
        "audience": "https://api.example",
    }


def test_concurrent_attempts_share_one_token_request(sender, tokens, receiver):
    auth = credentials(tokens)

    async def many() -> list[int | None]:
        results = await asyncio.gather(
            *(sender.post(url=receiver.url, body=b"{}", headers={}, timeout=5, auth=auth)
              for _ in range(50))
        )  # fmt: skip
        return [r.status_code for r in results]

    statuses = asyncio.run_coroutine_threadsafe(many(), sender.loop).result()
    assert statuses == [200] * 50 and tokens.fetches == 1


def test_a_401_fetches_a_new_token_once_within_the_attempt(sender, tokens, receiver):
    auth = credentials(tokens)
    assert post(sender, receiver.url, auth).status_code == 200
    tokens.rotate()  # the receiver now refuses the cached token
    result = post(sender, receiver.url, auth)
    assert result.status_code == 200 and tokens.fetches == 2
    assert [r.headers["authorization"] for r in receiver.requests][-2:] == [
        "Bearer tok-1",
        "Bearer tok-2-rotated",
    ]


def test_a_receiver_that_keeps_answering_401_gets_two_requests_not_more(sender, tokens):
    refusing = Receiver(lambda request, n: Answer(401, b"no")).start()
    try:
        result = post(sender, refusing.url, credentials(tokens))
    finally:
        refusing.stop()
    assert result.status_code == 401 and len(refusing.requests) == 2 and tokens.fetches == 2


def test_a_failing_token_url_is_a_retryable_failure_naming_it(sender, tokens, receiver):
    tokens.fail_with = 503
    result = post(sender, receiver.url, credentials(tokens))
    assert result.error_kind is ErrorKind.TOKEN and receiver.requests == []
    assert result.error == f"OAuth2 token request to {tokens.url} failed: HTTP 503"
    tokens.fail_with = None
    wrong = post(sender, receiver.url, credentials(tokens, client_secret="nope"))
    assert wrong.error == f"OAuth2 token request to {tokens.url} failed: HTTP 401"
    unreachable = post(sender, receiver.url, credentials(tokens, token_url="http://127.0.0.1:1/t"))
    assert unreachable.error_kind is ErrorKind.TOKEN
    assert unreachable.error is not None and "http://127.0.0.1:1/t failed" in unreachable.error


def test_a_token_is_kept_until_a_minute_before_it_expires():
    now = [1000.0]
    answers = iter([b'{"access_token":"a","expires_in":3600}', b'{"access_token":"b"}'])

    async def fetch(credentials: ClientCredentials, deadline: float) -> tuple[int, bytes]:
        return 200, next(answers)

    cache = Tokens(fetch, clock=lambda: now[0])
    auth = ClientCredentials("http://t/", "id", "secret")

    async def token() -> str:
        return await cache.token(auth, deadline=0)

    assert asyncio.run(token()) == "a"
    now[0] += 3600 - REFRESH_MARGIN - 1
    assert asyncio.run(token()) == "a" and cache.fetches == 1
    now[0] += 2
    assert asyncio.run(token()) == "b" and cache.fetches == 2


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"token_type":"Bearer"}',
        b'{"access_token":"a\\nb"}',
        b"[" * 4096,  # nested past Python's recursion limit, within the 4 KiB kept
    ],
)
def test_a_token_answer_without_a_usable_token_is_refused(body):
    async def fetch(credentials: ClientCredentials, deadline: float) -> tuple[int, bytes]:
        return 200, body

    with pytest.raises(TokenFailed, match="http://t/"):
        asyncio.run(Tokens(fetch).token(ClientCredentials("http://t/", "i", "s"), 0))


def test_a_token_that_says_it_never_expires_is_kept_a_day_at_most():
    now = [1000.0]

    async def fetch(credentials: ClientCredentials, deadline: float) -> tuple[int, bytes]:
        return 200, b'{"access_token":"a","expires_in":Infinity}'

    cache = Tokens(fetch, clock=lambda: now[0])
    auth = ClientCredentials("http://t/", "i", "s")
    assert asyncio.run(cache.token(auth, deadline=0)) == "a"
    now[0] += 86400
    asyncio.run(cache.token(auth, deadline=0))
    assert cache.fetches == 2


def test_credentials_never_show_their_secret():
    assert "hunter2" not in repr(ClientCredentials("http://t/", "id", "hunter2"))
