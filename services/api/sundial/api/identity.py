"""Sundial's identity-token keys on the API's side (docs/design.md section 7, "Identity
tokens"): the first key made at start, rotation (``AdminService.RotateIdentityKey``) and
the JWKS published at ``/.well-known/jwks.json`` on the HTTP port. The ledger signs with
the newest key (``sundial.scheduler.ledger._identity``); the API never signs a token.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from sundial.api.model import StoredIdentityKey
from sundial.api.store import Store
from sundial.core import identity
from sundial.core.clock import Clock
from sundial.core.errors import FailedPrecondition, InvalidArgument
from sundial.core.sealing import Keyring, Sealed, SealingError

log = logging.getLogger(__name__)

DEFAULT_OVERLAP = timedelta(hours=2)
"""How long a rotated-out key stays published: longer than any token's lifetime (60
minutes at most), so every token it signed expires before it goes."""
MIN_OVERLAP = timedelta(hours=1)
MAX_OVERLAP = timedelta(days=30)
LIST_LIMIT = 100
"""ListIdentityKeys answers the newest this many (a rotation deletes the keys retired
over a day before, so more are only kept by many rotations in a day)."""


class IdentityKeys:
    """The keys' life: made, rotated, published.

    Args:
        store: Database access.
        clock: The source of "now".
        keyring: The operator's key-encryption keys (the private halves are sealed).
    """

    def __init__(self, store: Store, clock: Clock, keyring: Keyring) -> None:
        self._store = store
        self._clock = clock
        self._keyring = keyring

    async def ensure(self) -> None:
        """Make the first key unless one signs already (every replica at start; one
        makes it). Without key-encryption keys there is none: jobs asking for identity
        tokens are called without one (the ledger logs it)."""
        if not self._keyring.configured:
            return
        key = identity.generate(self._keyring)
        if await self._store.add_identity_key(key, self._clock.now(), first=True):
            log.info("identity key made", extra={"action": "identity_key", "kid": key.kid})

    async def rotate(self, overlap: timedelta | None) -> str:
        """A new key signs from now on; the others stay published for ``overlap``
        (default two hours, at least one: every token they signed expires first).
        Returns the new key's id.

        Raises:
            InvalidArgument: ``overlap`` out of range.
            FailedPrecondition: No key-encryption key is configured.
        """
        overlap = DEFAULT_OVERLAP if overlap is None else overlap
        if not MIN_OVERLAP <= overlap <= MAX_OVERLAP:
            raise InvalidArgument("overlap", "must be between 1h and 30 days")
        if not self._keyring.configured:
            raise FailedPrecondition(
                "no key-encryption key is configured (SUNDIAL_SECRET_KEYS): identity keys "
                "cannot be sealed"
            )
        key = identity.generate(self._keyring)
        now = self._clock.now()
        await self._store.rotate_identity_key(key, now, now + overlap)
        log.info("identity key rotated", extra={"action": "identity_key", "kid": key.kid})
        return key.kid

    async def jwks(self) -> dict[str, Any]:
        """The JWK Set of the published keys."""
        return identity.jwks(await self._store.published_identity_keys(self._clock.now()))

    async def stored(self) -> list[StoredIdentityKey]:
        """The stored keys, newest first (at most :data:`LIST_LIMIT`)."""
        return await self._store.list_identity_keys(self._clock.now(), LIST_LIMIT)

    async def rewrap(self, limit: int) -> tuple[int, int]:
        """Re-wrap the private halves of up to ``limit`` keys that may still sign under the
        primary key-encryption key (a key-encryption-key rotation: afterwards the old one
        can be dropped and the keys still sign); returns (re-wrapped, remaining).

        A retired key is left as it is: it never signs again, and its public half (all
        the JWKS needs) is not sealed.

        Raises:
            FailedPrecondition: No key-encryption key is configured, or a key was sealed
                under one this keyring lacks.
        """
        if not self._keyring.configured:
            raise FailedPrecondition("no key-encryption key is configured (SUNDIAL_SECRET_KEYS)")

        def rewrap(kid: str, sealed: Sealed) -> Sealed:
            try:
                return self._keyring.rewrap(sealed, context=identity.context_of(kid))
            except SealingError as exc:
                raise FailedPrecondition(
                    f"identity key {kid} cannot be re-wrapped: {exc}; configure the key it "
                    "was sealed with as a secondary key, or rotate the identity key "
                    "(sundial admin identity-keys rotate) and re-wrap again"
                ) from None

        done, remaining = await self._store.rewrap_identity_keys(
            self._keyring.primary_id, limit, rewrap
        )
        if done:
            log.info(
                "identity keys re-wrapped",
                extra={
                    "action": "identity_key",
                    "rewrapped": done,
                    "key_id": self._keyring.primary_id,
                },
            )
        return done, remaining
