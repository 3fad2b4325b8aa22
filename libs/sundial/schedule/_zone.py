"""IANA time zones from the pinned ``tzdata`` package, and local wall-clock facts.

Zones are always read from the ``tzdata`` wheel, never from the host's
``/usr/share/zoneinfo``, so every replica computes the same instants whatever image it
runs on. (``zoneinfo.ZoneInfo(key)`` prefers the host's files; reading tzdata's files
directly avoids that without changing the process-wide ``TZPATH``.)

Accepted names are those tzdata lists, minus names that are fixed offsets or legacy
POSIX-style rules, which the design forbids because they do not follow a place:

* ``Etc/GMT+5`` and friends (fixed, with an inverted sign), ``EST``, ``MST``, ``HST``;
* ``EST5EDT``, ``CST6CDT``, ``MST7MDT``, ``PST8PDT`` (their meaning changed in tzdata
  2024b; the error suggests the geographic zone);
* ``Factory``.

``UTC``, ``Etc/UTC``, ``GMT`` and the other zero-offset aliases are accepted. An empty
name means UTC (proto3's unset string). Names are case-sensitive as in IANA; a wrong
case gets a "did you mean" hint.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sundial.core.errors import InvalidArgument

DEFAULT_ZONE = "UTC"

_LEGACY_RULE_NAMES = {
    "EST5EDT": "America/New_York",
    "CST6CDT": "America/Chicago",
    "MST7MDT": "America/Denver",
    "PST8PDT": "America/Los_Angeles",
}
_FIXED_NAMES = frozenset({"EST", "MST", "HST", "Factory"})
_FIXED_ETC_RE = re.compile(r"^Etc/GMT[+-]([1-9]\d*)$")
_OFFSET_LIKE_RE = re.compile(r"^(?:UTC|GMT|Z)?\s*[+-]\s*\d{1,2}(?::?\d{2})?$", re.IGNORECASE)


class TzdataZone(zoneinfo.ZoneInfo):
    """A ``ZoneInfo`` loaded from the ``tzdata`` package; pickles by key."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (load_zone, (self.key,))


@functools.cache
def _known_names() -> frozenset[str]:
    text = importlib.resources.files("tzdata").joinpath("zones").read_text("utf-8")
    return frozenset(text.split())


@functools.cache
def _names_by_lower() -> dict[str, str]:
    return {name.lower(): name for name in _known_names()}


@functools.lru_cache(maxsize=1024)
def _load(name: str) -> TzdataZone:
    resource = importlib.resources.files("tzdata.zoneinfo").joinpath(*name.split("/"))
    with resource.open("rb") as f:
        return TzdataZone.from_file(f, key=name)


def load_zone(name: str, *, field: str = "schedule.time_zone") -> TzdataZone:
    """Return the zone named ``name`` from the pinned tzdata.

    Args:
        name: An IANA zone name; ``""`` means UTC.
        field: Dotted field path used in errors.

    Returns:
        A cached zone object (the same object for the same name).

    Raises:
        InvalidArgument: The name is unknown, a fixed offset or a legacy rule name.
    """
    if not isinstance(name, str):
        raise InvalidArgument(field, f"must be a string, got {type(name).__name__}")
    if name == "":
        name = DEFAULT_ZONE
    if name in _known_names():
        if name in _LEGACY_RULE_NAMES:
            raise InvalidArgument(
                field,
                f"'{name}' is a legacy POSIX-style rule name; use a geographic IANA zone "
                f"such as '{_LEGACY_RULE_NAMES[name]}'",
            )
        if name in _FIXED_NAMES or _FIXED_ETC_RE.match(name):
            raise InvalidArgument(
                field,
                f"'{name}' is a fixed UTC offset, not a place; use a geographic IANA zone "
                "such as 'America/New_York', or 'UTC'",
            )
        return _load(name)
    if _OFFSET_LIKE_RE.match(name.strip()):
        raise InvalidArgument(
            field,
            f"'{name}' is a fixed UTC offset; use an IANA zone name such as "
            "'Europe/Berlin' (offsets do not follow daylight saving time)",
        )
    hint = _names_by_lower().get(name.strip().lower())
    if hint is not None:
        raise InvalidArgument(field, f"unknown time zone '{name}' (did you mean '{hint}'?)")
    raise InvalidArgument(
        field, f"unknown time zone '{name}' (expected an IANA name such as 'America/New_York')"
    )


def zone_cache_clear() -> None:
    """Forget loaded zones (benchmarks use this to measure cold costs)."""
    _load.cache_clear()


@dataclass(frozen=True, slots=True)
class Transition:
    """One UTC-offset change of a zone, seen from local wall-clock time.

    Attributes:
        at: The instant of the change (aware UTC).
        before: The UTC offset before ``at``.
        after: The UTC offset from ``at`` on.
        start: First naive wall time of the gap (or of the fold).
        end: First naive wall time after the gap (or after the fold).
    """

    at: datetime
    before: timedelta
    after: timedelta
    start: datetime
    end: datetime

    @property
    def is_gap(self) -> bool:
        """True for a spring-forward (wall times in ``[start, end)`` do not exist)."""
        return self.after > self.before


def offset_at(zone: zoneinfo.ZoneInfo, instant: datetime) -> timedelta:
    """Return the zone's UTC offset at a naive-UTC or aware instant."""
    naive = instant.replace(tzinfo=None) if instant.tzinfo is None else _naive_utc(instant)
    offset = zone.fromutc(naive.replace(tzinfo=zone)).utcoffset()
    assert offset is not None  # a ZoneInfo always has an offset
    return offset


def _naive_utc(instant: datetime) -> datetime:
    return instant.astimezone(UTC).replace(tzinfo=None)


def wall_offsets(zone: zoneinfo.ZoneInfo, wall: datetime) -> tuple[timedelta, timedelta]:
    """Return the offsets PEP 495 assigns to a naive wall time with fold 0 and fold 1.

    Equal offsets mean the time exists once. ``fold0 > fold1`` means it occurs twice
    (fold 0 is the earlier instant); ``fold0 < fold1`` means it does not exist.
    """
    first = zone.utcoffset(wall.replace(fold=0))
    second = zone.utcoffset(wall.replace(fold=1))
    assert first is not None and second is not None
    return first, second


def transition_near(
    zone: zoneinfo.ZoneInfo, wall: datetime, fold0: timedelta, fold1: timedelta
) -> Transition:
    """Find the transition that makes ``wall`` missing or repeated.

    ``wall`` lies in ``[T + min(offsets), T + max(offsets))`` for the transition instant
    ``T``, so ``T`` lies in ``(wall - max, wall - min]``; it is found by bisection on
    whole seconds (tzdata transitions are whole seconds).

    Args:
        zone: The zone.
        wall: A naive wall time that does not exist or exists twice.
        fold0: ``wall``'s offset with fold 0 (the offset before the transition).
        fold1: ``wall``'s offset with fold 1 (the offset after it).

    Returns:
        The transition.
    """
    return _transition(zone, wall.replace(fold=0, second=0, microsecond=0), fold0, fold1)


@functools.lru_cache(maxsize=4096)
def _transition(
    zone: zoneinfo.ZoneInfo, wall_minute: datetime, before: timedelta, after: timedelta
) -> Transition:
    # Bisection from the minute keeps the cache small; widen by a minute to cover it.
    lo = wall_minute - max(before, after) - timedelta(minutes=1)  # offset here: before
    hi = wall_minute - min(before, after) + timedelta(minutes=1)  # offset here: after
    lo_s = int((lo - _EPOCH).total_seconds())
    hi_s = int((hi - _EPOCH).total_seconds())
    while hi_s - lo_s > 1:
        mid = (lo_s + hi_s) // 2
        if offset_at(zone, _EPOCH + timedelta(seconds=mid)) == after:
            hi_s = mid
        else:
            lo_s = mid
    at = _EPOCH + timedelta(seconds=hi_s)
    return Transition(
        at=at.replace(tzinfo=UTC),
        before=before,
        after=after,
        start=at + min(before, after),
        end=at + max(before, after),
    )


def transition_cache_clear() -> None:
    """Forget found transitions (benchmarks use this to measure cold costs)."""
    _transition.cache_clear()


_EPOCH = datetime(1970, 1, 1)


def format_offset_name(local: datetime) -> str:
    """Return the zone abbreviation of an aware local time, or its offset if numeric.

    ``EDT`` for New York, ``+1030`` for Lord Howe (tzdata spells such zones' names as
    numbers: ``"+1030"``).
    """
    name = local.tzname() or ""
    if name and name[0] in "+-":
        return f"UTC{name}"
    return name
