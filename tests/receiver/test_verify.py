from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from homing_receiver import Webhook, WebhookVerificationError
from hypothesis import given
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook as StandardWebhook

SignHeaders = Callable[..., dict[str, str]]  # the sign_headers fixture

# The test vector published with the Standard Webhooks specification.
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = '{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

BODY = b'{"type": "invoice.paid", "data": {"id": "inv_1", "amount": 4200}}'


def spec_headers() -> dict[str, str]:
    return {
        "webhook-id": SPEC_ID,
        "webhook-timestamp": str(SPEC_TIMESTAMP),
        "webhook-signature": SPEC_SIGNATURE,
    }


def test_it_signs_the_spec_vector() -> None:
    webhook = Webhook(SPEC_SECRET)

    assert webhook.sign(SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY) == SPEC_SIGNATURE


def test_it_verifies_the_spec_vector_at_its_own_time() -> None:
    webhook = Webhook(SPEC_SECRET, now=lambda: SPEC_TIMESTAMP + 10)

    assert webhook.verify(SPEC_BODY, spec_headers()) == {"test": 2432232314}


def test_it_rejects_the_spec_vector_today_as_too_old() -> None:
    with pytest.raises(WebhookVerificationError, match="timestamp too old"):
        Webhook(SPEC_SECRET).verify(SPEC_BODY, spec_headers())


def test_it_accepts_a_signature_made_by_the_standardwebhooks_package(secret: str) -> None:
    now = datetime.now(tz=UTC)
    headers = {
        "webhook-id": "msg_alice_1",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": StandardWebhook(secret).sign("msg_alice_1", now, BODY.decode()),
    }

    assert Webhook(secret).verify(BODY, headers)["data"]["amount"] == 4200


def test_its_signatures_pass_the_standardwebhooks_package(
    secret: str, sign_headers: SignHeaders
) -> None:
    headers = sign_headers(BODY)

    assert StandardWebhook(secret).verify(BODY, headers) == json.loads(BODY)


@given(
    msg_id=st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1),
    payload=st.dictionaries(st.text(), st.integers() | st.text() | st.booleans()),
)
def test_it_agrees_with_the_standardwebhooks_package_on_any_message(
    msg_id: str, payload: dict[str, object]
) -> None:
    body = json.dumps(payload, ensure_ascii=False)
    ts = int(time.time())
    ours = Webhook(SPEC_SECRET).sign(msg_id, ts, body)
    theirs = StandardWebhook(SPEC_SECRET).sign(msg_id, datetime.fromtimestamp(ts, UTC), body)

    assert ours == theirs
    headers = {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": ours}
    assert Webhook(SPEC_SECRET).verify(body.encode(), headers) == payload


def test_it_accepts_str_and_bytes_bodies(webhook: Webhook, sign_headers: SignHeaders) -> None:
    headers = sign_headers(BODY)

    assert webhook.verify(BODY, headers) == webhook.verify(BODY.decode(), headers)


def test_it_rejects_a_tampered_body(webhook: Webhook, sign_headers: SignHeaders) -> None:
    headers = sign_headers(BODY)
    tampered = BODY.replace(b"4200", b"9999")

    with pytest.raises(WebhookVerificationError, match="No matching signature found"):
        webhook.verify(tampered, headers)


def test_it_rejects_a_signature_made_with_another_secret(
    webhook: Webhook, sign_headers: SignHeaders
) -> None:
    mallory = Webhook("whsec_" + base64.b64encode(b"mallory's own key").decode())
    headers = sign_headers(BODY, signer=mallory)

    with pytest.raises(WebhookVerificationError, match="No matching signature found"):
        webhook.verify(BODY, headers)


def test_it_rejects_a_stale_timestamp(webhook: Webhook, sign_headers: SignHeaders) -> None:
    headers = sign_headers(BODY, timestamp=time.time() - 301)

    with pytest.raises(WebhookVerificationError, match=r"timestamp too old: 30\d seconds ago"):
        webhook.verify(BODY, headers)


def test_it_rejects_a_timestamp_in_the_future(webhook: Webhook, sign_headers: SignHeaders) -> None:
    headers = sign_headers(BODY, timestamp=time.time() + 600)

    with pytest.raises(WebhookVerificationError, match=r"timestamp too new: .* in the future"):
        webhook.verify(BODY, headers)


def test_it_accepts_timestamps_inside_the_tolerance_either_way(
    webhook: Webhook, sign_headers: SignHeaders
) -> None:
    for skew in (-290, 290):
        webhook.verify(BODY, sign_headers(BODY, timestamp=time.time() + skew))


def test_it_honours_a_custom_tolerance(secret: str, sign_headers: SignHeaders) -> None:
    headers = sign_headers(BODY, timestamp=time.time() - 60)

    with pytest.raises(WebhookVerificationError, match="tolerance 30s"):
        Webhook(secret, tolerance=30).verify(BODY, headers)


@pytest.mark.parametrize("header", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_it_names_the_missing_header(
    header: str, webhook: Webhook, sign_headers: SignHeaders
) -> None:
    headers = sign_headers(BODY)
    del headers[header]

    with pytest.raises(
        WebhookVerificationError, match=f"Missing required header\\(s\\): {header}$"
    ):
        webhook.verify(BODY, headers)


def test_it_treats_an_empty_header_as_missing(webhook: Webhook, sign_headers: SignHeaders) -> None:
    headers = sign_headers(BODY) | {"webhook-signature": ""}

    with pytest.raises(WebhookVerificationError, match="Missing required header"):
        webhook.verify(BODY, headers)


@pytest.mark.parametrize("value", ["soon", "1614265330.5", "-5", "1e9"])
def test_it_rejects_a_timestamp_that_is_not_an_integer(
    value: str, webhook: Webhook, sign_headers: SignHeaders
) -> None:
    headers = sign_headers(BODY) | {"webhook-timestamp": value}

    with pytest.raises(
        WebhookVerificationError, match="webhook-timestamp header is not an integer"
    ):
        webhook.verify(BODY, headers)


def test_it_accepts_any_matching_signature_during_rotation(
    secret: str, sign_headers: SignHeaders
) -> None:
    old = Webhook("whsec_" + base64.b64encode(b"the secret before rotation").decode())
    headers = sign_headers(BODY)
    stale = old.sign(headers["webhook-id"], int(headers["webhook-timestamp"]), BODY)
    headers["webhook-signature"] = f"{stale} {headers['webhook-signature']}"

    assert Webhook(secret).verify(BODY, headers)["type"] == "invoice.paid"


def test_it_ignores_other_signature_versions_and_garbled_entries(
    webhook: Webhook, sign_headers: SignHeaders
) -> None:
    headers = sign_headers(BODY)
    good = headers["webhook-signature"]
    _, _, encoded = good.partition(",")
    headers["webhook-signature"] = f"v1a,{encoded} v1,%%%notbase64 {good}"

    assert webhook.verify(BODY, headers)

    headers["webhook-signature"] = f"v1a,{encoded}"
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        webhook.verify(BODY, headers)


def test_it_looks_headers_up_case_insensitively(
    webhook: Webhook, sign_headers: SignHeaders
) -> None:
    headers = sign_headers(BODY)
    shouty = {
        "Webhook-Id": headers["webhook-id"],
        "WEBHOOK-TIMESTAMP": headers["webhook-timestamp"],
        "webhook-Signature": headers["webhook-signature"],
    }

    assert webhook.verify(BODY, shouty)


def test_it_reads_pairs_asgi_bytes_and_wsgi_environ(
    webhook: Webhook, sign_headers: SignHeaders
) -> None:
    headers = sign_headers(BODY)
    pairs = [("Content-Type", "application/json"), *headers.items()]
    asgi = [(k.encode(), v.encode()) for k, v in pairs]
    environ = {"wsgi.input": object(), "CONTENT_TYPE": "application/json"}
    environ |= {"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()}

    for form in (pairs, asgi, environ):
        assert webhook.verify(BODY, form)["data"]["id"] == "inv_1"


def test_it_rejects_a_signed_body_that_is_not_json(
    webhook: Webhook, sign_headers: SignHeaders
) -> None:
    body = b"amount=4200"

    with pytest.raises(WebhookVerificationError, match="Body is not valid JSON"):
        webhook.verify(body, sign_headers(body))


def test_it_rejects_a_signed_json_body_that_is_not_an_object(
    webhook: Webhook, sign_headers: SignHeaders
) -> None:
    body = b"[1, 2, 3]"

    with pytest.raises(WebhookVerificationError, match="not an object"):
        webhook.verify(body, sign_headers(body))


def test_it_takes_the_secret_with_or_without_prefix_padding_or_as_bytes() -> None:
    key = b"0123456789abcdef0123456789abcdef!"
    encoded = base64.b64encode(key).decode()
    forms: list[str | bytes] = [f"whsec_{encoded}", encoded, encoded.rstrip("="), key]

    signatures = {Webhook(form).sign("msg_1", 1700000000, BODY) for form in forms}

    assert len(signatures) == 1


@pytest.mark.parametrize("bad", ["whsec_", "whsec_not base64!", b""])
def test_it_refuses_an_unusable_secret(bad: str | bytes) -> None:
    with pytest.raises(ValueError, match="secret"):
        Webhook(bad)


def test_it_never_puts_the_expected_signature_in_the_error(
    webhook: Webhook, sign_headers: SignHeaders
) -> None:
    headers = sign_headers(BODY)
    expected = headers["webhook-signature"]
    headers["webhook-signature"] = "v1," + base64.b64encode(b"x" * 32).decode()

    with pytest.raises(WebhookVerificationError) as caught:
        webhook.verify(BODY, headers)

    assert expected.partition(",")[2] not in str(caught.value)
