"""The sender through a real egress proxy (tinyproxy): a CONNECT tunnel for http and
https alike, TLS end to end with the receiver, refusals told apart from dead targets."""

from __future__ import annotations

import shutil
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from deliveries.lifecycle.retry import Outcome, classify
from deliveries.results import ErrorKind
from deliveries.transport.client_tls import client_certificate
from deliveries.transport.proxy import parse_proxy
from deliveries.transport.sender import Sender
from tests.certificates import Authority, mtls_server_context, self_signed_for_loopback
from tests.proxies import PROXY_PEER, TinyProxy
from tests.scripted_receivers import Receiver, answer, answer_client_name

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not shutil.which("tinyproxy", path="/usr/bin:/usr/sbin"), reason="no tinyproxy"
    ),
]


def post(sender: Sender, url: str, timeout: float = 5.0):
    return sender.send(url=url, body=b'{"id":"evt_1"}', headers={"X-Token": "t"}, timeout=timeout)


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[TinyProxy]:
    started = TinyProxy(tmp_path / "proxy", deny_hosts=("blocked.example",)).start()
    yield started
    started.stop()


def through(proxy_url: str) -> Sender:
    return Sender(version="1", allow_private_networks=True, proxy=parse_proxy(proxy_url)).start()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    started = Receiver(answer(200, b"ok")).start()
    yield started
    started.close()


def test_a_webhook_goes_through_the_proxy_and_the_receiver_sees_the_proxy(proxy, receiver):
    sender = through(proxy.url)
    try:
        results = [post(sender, receiver.url()) for _ in range(3)]
    finally:
        sender.close()
    assert [r.status_code for r in results] == [200] * 3
    assert receiver.peers == [PROXY_PEER]  # one tunnel, kept alive for all three
    assert [r.header("x-token") for r in receiver.requests] == [["t"]] * 3
    # A tunnel, not an absolute-form request: the proxy never saw the path or a header.
    assert proxy.log().count("CONNECT 127.0.0.1:") == 1 and "/hook" not in proxy.log()


def test_tls_stays_end_to_end_with_the_receiver(proxy, tmp_path, monkeypatch):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_bytes(self_signed_for_loopback(key))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    receiver = Receiver(answer(200, b"over tls"), tls=context).start()
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # read when the sender makes its context
    sender = through(proxy.url)
    try:
        url = receiver.url().replace("http://", "https://")
        result = post(sender, url)
        # The host-name check is on the URL's host: this certificate names 127.0.0.1 only.
        other_name = post(sender, url.replace("127.0.0.1", "localhost"))
    finally:
        sender.close()
        receiver.close()
    assert (result.status_code, result.response_body) == (200, b"over tls")
    assert receiver.peers[0] == PROXY_PEER
    assert other_name.error_kind is ErrorKind.TLS, other_name


def test_a_client_certificate_is_presented_through_the_tunnel(proxy, tmp_path, monkeypatch):
    authority = Authority()
    receiver = Receiver(answer_client_name, tls=mtls_server_context(authority, tmp_path)).start()
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    sender = through(proxy.url)
    try:
        url = receiver.url().replace("http://", "https://")
        certificate = client_certificate(authority.client_pem("alice"))
        result = sender.send(
            url=url, body=b"{}", headers={}, timeout=5.0, client_certificate=certificate
        )
    finally:
        sender.close()
        receiver.close()
    # The handshake, client certificate included, is between the sender and the receiver.
    assert (result.status_code, result.response_body) == (200, b"alice"), result
    assert receiver.peers == [PROXY_PEER]


def test_a_deny_rule_is_a_retryable_refusal_that_names_the_proxy(proxy, receiver):
    sender = through(proxy.url)
    try:
        # Never resolved here: the proxy's rule refuses the name before any lookup.
        result = post(sender, receiver.url().replace("127.0.0.1", "blocked.example"))
    finally:
        sender.close()
    assert result.status_code is None and result.error_kind is ErrorKind.PROXY
    assert result.error == (
        f"the proxy refused CONNECT blocked.example:{receiver.port}: HTTP 403 Filtered"
    )
    assert classify(status_code=None, error_kind=result.error_kind).outcome is Outcome.RETRYABLE
    assert receiver.connections == 0


def test_a_target_the_proxy_cannot_reach_is_the_targets_failure(proxy):
    sender = through(proxy.url)
    try:
        result = post(sender, "http://127.0.0.1:1/hook")
    finally:
        sender.close()
    assert result.error_kind is ErrorKind.CONNECTION  # counts against the circuit
    assert result.error is not None and result.error.startswith(
        "the proxy refused CONNECT 127.0.0.1:1: HTTP 500"
    )


def test_a_proxy_that_does_not_answer_is_a_connection_error(receiver):
    sender = through("http://127.0.0.1:1")
    try:
        result = post(sender, receiver.url())
    finally:
        sender.close()
    assert result.error_kind is ErrorKind.CONNECTION
    assert "cannot reach the proxy 127.0.0.1:1" in (result.error or "")


def test_proxy_credentials_go_in_proxy_authorization(tmp_path, receiver):
    proxy = TinyProxy(tmp_path / "proxy")
    proxy.config.write_text(proxy.config.read_text() + "BasicAuth homing s3cr3t\n")
    proxy.start()
    try:
        anonymous, with_credentials = (
            through(proxy.url),
            through(proxy.url.replace("http://", "http://homing:s3cr3t@")),
        )
        try:
            refused = post(anonymous, receiver.url())
            accepted = post(with_credentials, receiver.url())
        finally:
            anonymous.close()
            with_credentials.close()
    finally:
        proxy.stop()
    assert refused.error_kind is ErrorKind.PROXY and "HTTP 407" in (refused.error or "")
    assert accepted.status_code == 200


def test_a_bad_proxy_setting_is_refused_by_name():
    for bad in ("https://proxy:3128", "http://proxy", "http://proxy:3128/path"):
        with pytest.raises(ValueError, match="HOMING_EGRESS_PROXY"):
            parse_proxy(bad)
    assert parse_proxy("http://u%40x:p@proxy:3128").authorization == "Basic dUB4OnA="
