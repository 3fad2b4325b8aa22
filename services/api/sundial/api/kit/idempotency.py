"""``request_id``: a create, trigger or apply done once however often it is sent.

A request id is remembered per tenant and method for the retention (24 h) in
``job_requests``, written in the same transaction as the work (a :class:`RequestClaim`),
so a record exists exactly when the work committed. The same id with the same request
(:func:`request_hash`) answers what the first call did; with a different request it is
``INVALID_ARGUMENT request_id``. Two identical requests racing: the loser's claim meets
the winner's record (``RequestTaken``) and it answers the winner's result.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, TypeVar

from sundial.api import validation
from sundial.api.store import RequestClaim, RequestRecord, RequestTaken, Store
from sundial.core.clock import Clock
from sundial.core.errors import InvalidArgument

T = TypeVar("T")


class _Encodable(Protocol):
    def SerializeToString(self, *, deterministic: bool = ...) -> bytes: ...


def request_hash(method: str, messages: Iterable[_Encodable]) -> bytes:
    """Identity of a request: sha256 over the method and its messages' deterministic
    encodings (map entries ordered, so equal requests hash equally)."""
    digest = hashlib.sha256(method.encode() + b"\0")
    for message in messages:
        encoded = message.SerializeToString(deterministic=True)
        digest.update(len(encoded).to_bytes(8, "big") + encoded)
    return digest.digest()


@dataclass(frozen=True, slots=True)
class RequestKey:
    """One call's idempotency key: its method, request id ("" for none) and hash."""

    method: str
    request_id: str
    request_hash: bytes


class Requests:
    """The tenant's remembered request ids, read and claimed for the managers.

    Args:
        store: Database access (``job_requests``).
        clock: The source of "now".
        retention: How long a request id is remembered.
    """

    def __init__(self, store: Store, clock: Clock, retention: timedelta) -> None:
        self._store = store
        self._clock = clock
        self._retention = retention

    async def earlier(self, tenant_id: str, key: RequestKey) -> RequestRecord | None:
        """What an earlier call with this key did (None: none, or no request id).

        Raises:
            InvalidArgument: The id was used with a different request.
        """
        if not key.request_id:
            return None
        record = await self._store.find_request(
            tenant_id, key.method, key.request_id, self._clock.now() - self._retention
        )
        if record is not None and record.request_hash != key.request_hash:
            raise InvalidArgument(
                "request_id", "was already used with a different request; use a new request_id"
            )
        return record

    def claim(self, key: RequestKey, outcome: str | None = None) -> RequestClaim | None:
        """The record to write with the work (None without a request id)."""
        if not key.request_id:
            return None
        return RequestClaim(
            key.method,
            key.request_id,
            key.request_hash,
            self._clock.now() - self._retention,
            outcome=outcome,
        )

    async def once(
        self,
        tenant_id: str,
        key: RequestKey,
        work: Callable[[RequestClaim | None], Awaitable[T]],
        replay: Callable[[RequestRecord], Awaitable[T]],
    ) -> T:
        """``work`` with the claim to commit with it, unless a call with this key did
        it already: then ``replay`` of that call's record (also when an identical call
        committed while this one worked).

        Raises:
            InvalidArgument: The request id is malformed, or was used with a different
                request.
        """
        validation.check_request_id(key.request_id)
        record = await self.earlier(tenant_id, key)
        if record is not None:
            return await replay(record)
        try:
            return await work(self.claim(key))
        except RequestTaken:
            record = await self.earlier(tenant_id, key)
            assert record is not None
            return await replay(record)
