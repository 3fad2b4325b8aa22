"""Deterministic jitter: a delay derived from (job id, nominal time).

Every replica computes the same delay for the same occurrence, so a run dispatched late
by one scheduler and re-examined by another is never moved twice, and the run key keeps
the nominal time: jitter changes when a run starts, never which run it is.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ._digest import stable_hash

_US = timedelta(microseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def jitter_offset(job_id: str, nominal: datetime, bound: timedelta) -> timedelta:
    """Return the delay of one occurrence, uniform in ``[0, bound)``.

    The delay is a pure function of its arguments (a BLAKE2b hash of the job id and the
    nominal instant in integer microseconds), so it is the same on every machine, in
    every process and in every release.

    Args:
        job_id: The job's id.
        nominal: The occurrence's nominal instant (timezone-aware).
        bound: Exclusive upper bound; zero or negative means no jitter.

    Returns:
        A non-negative delay with microsecond resolution, smaller than ``bound``.

    Raises:
        ValueError: ``nominal`` is naive.
    """
    if nominal.tzinfo is None:
        raise ValueError("nominal must be timezone-aware")
    bound_us = bound // _US
    if bound_us <= 0:
        return timedelta(0)
    instant_us = (nominal - _EPOCH) // _US
    # 64 hash bits against bounds below 2**40 us (12 days): modulo bias is negligible.
    return timedelta(microseconds=stable_hash("jitter", job_id, str(instant_us)) % bound_us)
