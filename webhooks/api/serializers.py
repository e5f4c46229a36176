from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.fields import (
    BlankAsNullField,
    OwnerField,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
)
from core.crypto import UNREADABLE, opened
from webhooks.filters import MAX_BYTES as MAX_FILTER_BYTES
from webhooks.filters import MAX_LEVELS as MAX_FILTER_LEVELS
from webhooks.models import ConsumerKey, Endpoint, EventType
from webhooks.secrets import SIGNING_SCHEMES
from webhooks.services import endpoint_auth as auth_rules
from webhooks.services import endpoint_certificates as certificate_rules
from webhooks.services import endpoint_rules as rules
from webhooks.services.endpoint_filters import filter_opened
from webhooks.services.endpoint_readable import READABLE_FIELDS, endpoint_unreadable
from webhooks.services.endpoints import headers_decrypted

# Said by every field stored encrypted that a read may find no key for.
UNREADABLE_NOTE = " null when no key of HOMING_ENCRYPTION_KEY opens it (named in `unreadable`)."


@extend_schema_field(
    {
        "type": "array",
        "maxItems": rules.MAX_EVENT_TYPES,
        "items": {
            "type": "string",
            "maxLength": 255,
            "pattern": f"^(?:{rules.EVENT_TYPE_PATTERN.pattern})$",
        },
    }
)
class EventTypesField(serializers.ListField):
    """Checked by endpoint_rules; the schema states the same limits."""

    child = StrictCharField(trim_whitespace=False)


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "description": "Extra request headers sent with every webhook (null written: none);"
        + UNREADABLE_NOTE,
        "maxProperties": rules.MAX_CUSTOM_HEADERS,
        "additionalProperties": {"type": "string", "maxLength": rules.MAX_HEADER_VALUE},
    }
)
class HeadersField(serializers.DictField):
    """Header values are stored encrypted; the tenant reads and writes them plain."""

    child = StrictCharField(trim_whitespace=False, allow_blank=True)

    def to_representation(self, value: dict[str, str]) -> dict[str, str] | None:  # type: ignore[override]  # null: unreadable (UNREADABLE_NOTE)
        shown = opened(lambda: headers_decrypted(value))
        return None if shown is UNREADABLE else super().to_representation(shown)


# Every URL the rules accept matches this (the scheme in any case, then no control
# character and nothing Python's isspace() takes for a space: the rules refuse both), so a
# URL that does not is refused; the rules check the rest. Spelt out rather than `\S`:
# JavaScript's takes U+FEFF for a space, Python's isspace() does not.
URL_SCHEMA_PATTERN = (
    r"^[Hh][Tt][Tt][Pp][Ss]?://"
    r"[^\x00-\x20\x7f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$"
)


@extend_schema_field(
    {"type": "string", "maxLength": rules.MAX_URL_LENGTH, "pattern": URL_SCHEMA_PATTERN}
)
class UrlField(StrictCharField):
    pass


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "description": "OAuth2 client credentials: each webhook carries a bearer token fetched "
        "from token_url. client_secret is write-only (never shown back; left out of a PATCH, "
        "the stored one is kept).",
        "properties": {
            "type": {"type": "string", "enum": list(auth_rules.AUTH_TYPES)},
            "token_url": {
                "type": "string",
                "maxLength": rules.MAX_URL_LENGTH,
                "pattern": URL_SCHEMA_PATTERN,
            },
            "client_id": {"type": "string", "minLength": 1, "maxLength": auth_rules.MAX_CLIENT_ID},
            "client_secret": {
                "type": "string",
                "minLength": 1,
                "maxLength": auth_rules.MAX_CLIENT_SECRET,
                "writeOnly": True,
            },
            "scope": {"type": "string", "nullable": True, "maxLength": auth_rules.MAX_SCOPE},
            "audience": {"type": "string", "nullable": True, "maxLength": auth_rules.MAX_SCOPE},
        },
        "required": ["type", "token_url", "client_id"],
        "additionalProperties": False,
    }
)
class AuthField(serializers.Field):
    """Checked by endpoint_auth (field errors name `auth.token_url`…); shown without the
    client secret."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return auth_rules.auth_shown(value)


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "description": "Which events this endpoint takes besides `event_types`: the JSON "
        "match syntax (README, 'Filters') over {type, data, ordering_key}; "
        f"at most {MAX_FILTER_BYTES} bytes and {MAX_FILTER_LEVELS} levels; null for none, or"
        + UNREADABLE_NOTE,
        "additionalProperties": True,
    }
)
class FilterField(serializers.JSONField):
    """Any JSON here; webhooks.filters checks it (a 400 naming its path). Stored
    encrypted, shown in plain (endpoint_filters)."""

    def to_representation(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        spec = opened(lambda: filter_opened(value))
        return None if spec is UNREADABLE else spec


class CertificateInfoSerializer(serializers.Serializer):
    subject = serializers.CharField(help_text="RFC 4514, e.g. `CN=homing,O=Acme`")
    issuer = serializers.CharField()
    expires_at = serializers.DateTimeField()


class EndpointSerializer(serializers.ModelSerializer):
    """Shapes an endpoint; the rules for its fields live in webhooks.services.endpoint_rules
    (shared with the admin), so this only checks JSON types. It never carries the secret."""

    url = UrlField(trim_whitespace=False, max_length=rules.MAX_URL_LENGTH)
    description = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=Endpoint._meta.get_field("description").max_length,  # type: ignore[arg-type]  # a CharField's: set
    )
    event_types = EventTypesField(required=False)
    rate_limit = StrictIntegerField(
        allow_null=True, required=False, min_value=1, max_value=rules.MAX_RATE_LIMIT
    )
    headers = HeadersField(required=False, allow_null=True)  # null: none, as {}
    is_active = StrictBooleanField(required=False)
    disabled_reason = BlankAsNullField()  # CONTRACT: null unless Homing deactivated it
    owner = OwnerField(allow_null=True, required=False)
    signing = serializers.ChoiceField(choices=list(SIGNING_SCHEMES), required=False)
    auth = AuthField(required=False, allow_null=True)
    filter = FilterField(allow_null=True, required=False)
    # Write-only (checked by endpoint_certificates: 400 naming it when it does not parse,
    # its key does not match or it has expired); reads show its summary instead.
    tls_client_certificate = StrictCharField(
        write_only=True,
        required=False,
        allow_null=True,
        allow_blank=True,
        trim_whitespace=False,
        max_length=certificate_rules.MAX_PEM_CHARS,
        help_text="PEM: the client certificate, its chain, then its private key (mutual TLS). "
        "Write-only; null or an empty string removes it, left out keeps it.",
    )
    tls_client_certificate_info = serializers.SerializerMethodField(
        help_text="The client certificate's subject, issuer and expiry; null when none is set, "
        "or" + UNREADABLE_NOTE
    )
    unreadable = serializers.SerializerMethodField(
        help_text="The fields stored encrypted that no key of HOMING_ENCRYPTION_KEY opens "
        "(the key changed without a rotation, or a damaged row): `headers`, `filter` and "
        "`tls_client_certificate_info` then read as null; `secret` (it cannot sign: rotate "
        "it), `auth` (its client secret) and `tls_client_certificate` cannot be used for "
        "webhooks until replaced. Empty normally."
    )

    class Meta:
        model = Endpoint
        fields = [
            "id",
            "url",
            "description",
            "event_types",
            "filter",
            "rate_limit",
            "headers",
            "is_active",
            "owner",
            "signing",
            "auth",
            "tls_client_certificate",
            "tls_client_certificate_info",
            "unreadable",
            "circuit_state",
            "consecutive_failures",
            "failing_since",
            "disabled_reason",
            "created_at",
        ]
        read_only_fields = [
            "id",
            "circuit_state",
            "consecutive_failures",
            "failing_since",
            "disabled_reason",
            "created_at",
        ]

    @extend_schema_field(CertificateInfoSerializer(allow_null=True))
    def get_tls_client_certificate_info(self, endpoint: Endpoint) -> dict[str, str] | None:
        stored = endpoint.tls_client_certificate
        info = opened(lambda: certificate_rules.certificate_info(stored=stored))
        return None if info is UNREADABLE else info

    @extend_schema_field(
        {"type": "array", "items": {"type": "string", "enum": list(READABLE_FIELDS)}}
    )
    def get_unreadable(self, endpoint: Endpoint) -> list[str]:
        return endpoint_unreadable(endpoint=endpoint)


class EndpointWithSecretSerializer(EndpointSerializer):
    """The answer to POST /endpoints: the only endpoint body that carries the secret."""

    secret = serializers.CharField(read_only=True)
    # Not read_only: the schema would mark it required, and HMAC endpoints have none.
    public_key = serializers.CharField(
        required=False, help_text="An ed25519 endpoint's `whpk_` public key."
    )

    class Meta(EndpointSerializer.Meta):
        fields = [*EndpointSerializer.Meta.fields, "secret", "public_key"]


class SecretSerializer(serializers.Serializer):
    secret = serializers.CharField(read_only=True)
    # Not read_only: the schema would mark it required, and HMAC endpoints have none.
    public_key = serializers.CharField(
        required=False,
        help_text="An ed25519 endpoint's public key (`whpk_…`), for its receiver to verify "
        "`v1a` signatures with; absent for hmac-sha256.",
    )


class ConsumerKeyCreateSerializer(serializers.Serializer):
    owner = OwnerField()
    # Strict: the schema says string, so a number (`0`) is refused, not stored as "0".
    description = StrictCharField(required=False, allow_blank=True, max_length=500)


class ConsumerKeySerializer(serializers.ModelSerializer):
    """A consumer key as lists show it: never the key itself (only its first characters)."""

    class Meta:
        model = ConsumerKey
        fields = ["id", "owner", "description", "prefix", "created_at"]


class ConsumerKeyWithKeySerializer(ConsumerKeySerializer):
    """The answer to POST /consumer-keys: the one time the key is shown."""

    key = serializers.CharField(read_only=True)

    class Meta(ConsumerKeySerializer.Meta):
        fields = [*ConsumerKeySerializer.Meta.fields, "key"]


@extend_schema_field(
    {
        "type": ["object", "boolean"],
        "nullable": True,
        "description": "A JSON Schema 2020-12 of the type's `data` (local `$ref`s only).",
    }
)
class SchemaField(serializers.JSONField):
    """Checked by webhooks.services.event_schemas (a 400 naming where in it)."""


@extend_schema_field(
    {"type": "array", "maxItems": 10, "items": {"type": "object", "additionalProperties": True}}
)
class ExamplesField(serializers.JSONField):
    """`data` objects of the type; each must satisfy the schema."""


class EventTypeSerializer(serializers.ModelSerializer):
    """A catalog entry; the rules live in webhooks.services.event_types."""

    name = StrictCharField(
        max_length=255, trim_whitespace=False, help_text="An event type, e.g. `invoice.paid`."
    )
    description = StrictCharField(required=False, allow_blank=True, max_length=5000)
    schema = SchemaField(required=False, allow_null=True)
    examples = ExamplesField(required=False)
    deprecated = StrictBooleanField(required=False)

    class Meta:
        model = EventType
        fields = ["name", "description", "schema", "examples", "deprecated", "created_at"]
        read_only_fields = ["created_at"]
