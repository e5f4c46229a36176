"""Failed sign-ins wait: per address and per username, in Redis and without it.

Mallory guesses Olivia's password from 10.0.0.66. Nico signs in from 10.0.0.7 meanwhile.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from console.services import login_throttle

MALLORY, NICO, OLIVIA_AT_HOME = "10.0.0.66", "10.0.0.7", "10.0.0.8"


@pytest.fixture(params=["redis", "local memory"])
def store(request, settings) -> str:
    if request.param == "local memory":
        settings.REDIS_URL = ""
    cache.clear()  # this process's memory outlives a test; Redis is flushed by conftest
    return request.param


@pytest.fixture
def people(db) -> None:
    User.objects.create_user("olivia", "o@example.com", "olivia-right", is_staff=True)
    User.objects.create_user("nico", "n@example.com", "nico-right", is_staff=True)


def sign_in(username: str, password: str, address: str, path: str = "/login/"):
    client = Client(REMOTE_ADDR=address)
    response = client.post(path, {"username": username, "password": password})
    return response, client


def signed_in(client: Client) -> bool:
    return client.get("/").status_code == 200


def test_after_twenty_wrong_passwords_the_right_one_is_refused(store, people):
    answers = [sign_in("olivia", f"guess-{n}", MALLORY)[0].status_code for n in range(20)]
    assert answers == [200] * 5 + [429] * 15  # five tries, then every attempt waits

    refused, client = sign_in("olivia", "olivia-right", MALLORY)
    assert refused.status_code == 429 and not signed_in(client)
    assert "Too many failed sign-ins" in refused.content.decode()
    assert 0 < int(refused["Retry-After"]) <= login_throttle.WINDOW_SECONDS

    # The username waits from any address; the address waits for any username.
    assert sign_in("olivia", "olivia-right", OLIVIA_AT_HOME)[0].status_code == 429
    assert sign_in("nico", "nico-right", MALLORY)[0].status_code == 429

    # Nico, from his own address, is not affected.
    response, client = sign_in("nico", "nico-right", NICO)
    assert response.status_code == 302 and signed_in(client)


def test_the_wait_ends_with_the_window(store, people, monkeypatch):
    monkeypatch.setattr(login_throttle, "WINDOW_SECONDS", 1)
    for n in range(5):
        sign_in("olivia", f"guess-{n}", MALLORY)
    assert sign_in("olivia", "olivia-right", MALLORY)[0].status_code == 429
    time.sleep(2.1)
    response, client = sign_in("olivia", "olivia-right", MALLORY)
    assert response.status_code == 302 and signed_in(client)


def test_a_success_clears_the_users_count_not_the_addresss(store, people):
    for n in range(4):
        sign_in("olivia", f"typo-{n}", OLIVIA_AT_HOME)
    assert sign_in("olivia", "olivia-right", OLIVIA_AT_HOME)[0].status_code == 302
    # Olivia's four typos are forgotten for her account...
    for n in range(4):
        assert sign_in("olivia", f"typo-again-{n}", NICO)[0].status_code == 200
    assert sign_in("olivia", "olivia-right", NICO)[0].status_code == 302
    # ...but her address keeps its four: one more failure there and it waits.
    sign_in("someone", "wrong", OLIVIA_AT_HOME)
    assert sign_in("nico", "nico-right", OLIVIA_AT_HOME)[0].status_code == 429


def test_the_admin_login_is_throttled_too(store, people):
    for n in range(5):
        assert sign_in("olivia", f"guess-{n}", MALLORY, "/admin/login/")[0].status_code == 200
    refused, client = sign_in("olivia", "olivia-right", MALLORY, "/admin/login/")
    assert refused.status_code == 429
    assert client.get("/admin/").status_code == 302  # still sent to sign in


def test_behind_a_trusted_proxy_the_forwarded_address_counts(store, people, settings):
    settings.HOMING_TRUST_PROXY = True

    def via_proxy(username, password, forwarded_for):
        client = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=forwarded_for)
        return client.post("/login/", {"username": username, "password": password})

    # Mallory forges the first entry each time; the proxy's own entry (the last) holds.
    for n in range(5):
        via_proxy(f"user-{n}", "wrong", f"203.0.113.{n}, {MALLORY}")
    assert via_proxy("nico", "nico-right", f"198.51.100.1, {MALLORY}").status_code == 429
    # Everyone else behind the same proxy signs in.
    assert via_proxy("nico", "nico-right", NICO).status_code == 302


class CountingBackend:
    """Checks no password (a real check takes a while: here 50 ms); counts the checks."""

    checks = 0
    lock = threading.Lock()

    def authenticate(self, request, username=None, password=None, **kwargs):
        with CountingBackend.lock:
            CountingBackend.checks += 1
        time.sleep(0.05)
        return None

    def get_user(self, user_id):
        return None


def test_guesses_sent_at_the_same_moment_check_at_most_five_passwords(store, settings):
    # Counted after the check, every guess of a burst passed it before any was counted.
    settings.AUTHENTICATION_BACKENDS = [f"{__name__}.CountingBackend"]
    CountingBackend.checks = 0
    guesses = 20
    start = threading.Barrier(guesses)
    answers: list[int] = []

    def guess(n: int) -> None:
        start.wait()
        answers.append(sign_in("olivia", f"guess-{n}", MALLORY)[0].status_code)

    threads = [threading.Thread(target=guess, args=(n,)) for n in range(guesses)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert CountingBackend.checks <= login_throttle.MAX_FAILURES
    assert sorted(answers) == [200] * CountingBackend.checks + [429] * (
        guesses - CountingBackend.checks
    )
