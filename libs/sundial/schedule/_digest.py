"""The stable hash behind Jenkins ``H`` and deterministic jitter.

Both must give the same number on every machine, in every process and in every release,
because a job's fire times and dispatch times are recomputed by whichever scheduler
replica owns it. Python's ``hash()`` is salted per process and croniter's ``H`` (a CRC
shifted by the field index) is an implementation detail of a dependency that may change,
so neither is used. BLAKE2b with a fixed personalisation is stable by specification.

Changing :data:`_PERSON` or the encoding below moves every hashed schedule: treat it as a
data migration, never a refactor.
"""

from __future__ import annotations

import hashlib

# Domain separation: the same job id must not hash alike for H and for jitter.
_PERSON = b"sundial.sched.1"


def stable_hash(purpose: str, *parts: str) -> int:
    """Return a 64-bit integer that depends only on ``purpose`` and ``parts``.

    Args:
        purpose: A short constant naming the use (``"cron-h"``, ``"jitter"``).
        *parts: The values hashed, joined unambiguously (NUL-separated UTF-8).

    Returns:
        An integer in ``[0, 2**64)``.
    """
    data = "\x00".join((purpose, *parts)).encode("utf-8", "surrogatepass")
    digest = hashlib.blake2b(data, digest_size=8, person=_PERSON).digest()
    return int.from_bytes(digest, "big")
