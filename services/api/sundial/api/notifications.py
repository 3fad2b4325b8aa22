"""Tenants' notification channels: where their job events go (docs/design.md section 12).

A channel is a target (HTTP or gRPC, under the same rules as a job's: syntax, reserved
headers, and the tenant's egress policy checked at write time and again at every call
by the notifier), the event kinds it wants and a digest window. The scheduler writes
events for a tenant's channels in the transaction of each fact; the notifier
(:mod:`sundial.api.notifier`) delivers them. Like the audit log, this module reads and
writes its own table through the service's pool.
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from sundial.api import validation
from sundial.api.egress import EgressPolicies
from sundial.api.kit import Pager, UpdateMask, check_expected_version, require_version
from sundial.api.kit.paging import Text
from sundial.api.model import Page
from sundial.api.store import queries
from sundial.api.validation import TargetGuard
from sundial.core.clock import Clock
from sundial.core.db import translate_db_errors
from sundial.core.errors import InvalidArgument, NotFound, ResourceExhausted, version_mismatch
from sundial.job import target_from_json, target_to_json
from sundial.notify import EventKind
from sundial.run import HttpTarget, Target

__all__ = [
    "MAX_CHANNELS_PER_TENANT",
    "MAX_DIGEST_WINDOW",
    "Channel",
    "ChannelSpec",
    "NotificationChannels",
]

MAX_CHANNELS_PER_TENANT = 20
"""A tenant's channels, at most: every event fans out to one outbox row per channel
that wants it, inside the run path's transactions (docs/design.md section 12)."""

MAX_DIGEST_WINDOW = timedelta(hours=1)
"""Longest digest window (job_service.proto)."""

MAX_DISPLAY_NAME = 200

UPDATABLE = ("display_name", "target", "event_kinds", "digest_window")
"""What UpdateNotificationChannel's mask may name."""
_MASK = UpdateMask(UPDATABLE)

_translate = translate_db_errors(
    constraint_messages={
        "notification_channels_tenant_id_display_name_key": (
            "channel.display_name: a channel with this name already exists"
        )
    }
)

_CHANNELS = Pager("notification_channels", (Text(MAX_DISPLAY_NAME * 4),))
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclass(frozen=True, slots=True)
class ChannelSpec:
    """What a tenant says about a channel."""

    display_name: str
    target: Target | None
    event_kinds: tuple[EventKind, ...]
    digest_window: timedelta = timedelta(0)


@dataclass(frozen=True, slots=True)
class Channel:
    """A stored channel."""

    channel_id: uuid.UUID
    spec: ChannelSpec
    version: int
    created_at: datetime
    updated_at: datetime


def _channel(row: asyncpg.Record) -> Channel:
    return Channel(
        channel_id=row["channel_id"],
        spec=ChannelSpec(
            display_name=row["display_name"],
            target=target_from_json(json.loads(row["target"])),
            event_kinds=tuple(EventKind(kind) for kind in row["event_kinds"]),
            digest_window=timedelta(seconds=row["digest_window_s"]),
        ),
        version=row["version"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def channel_id_in(text: str, field: str = "channel_id") -> uuid.UUID:
    """A channel id from a request."""
    if not text:
        raise InvalidArgument(field, "is required")
    try:
        return uuid.UUID(text)
    except ValueError:
        raise InvalidArgument(field, "is not a channel id (a UUID)") from None


def check_spec(spec: ChannelSpec, prefix: str = "channel.") -> ChannelSpec:
    """The spec, normalised (target), or InvalidArgument naming the field."""
    name = spec.display_name
    if not name.strip() or len(name) > MAX_DISPLAY_NAME or _CONTROL.search(name):
        raise InvalidArgument(
            f"{prefix}display_name",
            f"must be 1-{MAX_DISPLAY_NAME} printable characters, not only spaces",
        )
    with validation.field_prefix(prefix):
        target = validation.check_target(spec.target)
    if target.auth.identity_token is not None:
        kind = "http" if isinstance(target, HttpTarget) else "grpc"
        raise InvalidArgument(
            f"{prefix}target.{kind}.auth.identity_token",
            "notification channels do not get identity tokens: verify Sundial-Signature",
        )
    if not spec.event_kinds:
        raise InvalidArgument(f"{prefix}event_kinds", "name at least one event kind")
    if len(set(spec.event_kinds)) != len(spec.event_kinds):
        raise InvalidArgument(f"{prefix}event_kinds", "names a kind twice")
    window = spec.digest_window
    if not timedelta(0) <= window <= MAX_DIGEST_WINDOW or window % timedelta(seconds=1):
        raise InvalidArgument(
            f"{prefix}digest_window", "must be 0 to 1h in whole seconds (0: no digest)"
        )
    return dataclasses.replace(spec, target=target)


class NotificationChannels:
    """Creates, reads, changes and deletes a tenant's channels.

    Args:
        pool: Where ``notification_channels`` is.
        guard: The target check of job writes (egress policy at write time).
        egress: The tenants' egress policies.
        clock: The source of "now".
    """

    def __init__(
        self, pool: asyncpg.Pool, guard: TargetGuard, egress: EgressPolicies, clock: Clock
    ) -> None:
        self._pool = pool
        self._guard = guard
        self._egress = egress
        self._clock = clock

    async def _checked(self, tenant_id: str, spec: ChannelSpec) -> ChannelSpec:
        spec = check_spec(spec)
        assert spec.target is not None
        await self._guard.check(spec.target, await self._egress.policy(tenant_id), "channel.target")
        return spec

    @staticmethod
    def _values(spec: ChannelSpec) -> tuple[str, dict[str, object], list[str], int]:
        assert spec.target is not None
        return (
            spec.display_name,
            target_to_json(spec.target),  # the pool's jsonb codec encodes it
            [kind.value for kind in spec.event_kinds],
            int(spec.digest_window.total_seconds()),
        )

    @_translate
    async def create(self, tenant_id: str, spec: ChannelSpec) -> Channel:
        """Validate and store a new channel."""
        spec = await self._checked(tenant_id, spec)
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(queries.lock_tenant_row, tenant_id)
            count = await conn.fetchval(queries.count_notification_channels, tenant_id)
            if count >= MAX_CHANNELS_PER_TENANT:
                raise ResourceExhausted(
                    f"the tenant's limit of {MAX_CHANNELS_PER_TENANT} notification channels"
                    f" is reached ({count} exist): delete one first",
                    metadata={
                        "quota": "max_notification_channels",
                        "limit": str(MAX_CHANNELS_PER_TENANT),
                        "usage": str(count),
                    },
                )
            row = await conn.fetchrow(
                queries.create_notification_channel,
                uuid.uuid4(),
                tenant_id,
                *self._values(spec),
                self._clock.now(),
            )
        assert row is not None
        return _channel(row)

    @_translate
    async def get(self, tenant_id: str, channel_id: uuid.UUID) -> Channel:
        """The tenant's channel, or NotFound (also for another tenant's)."""
        row = await self._pool.fetchrow(queries.get_notification_channel, channel_id, tenant_id)
        if row is None:
            raise NotFound(f"notification channel {channel_id} not found")
        return _channel(row)

    @_translate
    async def list(self, tenant_id: str, *, page_size: int, page_token: str) -> Page[Channel]:
        """A page of the tenant's channels by display name."""
        cursor = _CHANNELS.open(page_size, page_token, {"tenant": tenant_id})
        after = None if cursor.after is None else cursor.after[0]
        rows = await self._pool.fetch(
            queries.list_notification_channels, tenant_id, after, cursor.limit
        )
        return cursor.page([_channel(row) for row in rows], lambda c: [c.spec.display_name])

    @_translate
    async def update(
        self,
        tenant_id: str,
        channel_id: uuid.UUID,
        source: ChannelSpec,
        paths: Sequence[str],
        expected_version: int,
    ) -> Channel:
        """Copy the masked fields of ``source`` onto the channel and store it."""
        masked = _MASK.paths(paths)
        check_expected_version(expected_version)
        current = await self.get(tenant_id, channel_id)
        require_version("notification channel", channel_id, current.version, expected_version)
        merged = dataclasses.replace(
            current.spec, **{path: getattr(source, path) for path in masked}
        )
        merged = await self._checked(tenant_id, merged)
        row = await self._pool.fetchrow(
            queries.update_notification_channel,
            channel_id,
            tenant_id,
            current.version,
            *self._values(merged),
            self._clock.now(),
        )
        if row is None:  # changed or deleted since it was read
            latest = await self.get(tenant_id, channel_id)
            raise version_mismatch(
                "notification channel", channel_id, latest.version, current.version
            )
        return _channel(row)

    @_translate
    async def delete(self, tenant_id: str, channel_id: uuid.UUID) -> None:
        """Delete the channel with its undelivered events and notifications."""
        deleted = await self._pool.fetchval(
            queries.delete_notification_channel, channel_id, tenant_id, self._clock.now()
        )
        if not deleted:
            raise NotFound(f"notification channel {channel_id} not found")
