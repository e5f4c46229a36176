"""Mutual TLS: the sender presents an endpoint's client certificate, and a kept-alive
connection carries only requests that present the same one (the pool's key)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from deliveries.results import ErrorKind
from deliveries.transport.client_tls import client_certificate
from deliveries.transport.sender import Sender
from deliveries.transport.targets import checked_target
from tests.certificates import Authority, mtls_server_context
from tests.scripted_receivers import Receiver, answer_client_name


@pytest.fixture
def authority() -> Authority:
    return Authority()


@pytest.fixture
def mtls_receiver(authority: Authority, tmp_path: Path, monkeypatch) -> Iterator[Receiver]:
    """An https receiver on 127.0.0.1 that requires a client certificate of `authority`."""
    context = mtls_server_context(authority, tmp_path)
    # The sender trusts the receiver by the same CA (read when a context is made).
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    receiver = Receiver(answer_client_name, tls=context).start()
    yield receiver
    receiver.close()


def post(sender: Sender, url: str, certificate=None):
    return sender.send(url=url, body=b"{}", headers={}, timeout=5.0, client_certificate=certificate)


def test_each_request_presents_its_endpoints_certificate_on_a_connection_of_its_own(
    authority, mtls_receiver
):
    alice = client_certificate(authority.client_pem("alice"))
    bob = client_certificate(authority.client_pem("bob"))
    url = mtls_receiver.url().replace("http://", "https://")
    sender = Sender(version="1", allow_private_networks=True).start()
    try:
        results = [post(sender, url, alice), post(sender, url, bob), post(sender, url, alice)]
        results.append(post(sender, url, bob))
        anonymous = post(sender, url)
    finally:
        sender.close()
    assert [(r.status_code, r.response_body) for r in results] == [
        (200, b"alice"),
        (200, b"bob"),
        (200, b"alice"),
        (200, b"bob"),
    ]
    # Two connections, each kept alive for its own certificate's requests only.
    assert [r.connection for r in mtls_receiver.requests] == [1, 2, 1, 2]
    # Without a certificate a third connection is made, and the receiver refuses it: an
    # idle connection of alice's or bob's was not lent to it.
    assert anonymous.status_code is None, anonymous
    assert anonymous.error_kind in (ErrorKind.TLS, ErrorKind.CONNECTION), anonymous
    assert mtls_receiver.connections == 3


def test_the_pool_key_tells_certificates_apart(authority):
    target = checked_target("https://receiver.example/hook", public_only=False)
    alice = client_certificate(authority.client_pem("alice"))
    alice_again = client_certificate(authority.client_pem("alice"))  # another key pair
    keys = {
        target.pool_key(None),
        target.pool_key(alice),
        target.pool_key(alice_again),
    }
    assert len(keys) == 3
    assert target.pool_key(alice) == target.pool_key(alice)
    assert "PRIVATE" not in repr(alice)


def test_a_certificate_openssl_refuses_raises_ssl_error(authority):
    certificate, _ = authority.issue("alice")
    _, other_key = authority.issue("bob")
    with pytest.raises(ssl.SSLError):
        client_certificate(certificate + other_key)  # the key is not the certificate's
