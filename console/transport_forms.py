"""The form that sets how webhooks reach an endpoint (signing, OAuth2 auth, client
certificate), shared by the console and the portal.

Write-only values go one way: the client secret and the certificate are never put back
into a page (no initial value, not re-rendered after an error); left empty, the stored
ones are kept, as a PATCH that leaves them out does. The rules are the services' (one
endpoint_update, the API's); a refusal lands on the form field it names.
"""

from __future__ import annotations

from typing import Any

from django import forms

from core.exceptions import InvalidInput
from webhooks.models import Endpoint
from webhooks.secrets import ED25519, HMAC_SHA256
from webhooks.services.endpoint_auth import MAX_CLIENT_SECRET, OAUTH2_CLIENT_CREDENTIALS
from webhooks.services.endpoint_certificates import MAX_PEM_CHARS
from webhooks.services.endpoints import endpoint_update

AUTH_PARTS = ("token_url", "client_id", "client_secret", "scope", "audience")
AUTH_FIELDS = AUTH_PARTS  # the form's auth inputs, in the order the page shows them


class TransportForm(forms.Form):
    signing = forms.ChoiceField(
        choices=[
            (HMAC_SHA256, "HMAC-SHA256 (a shared whsec_ secret, v1)"),
            (ED25519, "Ed25519 (a whpk_ public key for your receiver, v1a)"),
        ]
    )
    auth_type = forms.ChoiceField(
        required=False,
        label="Type",
        choices=[("", "None"), (OAUTH2_CLIENT_CREDENTIALS, "OAuth2 client credentials")],
    )
    token_url = forms.CharField(required=False, max_length=2048, label="Token URL")
    client_id = forms.CharField(required=False, max_length=255, label="Client id")
    client_secret = forms.CharField(
        required=False,
        max_length=MAX_CLIENT_SECRET,
        strip=False,
        label="Client secret",
        widget=forms.PasswordInput(render_value=False),  # write-only: never sent back
    )
    scope = forms.CharField(required=False, max_length=1024)
    audience = forms.CharField(required=False, max_length=1024)
    tls_client_certificate = forms.CharField(
        required=False, max_length=MAX_PEM_CHARS, strip=False, label="Client certificate (PEM)"
    )
    tls_client_certificate_file = forms.FileField(required=False, label="or a PEM file")

    def endpoint_fields(self, endpoint: Endpoint) -> dict[str, Any]:
        """What endpoint_update is given: auth without a client secret keeps the stored
        one; no certificate given keeps the stored one."""
        data = self.cleaned_data
        fields: dict[str, Any] = {"signing": data["signing"]}
        if data["auth_type"]:
            auth = {"type": data["auth_type"]}
            auth |= {name: data[name] for name in AUTH_PARTS if data[name]}
            fields["auth"] = auth
        elif endpoint.auth:
            fields["auth"] = None
        upload = data.get("tls_client_certificate_file")
        pem = upload.read(MAX_PEM_CHARS + 1).decode("utf-8", "replace") if upload else ""
        pem = pem or data["tls_client_certificate"]
        if pem.strip():
            fields["tls_client_certificate"] = pem
        return fields


def transport_initial(endpoint: Endpoint) -> dict[str, Any]:
    """The form as the endpoint is now, without its write-only values."""
    auth = endpoint.auth or {}
    return {
        "signing": endpoint.signing,
        "auth_type": auth.get("type", ""),
        **{name: auth.get(name) or "" for name in AUTH_PARTS if name != "client_secret"},
    }


def transport_save(*, form: TransportForm, endpoint: Endpoint) -> bool:
    """Apply the form; False with the service's refusal on the field it names."""
    try:
        endpoint_update(endpoint=endpoint, **form.endpoint_fields(endpoint))
    except InvalidInput as error:
        name = (error.field or "").removeprefix("auth.")
        form.add_error(name if name in form.fields else None, error.detail)
        return False
    return True
