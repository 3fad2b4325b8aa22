"""Store methods for Sundial's identity-token keys (migration 0023): the private halves
go in sealed, only the public JWKs come out."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import asyncpg

from sundial.api.model import StoredIdentityKey
from sundial.api.store._base import queries, translate
from sundial.core.identity import ALGORITHM, NewKey
from sundial.core.sealing import Sealed


def _insert(key: NewKey, now: datetime, first: bool) -> tuple[object, ...]:
    """insert_identity_key's parameters."""
    sealed = key.sealed
    return (
        key.kid,
        ALGORITHM,
        key.public_jwk,
        sealed.kek_id,
        sealed.wrapped_key,
        sealed.nonce,
        sealed.ciphertext,
        now,
        first,
    )


class IdentityKeyStore:
    """Identity-token keys. Mixed into :class:`sundial.api.store.Store`."""

    _pool: asyncpg.Pool

    @translate
    async def add_identity_key(self, key: NewKey, now: datetime, *, first: bool) -> bool:
        """Store ``key``; with ``first``, only when no key signs yet. Whether it was
        stored."""
        kid = await self._pool.fetchval(queries.insert_identity_key, *_insert(key, now, first))
        return kid is not None

    @translate
    async def rotate_identity_key(self, key: NewKey, now: datetime, until: datetime) -> None:
        """Store ``key``, which signs from now on; the others stay published until
        ``until``."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.fetchval(queries.insert_identity_key, *_insert(key, now, False))
            await conn.execute(queries.retire_identity_keys, key.kid, until, now)

    @translate
    async def published_identity_keys(self, now: datetime) -> list[dict[str, str]]:
        """The public JWKs a token may be verified with at ``now``, newest first."""
        rows = await self._pool.fetch(queries.published_identity_keys, now)
        return [dict(r["public_jwk"]) for r in rows]

    @translate
    async def list_identity_keys(self, now: datetime, limit: int) -> list[StoredIdentityKey]:
        """The stored keys at ``now``, newest first, at most ``limit``."""
        rows = await self._pool.fetch(queries.list_identity_keys, now, limit)
        return [
            StoredIdentityKey(
                kid=r["kid"],
                algorithm=r["algorithm"],
                kek_id=r["kek_id"],
                create_time=r["created_at"],
                retire_time=r["retire_at"],
                signing=r["signing"],
                published=r["published"],
            )
            for r in rows
        ]

    @translate
    async def rewrap_identity_keys(
        self, primary: str, limit: int, rewrap: Callable[[str, Sealed], Sealed]
    ) -> tuple[int, int]:
        """Re-wrap up to ``limit`` not-retired keys whose data key is not under key
        ``primary`` with ``rewrap`` (``(kid, Sealed) -> Sealed``), in one transaction;
        returns how many were re-wrapped and how many remain."""
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(queries.identity_keys_to_rewrap, primary, limit)
            for row in rows:
                sealed = rewrap(
                    row["kid"],
                    Sealed(row["kek_id"], row["wrapped_key"], row["nonce"], row["ciphertext"]),
                )
                await conn.execute(
                    queries.rewrap_identity_key, row["kid"], sealed.kek_id, sealed.wrapped_key
                )
            remaining = await conn.fetchval(queries.count_identity_keys_to_rewrap, primary)
        return len(rows), remaining
