"""Caches that make a herd of jobs cost about one computation.

Five levels, all bounded LRUs (``functools.lru_cache``: thread-safe, C-implemented):

* parsed expressions, by expression text;
* expanded expressions, by (expression text, hash key): the hash key is the job id only
  when the expression uses ``H``, so 100,000 jobs sharing ``0 * * * *`` share one entry;
* naive iterators (:class:`~sundial.schedule._fire.DailyCron` for an expression naming
  times of day only, :class:`~sundial.schedule._fire.WallCron` otherwise), by expanded
  expression,
  and the clocks built on them (:class:`~sundial.schedule._fire.CronClock`), by
  (expanded expression, zone, resolved DST policies);
* next fire times, by (clock, after-instant): when a herd's jobs all fire at one instant,
  the scheduler asks for "next after that instant" once per job and computes it once.

A clock evicted and rebuilt is a new object, so its old next-fire entries are simply
never hit again and age out. Jobs using ``H`` get per-job expansions, so they share
clocks only when their hashed values coincide: expected, and why ``H`` exists.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import NamedTuple

from ._cron import ParsedCron, parse_cron
from ._fire import CronClock, DailyCron, WallCron
from ._spec import FireTime, FoldPolicy, GapPolicy
from ._zone import load_zone, transition_cache_clear, zone_cache_clear

PARSED_CACHE_SIZE = 4096
EXPANDED_CACHE_SIZE = 65536
# Worst-case footprints: a WallCron is ~2.5 KB (its croniter), a clock and a next-fire
# entry ~0.4 KB.
CLOCK_CACHE_SIZE = 16384
NEXT_FIRE_CACHE_SIZE = 65536


@functools.lru_cache(maxsize=PARSED_CACHE_SIZE)
def parsed_cron(expression: str) -> ParsedCron:
    """Parse ``expression`` (cached; errors are raised, never cached)."""
    return parse_cron(expression)


@functools.lru_cache(maxsize=EXPANDED_CACHE_SIZE)
def expanded_cron(expression: str, hash_key: str) -> str:
    """Expand ``expression`` for ``hash_key`` ("" unless it uses ``H``)."""
    return parsed_cron(expression).expand(hash_key)


@functools.lru_cache(maxsize=CLOCK_CACHE_SIZE)
def wall_cron(expanded: str) -> WallCron | DailyCron:
    """Return the shared naive iterator of an expanded expression."""
    return DailyCron.of(expanded) or WallCron(expanded)


@functools.lru_cache(maxsize=CLOCK_CACHE_SIZE)
def cron_clock(expanded: str, zone_name: str, gap: GapPolicy, fold: FoldPolicy) -> CronClock:
    """Return the shared clock for an expanded expression, zone and resolved policies."""
    return CronClock(wall_cron(expanded), load_zone(zone_name), gap, fold)


@functools.lru_cache(maxsize=NEXT_FIRE_CACHE_SIZE)
def next_fire(clock: CronClock, after: datetime) -> FireTime | None:
    """``clock.next_fire(after)``, memoised (``FireTime`` is immutable, so shareable)."""
    return clock.next_fire(after)


class CacheStats(NamedTuple):
    """Hit/miss counters of every cache level (``functools`` ``CacheInfo`` tuples)."""

    parsed: object
    expanded: object
    wall_crons: object
    clocks: object
    next_fire: object


def cache_info() -> CacheStats:
    """Return the hit and miss counters of every cache level."""
    return CacheStats(
        parsed=parsed_cron.cache_info(),
        expanded=expanded_cron.cache_info(),
        wall_crons=wall_cron.cache_info(),
        clocks=cron_clock.cache_info(),
        next_fire=next_fire.cache_info(),
    )


def clear_caches() -> None:
    """Empty every cache, including loaded zones and found DST transitions."""
    parsed_cron.cache_clear()
    expanded_cron.cache_clear()
    wall_cron.cache_clear()
    cron_clock.cache_clear()
    next_fire.cache_clear()
    zone_cache_clear()
    transition_cache_clear()
