"""What a run calls: one target shape for every service (job.proto ``Target``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_TOKEN_LIFETIME_S",
    "GrpcTarget",
    "HttpTarget",
    "IdentityToken",
    "Target",
    "TargetAuth",
]

DEFAULT_TOKEN_LIFETIME_S = 300
"""An identity token's lifetime when the target does not say (job.proto)."""


@dataclass(frozen=True, slots=True)
class IdentityToken:
    """A per-call JWT (job.proto ``IdentityToken``)."""

    audience: str = ""
    """The aud claim; empty: the target's URL or address."""
    lifetime_s: float = DEFAULT_TOKEN_LIFETIME_S
    """exp minus iat (checked: 60 to 3,600 s)."""


@dataclass(frozen=True, slots=True)
class TargetAuth:
    """What calls carry beyond Sundial-Signature (job.proto ``TargetAuth``)."""

    standard_webhooks: bool = False
    identity_token: IdentityToken | None = None

    def __bool__(self) -> bool:
        return self.standard_webhooks or self.identity_token is not None


NO_AUTH = TargetAuth()


@dataclass(frozen=True, slots=True)
class HttpTarget:
    """An HTTP(S) call (job.proto ``HttpTarget``): the payload is the body."""

    url: str
    method: str = "POST"
    headers: Mapping[str, str] = field(default_factory=dict)
    auth: TargetAuth = NO_AUTH


@dataclass(frozen=True, slots=True)
class GrpcTarget:
    """A call to ``sundial.v1.TargetService/Execute`` (job.proto ``GrpcTarget``)."""

    address: str
    plaintext: bool = False
    metadata: Mapping[str, str] = field(default_factory=dict)
    auth: TargetAuth = NO_AUTH


Target = HttpTarget | GrpcTarget
