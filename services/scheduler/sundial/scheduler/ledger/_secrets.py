"""Secret references resolved into grants (docs/design.md section 7, "Secrets").

The one place a tenant secret is opened for a run: after LeaseRuns committed its grants,
the targets that reference ``${secret:<name>}`` get the values in their place in the
grant, and nowhere else (not the stored target, not a log line, not a span, not a dead
letter, which is built from the stored target). A reference to a secret that is gone
(deleted after the job was written, or sealed by a key this scheduler lacks) leaves its
header out of the call; a WARNING names the job, the header and the secret, never a
value.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from sundial.core import wire
from sundial.core.sealing import Keyring, SealingError
from sundial.run import Target, resolve_target, target_references
from sundial.scheduler.model import LeaseCandidate
from sundial.scheduler.store import SchedulerStore
from sundial.v1 import job_pb2

log = logging.getLogger(__name__)


class SecretResolver:
    """Opens the secrets a batch of grants references (one query per LeaseRuns call that
    has any; none otherwise).

    Args:
        store: Reads the sealed values.
        keyring: The operator's key-encryption keys (``SUNDIAL_SECRET_KEYS``).
    """

    def __init__(self, store: SchedulerStore, keyring: Keyring) -> None:
        self._store = store
        self._keyring = keyring

    async def targets(
        self, candidates: Sequence[LeaseCandidate]
    ) -> dict[tuple[str, int], job_pb2.Target]:
        """The resolved wire target of each granted candidate whose target references
        secrets, by (tenant, ``id`` of its stored target); the rest are not listed."""
        # A herd's grants share their target object: each is scanned once.
        names: dict[int, frozenset[str]] = {}
        for c in candidates:
            if id(c.target) not in names:
                names[id(c.target)] = target_references([c.target])
        if not any(names.values()):
            return {}
        wanted = sorted(
            {(c.state.tenant_id, name) for c in candidates for name in names[id(c.target)]}
        )
        values: dict[str, dict[str, str]] = {}
        for (tenant_id, name), sealed in (await self._store.sealed_secrets(wanted)).items():
            try:
                value = self._keyring.open(sealed, context=f"{tenant_id}/{name}")
            except SealingError as exc:
                log.warning(
                    "a secret does not open",
                    extra={
                        "action": "resolve_secret",
                        "tenant_id": tenant_id,
                        "secret": name,
                        "error": str(exc),
                    },
                )
                continue
            values.setdefault(tenant_id, {})[name] = value.decode()
        resolved: dict[tuple[str, int], job_pb2.Target] = {}
        for candidate in candidates:
            key = (candidate.state.tenant_id, id(candidate.target))
            if key in resolved or not names[key[1]]:
                continue
            resolved[key] = self._resolve(candidate, values.get(key[0], {}))
        return resolved

    @staticmethod
    def _resolve(candidate: LeaseCandidate, values: Mapping[str, str]) -> job_pb2.Target:
        target: Target | None = candidate.target
        assert target is not None  # only a target that references secrets comes here
        filled, dropped = resolve_target(target, values)
        for header in dropped:
            log.warning(
                "a target header references a missing secret; the call goes without it",
                extra={
                    "action": "resolve_secret",
                    "job_id": str(candidate.state.ref.job_id),
                    "header": header,
                },
            )
        return wire.target(filled)
