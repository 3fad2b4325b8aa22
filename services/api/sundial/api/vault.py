"""Tenant secrets (secret.proto; docs/design.md section 7, "Secrets"): validated, sealed
with the operator's key-encryption keys (:mod:`sundial.core.sealing`), stored, listed
and deleted, never read back in the clear by any call.

The API opens sealed values for one purpose only: a notification's delivery to a
channel whose target references them (:meth:`SecretManager.values`). Runs get theirs
from the scheduler's ledger, in the grant.
"""

from __future__ import annotations

from collections.abc import Sequence

from sundial.api import validation
from sundial.api.kit import Pager, check_expected_version
from sundial.api.kit.paging import Text
from sundial.api.model import Page, StoredSecret
from sundial.api.store import Store
from sundial.core.clock import Clock
from sundial.core.errors import FailedPrecondition, InvalidArgument
from sundial.core.sealing import Keyring, Sealed, SealingError

MAX_VALUE_BYTES = 4096
"""A secret's value: at most this many bytes (it becomes one header value)."""

REWRAP_BATCH = 1000
"""Data keys one RewrapSecrets call re-wraps (one transaction)."""

_SECRETS = Pager("secrets", (Text(63),))


def context_of(tenant_id: str, name: str) -> str:
    """What a secret's sealing is bound to (associated data of both layers)."""
    return f"{tenant_id}/{name}"


def check_value(value: str, field: str = "secret.value") -> bytes:
    """A secret's value: 1-4,096 printable ASCII characters (a header or gRPC metadata
    value). The message never holds the value."""
    if not value:
        raise InvalidArgument(field, "is required")
    if not all(" " <= ch <= "~" for ch in value):
        raise InvalidArgument(field, "must be printable ASCII (no control or non-ASCII characters)")
    if len(value) > MAX_VALUE_BYTES:
        raise InvalidArgument(field, f"must be at most {MAX_VALUE_BYTES} bytes")
    return value.encode()


class SecretManager:
    """CreateSecret, UpdateSecret, ListSecrets, DeleteSecret; RewrapSecrets (admin).

    Args:
        store: Database access.
        clock: The source of "now".
        keyring: The operator's key-encryption keys.
        max_secrets: Secrets per tenant.
    """

    def __init__(self, store: Store, clock: Clock, keyring: Keyring, *, max_secrets: int) -> None:
        self._store = store
        self._clock = clock
        self._keyring = keyring
        self._max = max_secrets

    def _seal(self, tenant_id: str, name: str, value: bytes) -> Sealed:
        if not self._keyring.configured:
            raise FailedPrecondition(
                "secrets cannot be stored: the operator has configured no key-encryption "
                "key (SUNDIAL_SECRET_KEYS)"
            )
        return self._keyring.seal(value, context=context_of(tenant_id, name))

    async def create(self, tenant_id: str, name: str, value: str, description: str) -> StoredSecret:
        validation.check_calendar_name(name, "secret.name")
        validation.check_text(description, "secret.description", validation.MAX_DESCRIPTION_CHARS)
        sealed = self._seal(tenant_id, name, check_value(value))
        return await self._store.create_secret(
            tenant_id, name, description, sealed, self._clock.now(), limit=self._max
        )

    async def update(
        self, tenant_id: str, name: str, value: str, description: str, *, expected_version: int
    ) -> StoredSecret:
        validation.check_calendar_name(name, "secret.name")
        validation.check_text(description, "secret.description", validation.MAX_DESCRIPTION_CHARS)
        check_expected_version(expected_version)
        sealed = self._seal(tenant_id, name, check_value(value))
        return await self._store.update_secret(
            tenant_id,
            name,
            description,
            sealed,
            self._clock.now(),
            expected_version=expected_version,
        )

    async def list(self, tenant_id: str, *, page_size: int, page_token: str) -> Page[StoredSecret]:
        cursor = _SECRETS.open(page_size, page_token)
        after = "" if cursor.after is None else cursor.after[0]
        found = await self._store.list_secrets(tenant_id, after=after, limit=cursor.limit)
        return cursor.page(
            found, lambda s: [s.name], size_of=lambda s: 256 + 4 * len(s.description)
        )

    async def delete(self, tenant_id: str, name: str, *, expected_version: int) -> None:
        validation.check_calendar_name(name, "name")
        check_expected_version(expected_version)
        await self._store.delete_secret(tenant_id, name, expected_version=expected_version)

    async def existing(self, tenant_id: str, names: Sequence[str]) -> set[str]:
        """Which of ``names`` the tenant has (the target checks' lookup)."""
        return await self._store.existing_secrets(tenant_id, names)

    async def values(self, wanted: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The values of (tenant, name) pairs that exist and open (a notification's
        delivery); one that does not open is left out, as a missing one is."""
        sealed = await self._store.sealed_secrets(wanted)
        opened = {}
        for (tenant_id, name), value in sealed.items():
            try:
                opened[(tenant_id, name)] = self._keyring.open(
                    value, context=context_of(tenant_id, name)
                ).decode()
            except SealingError:
                continue
        return opened

    async def rewrap(self, limit: int = REWRAP_BATCH) -> tuple[int, int, str]:
        """Re-wrap up to ``limit`` data keys under the primary key; returns (re-wrapped,
        remaining, the primary key's id)."""
        if not self._keyring.configured:
            raise FailedPrecondition("no key-encryption key is configured (SUNDIAL_SECRET_KEYS)")
        primary = self._keyring.primary_id

        def rewrap(tenant_id: str, name: str, sealed: Sealed) -> Sealed:
            try:
                return self._keyring.rewrap(sealed, context=context_of(tenant_id, name))
            except SealingError as exc:
                raise FailedPrecondition(
                    f"secret {name} of tenant {tenant_id} cannot be re-wrapped: {exc}; "
                    "configure the key it was sealed with as a secondary key"
                ) from None

        done, remaining = await self._store.rewrap_secrets(primary, limit, rewrap)
        return done, remaining, primary
