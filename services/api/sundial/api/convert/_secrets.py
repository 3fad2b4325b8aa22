"""Secrets out (never a value) and targets as reads show them (references kept, an
inline credential stored before secrets redacted)."""

from __future__ import annotations

from sundial.api.model import StoredSecret
from sundial.core import wire
from sundial.run import Target, redacted
from sundial.v1 import job_pb2, secret_pb2


def secret_out(secret: StoredSecret) -> secret_pb2.Secret:
    """A secret's metadata; ``value`` stays empty."""
    return secret_pb2.Secret(
        name=secret.name,
        description=secret.description,
        version=secret.version,
        create_time=wire.timestamp(secret.create_time),
        update_time=wire.timestamp(secret.update_time),
    )


def target_out(target: Target | None) -> job_pb2.Target:
    """A stored target as every read shows it (docs/design.md section 7, "Secrets")."""
    return wire.target(None if target is None else redacted(target))
