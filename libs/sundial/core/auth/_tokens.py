"""Token lookup and the role check (see the package docstring)."""

from __future__ import annotations

import enum
import hashlib
import hmac
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

import asyncpg

from sundial.core.clock import Clock
from sundial.core.db import Queries, translate_db_errors
from sundial.core.errors import PermissionDenied, Unauthenticated

queries = Queries.from_package("sundial.core.auth")

MAX_TOKEN_CHARS = 512
"""Longer bearer values are refused without a lookup."""

_TOUCH_EVERY = timedelta(minutes=1)


class Role(enum.Enum):
    """``api_tokens.role``; the value is the stored text."""

    TENANT = "tenant"
    """JobService calls for one tenant."""
    ADMIN = "admin"
    """AdminService calls."""
    EXECUTOR = "executor"
    """RunLedger calls (served by the scheduler service), for executor processes."""


class Scope(enum.Enum):
    """What a TENANT token may do on top of its role (docs/design.md section 7, "Scopes");
    the value is the text ``api_tokens.scopes`` stores and errors name."""

    READ = "read"
    """Every Get, List, Describe and Preview call."""
    WRITE = "write"
    """Writes to jobs, runs, calendars and notification channels."""
    MANAGE = "manage"
    """Secrets and signing."""


ALL_SCOPES = frozenset(Scope)
"""A token stored without scopes (issued before them, or with none asked for) has all."""


@dataclass(frozen=True, slots=True)
class Credential:
    """Who a token stands for."""

    role: Role
    tenant_id: str | None
    token_id: uuid.UUID | None
    """None for a bootstrap token from configuration."""
    scopes: frozenset[Scope] = ALL_SCOPES
    """What a TENANT token may do (every scope for the other roles: they have no scopes)."""


class Authenticator(Protocol):
    """What resolves a bearer token: :class:`Tokens`, or a test double of it."""

    async def authenticate(self, token: str) -> Credential:
        """The credential ``token`` stands for (raises Unauthenticated otherwise)."""
        ...


def token_hash(token: str) -> bytes:
    """sha256 of the token's UTF-8 bytes: what ``api_tokens.token_hash`` stores."""
    return hashlib.sha256(token.encode()).digest()


def bearer(metadata: Iterable[tuple[str, str | bytes]] | None) -> str:
    """The token of an ``authorization: Bearer <token>`` metadata entry.

    Raises:
        Unauthenticated: No such entry, or not of the Bearer form.
    """
    for key, value in metadata or ():
        if key == "authorization":
            if not isinstance(value, str):
                break
            scheme, _, token = value.strip().partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token:
                raise Unauthenticated("authorization must be 'Bearer <token>'")
            return token
    raise Unauthenticated("missing authorization: Bearer <token> metadata")


class Tokens:
    """Resolves bearer tokens to credentials against ``api_tokens``.

    Args:
        pool: A pool on the Sundial database.
        clock: The source of "now" (expiry, last use).
        bootstrap: Tokens from configuration (compared in constant time, never stored)
            and the role each stands for; e.g. the API's bootstrap admin token.
    """

    def __init__(
        self, pool: asyncpg.Pool, clock: Clock, *, bootstrap: dict[str, Role] | None = None
    ) -> None:
        self._pool = pool
        self._clock = clock
        # Digests, so the comparison takes the same time whatever the token's length.
        self._bootstrap = [(token_hash(t), role) for t, role in (bootstrap or {}).items() if t]

    async def authenticate(self, token: str) -> Credential:
        """The credential ``token`` stands for.

        Raises:
            Unauthenticated: Unknown, revoked or expired token (one message for all).
        """
        if len(token) > MAX_TOKEN_CHARS or not token.isascii():
            raise Unauthenticated("invalid token")
        digest = token_hash(token)
        for secret, role in self._bootstrap:
            if hmac.compare_digest(digest, secret):
                return Credential(role=role, tenant_id=None, token_id=None)
        now = self._clock.now()
        row = await self._find(digest, now)
        if row is None or not row["usable"]:
            raise Unauthenticated("invalid, revoked or expired token")
        last: datetime | None = row["last_used_at"]
        if last is None or now - last >= _TOUCH_EVERY:
            await self._touch(row["token_id"], now)
        stored: list[str] | None = row["scopes"]
        return Credential(
            role=Role(row["role"]),
            tenant_id=row["tenant_id"],
            token_id=row["token_id"],
            scopes=ALL_SCOPES if stored is None else frozenset(Scope(s) for s in stored),
        )

    @translate_db_errors()
    async def _find(self, digest: bytes, now: datetime) -> asyncpg.Record | None:
        return await self._pool.fetchrow(queries.find_token, digest, now)

    @translate_db_errors()
    async def _touch(self, token_id: uuid.UUID, now: datetime) -> None:
        await self._pool.execute(queries.touch_token, token_id, now)


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


async def authorize(
    tokens: Authenticator,
    metadata: Iterable[tuple[str, str | bytes]] | None,
    required: Role,
    service: str,
) -> Credential:
    """Authenticate a call and check its token has the ``required`` role.

    Raises:
        Unauthenticated: No token, or an unknown, revoked or expired one.
        PermissionDenied: A valid token of another role (the message names the role
            ``service`` needs).
    """
    credential = await tokens.authenticate(bearer(metadata))
    if credential.role is not required:
        need, have = required.name.lower(), credential.role.name.lower()
        raise PermissionDenied(f"{service} needs {_a(need)} token; {have} tokens are refused")
    return credential
