"""Logical partitions: the unit of scheduler ownership (docs/design.md sections 5 and 6)."""

from __future__ import annotations

import hashlib
import uuid

__all__ = ["PARTITION_COUNT", "partition_of"]

PARTITION_COUNT = 256
"""Number of logical partitions jobs are spread over."""


def partition_of(job_id: uuid.UUID | str) -> int:
    """The partition of ``job_id``: a stable hash, never the UUID's leading bytes.

    The first two bytes of ``blake2b(job_id.bytes, digest_size=8)`` as a big-endian
    integer, modulo :data:`PARTITION_COUNT`. Random UUIDv4 bytes are uniform already, but
    time-ordered ids (UUIDv7) are not, and a hash keeps both spread evenly.
    """
    raw = job_id.bytes if isinstance(job_id, uuid.UUID) else uuid.UUID(job_id).bytes
    digest = hashlib.blake2b(raw, digest_size=8).digest()
    return int.from_bytes(digest[:2], "big") % PARTITION_COUNT
