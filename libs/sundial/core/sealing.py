"""Envelope encryption of tenant secrets (docs/design.md section 7, "Secrets").

Each secret value is sealed with a data key of its own (AES-256-GCM from
``cryptography``, a random 96-bit nonce, the secret's identity as associated data, so a
ciphertext moved to another row does not open); the data key is wrapped by the
operator's key-encryption key (AES-256-GCM again, associated data naming the secret, the
nonce prefixed to the wrapped key). The database holds only wrapped keys and
ciphertexts; the key-encryption keys come from ``SUNDIAL_SECRET_KEYS`` or
``SUNDIAL_SECRET_KEYS_FILE`` and never reach it.

A :class:`Keyring` holds one or more key-encryption keys by id; the first is the primary
(every new seal and every re-wrap uses it), the others only open what they wrapped.
Rotating: put the new key first and keep the old one, re-wrap
(``AdminService.RewrapSecrets``), then drop the old key.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["Keyring", "KeyringError", "Sealed", "SealingError", "parse_keys"]

_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_NONCE_BYTES = 12


class KeyringError(ValueError):
    """The operator's keys are malformed (the message never holds key material)."""


class SealingError(Exception):
    """A sealed value does not open: wrapped by a key this keyring lacks, or altered."""


@dataclass(frozen=True, slots=True)
class Sealed:
    """A sealed secret value as stored (``tenant_secrets``' columns)."""

    kek_id: str
    wrapped_key: bytes = field(repr=False)
    nonce: bytes = field(repr=False)
    ciphertext: bytes = field(repr=False)


def parse_keys(text: str) -> dict[str, bytes]:
    """``<id>:<base64 of 32 bytes>`` entries, separated by commas or new lines (``#``
    starts a comment line), in order: the first is the primary.

    Raises:
        KeyringError: An entry is malformed, a key is not 32 bytes, or an id repeats.
    """
    keys: dict[str, bytes] = {}
    entries = [
        entry.strip()
        for line in text.splitlines()
        if not line.strip().startswith("#")
        for entry in line.split(",")
    ]
    for position, entry in enumerate(e for e in entries if e):
        key_id, sep, encoded = entry.partition(":")
        key_id = key_id.strip()
        if not sep or not _KEY_ID.fullmatch(key_id):
            raise KeyringError(
                f"key {position + 1}: expected <id>:<base64 key>, the id 1-64 chars of "
                "letters, digits, '.', '_' and '-'"
            )
        try:
            key = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise KeyringError(f"key {key_id!r} is not base64") from None
        if len(key) != 32:
            raise KeyringError(f"key {key_id!r} must be 32 bytes (AES-256), got {len(key)}")
        if key_id in keys:
            raise KeyringError(f"key id {key_id!r} appears twice")
        keys[key_id] = key
    return keys


class Keyring:
    """The operator's key-encryption keys (see the module docstring).

    Args:
        keys: Key id -> 32-byte key, the primary first. Empty: a keyring that seals and
            opens nothing (:attr:`configured` is False).
    """

    def __init__(self, keys: Mapping[str, bytes]) -> None:
        self._keys = {key_id: AESGCM(key) for key_id, key in keys.items()}
        self._primary = next(iter(self._keys), None)

    @classmethod
    def from_settings(cls, keys: str, keys_file: str) -> Keyring:
        """The keyring of ``SUNDIAL_SECRET_KEYS`` (the text) or, when that is empty,
        ``SUNDIAL_SECRET_KEYS_FILE`` (a path; read once, at start)."""
        if keys:
            return cls(parse_keys(keys))
        if keys_file:
            try:
                text = Path(keys_file).read_text()
            except OSError as exc:
                raise KeyringError(f"cannot read the key file: {exc.strerror}") from None
            return cls(parse_keys(text))
        return cls({})

    @property
    def configured(self) -> bool:
        """Whether there is a key to seal with."""
        return self._primary is not None

    @property
    def primary_id(self) -> str:
        """The id of the key new seals and re-wraps use."""
        if self._primary is None:
            raise SealingError("no key-encryption key is configured")
        return self._primary

    def seal(self, value: bytes, *, context: str) -> Sealed:
        """Seal ``value`` under a fresh data key wrapped by the primary key.

        Args:
            context: The secret's identity (``<tenant>/<name>``); bound into both
                layers, so the sealed value opens only for it.
        """
        kek_id = self.primary_id
        data_key = AESGCM.generate_key(bit_length=256)
        nonce = os.urandom(_NONCE_BYTES)
        ciphertext = AESGCM(data_key).encrypt(nonce, value, context.encode())
        return Sealed(kek_id, self._wrap(kek_id, data_key, context), nonce, ciphertext)

    def open(self, sealed: Sealed, *, context: str) -> bytes:
        """The value ``sealed`` holds.

        Raises:
            SealingError: Its key-encryption key is not in this keyring, or it (or the
                context) was altered.
        """
        data_key = self._unwrap(sealed, context)
        try:
            return AESGCM(data_key).decrypt(sealed.nonce, sealed.ciphertext, context.encode())
        except InvalidTag:
            raise SealingError("a sealed value does not open (altered)") from None

    def rewrap(self, sealed: Sealed, *, context: str) -> Sealed:
        """``sealed`` with its data key wrapped by the primary key (the value and its
        ciphertext unchanged)."""
        data_key = self._unwrap(sealed, context)
        kek_id = self.primary_id
        return Sealed(
            kek_id, self._wrap(kek_id, data_key, context), sealed.nonce, sealed.ciphertext
        )

    def _wrap(self, kek_id: str, data_key: bytes, context: str) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        associated = f"{kek_id}/{context}".encode()
        return nonce + self._keys[kek_id].encrypt(nonce, data_key, associated)

    def _unwrap(self, sealed: Sealed, context: str) -> bytes:
        kek = self._keys.get(sealed.kek_id)
        if kek is None:
            raise SealingError(f"key-encryption key {sealed.kek_id!r} is not configured")
        nonce, wrapped = sealed.wrapped_key[:_NONCE_BYTES], sealed.wrapped_key[_NONCE_BYTES:]
        try:
            return kek.decrypt(nonce, wrapped, f"{sealed.kek_id}/{context}".encode())
        except InvalidTag:
            raise SealingError("a wrapped data key does not open (altered)") from None
