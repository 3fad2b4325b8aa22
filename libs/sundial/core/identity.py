"""Per-call identity tokens (docs/design.md section 7, "Identity tokens"; job.proto
``IdentityToken``): short-lived JWTs signed with Sundial's Ed25519 keys (EdDSA), minted
by the ledger at grant time and verified by targets against the JWKS the API publishes
at ``/.well-known/jwks.json``.

A key's private half is sealed with the operator's key-encryption keys exactly as tenant
secrets are (:mod:`sundial.core.sealing`, associated data ``identity/<kid>``); its
public half is a JWK (RFC 8037 ``OKP``/``Ed25519``) whose ``kid`` is its RFC 7638
thumbprint. PyJWT encodes the tokens, so they are what PyJWT (and any JOSE library)
verifies.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jwt.algorithms import OKPAlgorithm

from sundial.core.sealing import Keyring, Sealed

__all__ = [
    "ALGORITHM",
    "JWKS_PATH",
    "NewKey",
    "SigningKey",
    "context_of",
    "generate",
    "jwks",
    "mint",
    "open_key",
]

ALGORITHM = "EdDSA"
JWKS_PATH = "/.well-known/jwks.json"


def context_of(kid: str) -> str:
    """What a key's sealing is bound to (associated data of both layers)."""
    return f"identity/{kid}"


@dataclass(frozen=True, slots=True)
class NewKey:
    """A freshly generated key pair: its id, public JWK and sealed private half."""

    kid: str
    public_jwk: dict[str, str]
    sealed: Sealed = field(repr=False)


@dataclass(frozen=True, slots=True)
class SigningKey:
    """An opened signing key."""

    kid: str
    private: Ed25519PrivateKey = field(repr=False)


def _thumbprint(jwk: dict[str, str]) -> str:
    """RFC 7638: SHA-256 over the required members, sorted, no whitespace; base64url."""
    canonical = json.dumps(
        {"crv": jwk["crv"], "kty": jwk["kty"], "x": jwk["x"]}, separators=(",", ":")
    )
    digest = hashlib.sha256(canonical.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def generate(keyring: Keyring) -> NewKey:
    """A new Ed25519 key pair, its private half sealed by ``keyring``'s primary key.

    Raises:
        SealingError: The keyring has no key.
    """
    private = Ed25519PrivateKey.generate()
    public: dict[str, str] = json.loads(OKPAlgorithm.to_jwk(private.public_key()))
    kid = _thumbprint(public)
    public.update({"kid": kid, "alg": ALGORITHM, "use": "sig"})
    raw = private.private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )
    return NewKey(kid, public, keyring.seal(raw, context=context_of(kid)))


def open_key(keyring: Keyring, kid: str, sealed: Sealed) -> SigningKey:
    """The signing key ``sealed`` holds.

    Raises:
        SealingError: It does not open with ``keyring``.
    """
    raw = keyring.open(sealed, context=context_of(kid))
    return SigningKey(kid, Ed25519PrivateKey.from_private_bytes(raw))


def mint(
    key: SigningKey,
    *,
    issuer: str,
    subject: str,
    audience: str,
    now: datetime,
    lifetime: timedelta,
    claims: dict[str, Any] | None = None,
) -> str:
    """A signed JWT: ``iss``, ``sub``, ``aud``, ``iat``, ``nbf``, ``exp`` (``iat`` plus
    ``lifetime``), a unique ``jti``, and ``claims``; ``kid`` in its header."""
    iat = int(now.timestamp())
    payload: dict[str, Any] = {
        **(claims or {}),
        "iss": issuer,
        "sub": subject,
        "aud": audience,
        "iat": iat,
        "nbf": iat,
        "exp": iat + int(lifetime.total_seconds()),
        "jti": uuid.uuid4().hex,
    }
    return jwt.encode(payload, key.private, algorithm=ALGORITHM, headers={"kid": key.kid})


def jwks(public_keys: list[dict[str, str]]) -> dict[str, Any]:
    """The JWK Set document of the published public keys."""
    return {"keys": public_keys}
