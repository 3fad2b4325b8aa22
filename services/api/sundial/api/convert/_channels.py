"""Notification channels and their event kinds."""

from __future__ import annotations

from datetime import timedelta

from sundial.api.convert._secrets import target_out
from sundial.api.notifications import Channel, ChannelSpec
from sundial.core import wire
from sundial.core.errors import InvalidArgument
from sundial.notify import EventKind
from sundial.v1 import job_service_pb2

_KIND_PREFIX = "NOTIFICATION_EVENT_KIND_"


def event_kind_in(number: int, field: str) -> EventKind:
    """A wire event kind (UNSPECIFIED and unknown numbers refused)."""
    try:
        name = job_service_pb2.NotificationEventKind.Name(number)
    except ValueError:
        raise InvalidArgument(field, f"unknown event kind {number}") from None
    member = EventKind.__members__.get(name.removeprefix(_KIND_PREFIX))
    if member is None:
        raise InvalidArgument(field, "an event kind is required (not UNSPECIFIED)")
    return member


def event_kind_out(kind: EventKind) -> job_service_pb2.NotificationEventKind:
    """An event kind's wire number."""
    return getattr(job_service_pb2, _KIND_PREFIX + kind.name)


def channel_spec_in(message: job_service_pb2.NotificationChannel) -> ChannelSpec:
    """The input fields of a wire channel."""
    return ChannelSpec(
        display_name=message.display_name,
        target=wire.target_in(message.target) if message.HasField("target") else None,
        event_kinds=tuple(
            event_kind_in(kind, f"channel.event_kinds[{i}]")
            for i, kind in enumerate(message.event_kinds)
        ),
        digest_window=(
            wire.timedelta_in(message.digest_window, "channel.digest_window")
            if message.HasField("digest_window")
            else timedelta(0)
        ),
    )


def channel_out(channel: Channel) -> job_service_pb2.NotificationChannel:
    """A stored channel on the wire."""
    spec = channel.spec
    return job_service_pb2.NotificationChannel(
        channel_id=str(channel.channel_id),
        display_name=spec.display_name,
        target=target_out(spec.target),
        event_kinds=[event_kind_out(kind) for kind in spec.event_kinds],
        digest_window=wire.duration(spec.digest_window),
        version=channel.version,
        create_time=wire.timestamp(channel.created_at),
        update_time=wire.timestamp(channel.updated_at),
    )
