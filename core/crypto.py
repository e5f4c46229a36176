"""Encryption at rest for values Homing must read back (endpoint signing secrets).

Fernet (AES-128-CBC + HMAC-SHA256, from `cryptography`) with a MultiFernet over every
configured key: the first key encrypts, any of them decrypts. That is what makes a key
rotation safe: list the new key first and the old one after it, restart, run
`manage.py rotate_encryption_key` (re-encrypts every secret with the first key), then
drop the old key.

`HOMING_ENCRYPTION_KEY` is a comma-separated list. An item that is a Fernet key
(urlsafe base64 of 32 bytes) is used as is; anything else is treated as a passphrase
and stretched with HKDF-SHA256. With no list, the key is derived from SECRET_KEY the
same way — so after changing SECRET_KEY, putting the old SECRET_KEY second in
HOMING_ENCRYPTION_KEY still decrypts what it encrypted.
"""

from __future__ import annotations

import base64
import binascii
import enum
import functools
from collections.abc import Callable
from typing import Literal, TypeVar

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

# Changing this changes every derived key: it names the purpose, not a version.
_HKDF_INFO = b"homing endpoint secrets"


class DecryptionFailed(Exception):
    """No configured key opens this value (a key was dropped too early, or it is corrupt)."""


class Unreadable(enum.Enum):
    """What `opened` gives for a stored value it cannot read (a sentinel: None is often a
    value, "no filter" say)."""

    UNREADABLE = "unreadable"


UNREADABLE = Unreadable.UNREADABLE
T = TypeVar("T")


def opened(read: Callable[[], T]) -> T | Literal[Unreadable.UNREADABLE]:
    """`read()` — which decrypts a stored value and parses it — or UNREADABLE when no
    configured key opens it (HOMING_ENCRYPTION_KEY changed without a rotation) or what it
    opens is damaged (ValueError: not the JSON or PEM it was). The one place where read
    paths (API, pages, admin) turn a key problem into something they can show instead of
    a 500; the worker, which must not send without the value, catches DecryptionFailed."""
    try:
        return read()
    except (DecryptionFailed, ValueError):
        return UNREADABLE


def derive_key(passphrase: str) -> bytes:
    """A Fernet key from any string (a SECRET_KEY or a passphrase), deterministically."""
    raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO).derive(
        passphrase.encode()
    )
    return base64.urlsafe_b64encode(raw)


@functools.cache
def _as_fernet_key(item: str) -> bytes:
    try:
        if len(base64.urlsafe_b64decode(item.encode())) == 32 and len(item) == 44:
            return item.encode()
    except (binascii.Error, ValueError):
        pass
    return derive_key(item)


def configured_keys() -> list[bytes]:
    items = [item.strip() for item in settings.HOMING_ENCRYPTION_KEY if item.strip()]
    if not items:
        items = [settings.SECRET_KEY]
    return [_as_fernet_key(item) for item in items]


@functools.cache
def _fernet(keys: tuple[bytes, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def _current() -> MultiFernet:
    # Keyed on the configured keys, so tests that override settings get the right ones.
    return _fernet(tuple(configured_keys()))


def encrypt(plaintext: str) -> str:
    return _current().encrypt(plaintext.encode()).decode("ascii")


def decrypt(token: str) -> str:
    return _decrypt(tuple(configured_keys()), token)


@functools.lru_cache(maxsize=4096)
def _decrypt(keys: tuple[bytes, ...], token: str) -> str:
    # Cached: workers sign every attempt, and a token never changes its plaintext.
    try:
        return _fernet(keys).decrypt(token.encode()).decode()
    except (InvalidToken, UnicodeError) as exc:
        raise DecryptionFailed(
            "cannot decrypt a stored secret with HOMING_ENCRYPTION_KEY's keys"
        ) from exc


def reencrypt(token: str) -> str:
    """The same plaintext under the first key (MultiFernet.rotate); the rotation command."""
    try:
        return _current().rotate(token.encode()).decode("ascii")
    except InvalidToken as exc:
        raise DecryptionFailed(
            "cannot decrypt a stored secret with HOMING_ENCRYPTION_KEY's keys"
        ) from exc
