"""Identity tokens minted at grant time (docs/design.md section 7, "Identity tokens").

The ledger mints them, not the executor: executors never hold a private key (as they
never hold a signing secret), and a grant is the moment the ledger knows the attempt is
this executor's to make. One query per LeaseRuns call that grants a target asking for a
token (none otherwise) reads the newest identity key; an opened key is kept by id, so
opening it again happens only after a rotation. Without a key (no key-encryption keys
configured, or one this scheduler lacks) the call goes without a token and a WARNING
says so: the target refuses it, which is the safe side.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from sundial.core.identity import SigningKey, mint, open_key
from sundial.core.sealing import Keyring, SealingError
from sundial.core.signing import destination
from sundial.run import RunRef
from sundial.scheduler.model import LeaseCandidate
from sundial.scheduler.store import SchedulerStore

log = logging.getLogger(__name__)


class IdentityMinter:
    """Mints the identity tokens of a batch of grants.

    Args:
        store: Reads the signing key.
        keyring: The operator's key-encryption keys (``SUNDIAL_SECRET_KEYS``).
        issuer: The ``iss`` claim (``SUNDIAL_IDENTITY_ISSUER``).
    """

    def __init__(self, store: SchedulerStore, keyring: Keyring, issuer: str) -> None:
        self._store = store
        self._keyring = keyring
        self._issuer = issuer
        self._opened: SigningKey | None = None

    async def tokens(
        self, candidates: Sequence[tuple[LeaseCandidate, int]], now: datetime
    ) -> dict[RunRef, str]:
        """The token of each granted (candidate, attempt) whose target asks for one."""
        wanted = [
            (c, attempt)
            for c, attempt in candidates
            if c.target is not None and c.target.auth.identity_token is not None
        ]
        if not wanted:
            return {}
        key = await self._key(now)
        if key is None:
            for candidate, _ in wanted:
                log.warning(
                    "no identity key to sign with: the call goes without its token",
                    extra={"action": "identity_token", "job_id": str(candidate.state.ref.job_id)},
                )
            return {}
        tokens = {}
        for candidate, attempt in wanted:
            target = candidate.target
            assert target is not None and target.auth.identity_token is not None
            asked = target.auth.identity_token
            ref = candidate.state.ref
            tokens[ref] = mint(
                key,
                issuer=self._issuer,
                subject=f"{candidate.state.tenant_id}/{ref.job_id}",
                audience=asked.audience or destination(target),
                now=now,
                lifetime=timedelta(seconds=asked.lifetime_s),
                claims={
                    "tenant_id": candidate.state.tenant_id,
                    "job_id": str(ref.job_id),
                    "run_key": ref.key,
                    "attempt": attempt,
                },
            )
        return tokens

    async def _key(self, now: datetime) -> SigningKey | None:
        found = await self._store.signing_identity_key(now)
        if found is None:
            return None
        kid, sealed = found
        if self._opened is not None and self._opened.kid == kid:
            return self._opened
        try:
            self._opened = open_key(self._keyring, kid, sealed)
        except SealingError as exc:
            log.warning(
                "the identity key does not open",
                extra={"action": "identity_token", "kid": kid, "error": str(exc)},
            )
            return None
        return self._opened
