"""The byte budget of one LeaseRuns answer (docs/design.md section 7, "Bounded messages").

A grant carries its job's payload (up to 256 KiB) and target (headers up to 256 KiB), so
500 grants of large jobs would make an answer of hundreds of MiB, far past any channel's
message limit: the executor would fail to read it, retry, fail again, and the runs in it
(another tenant's among them) would never start. The ledger therefore stops granting
once an answer's grants reach ``lease_answer_max_bytes``: the runs past that point are
answered :attr:`~sundial.run.RejectReason.ANSWER_FULL` *before* anything is written for
them (no attempt is taken), and the executor leases them in its next call. The first
grant of an answer is never cut, so every call makes progress whatever its size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta

from sundial.core import wire
from sundial.run import Grant, Rejection, RejectReason, RunRef
from sundial.scheduler.model import LeaseCandidate

__all__ = [
    "AUTH_HEADER_BYTES",
    "GRANT_FIXED_BYTES",
    "SIGNATURE_BYTES_PER_SECRET",
    "grant_bytes",
    "wire_sizes",
    "within_budget",
]

GRANT_FIXED_BYTES = 512
"""A grant's fields that do not grow with tenant input (attempt, lease id, times, enums,
the run reference, framing), rounded up."""

SIGNATURE_BYTES_PER_SECRET = 68 + 85
"""``,v1=`` and 64 hex digits, ``,v2=``, a 16-digit key id, ``:`` and 64 hex digits: what
each valid signing secret adds to the signature."""

AUTH_HEADER_BYTES = 2048
"""The further headers of a target with ``auth`` (Standard Webhooks: about 200 bytes and
50 per secret besides the run key; an identity token: well under 1 KiB), rounded up."""

ANSWER_FULL = Rejection(
    RejectReason.ANSWER_FULL, "the answer reached its byte budget: lease again", timedelta(0)
)


def grant_bytes(candidate: LeaseCandidate, extra_bytes: int) -> int:
    """An upper bound of the serialized size of ``candidate``'s grant, given the size of
    its wire target and egress policy (``extra_bytes``, computed once per distinct
    object by the caller: a herd shares them)."""
    return (
        GRANT_FIXED_BYTES
        + len(candidate.payload)
        + extra_bytes
        + len(candidate.job_name.encode())
        + len(candidate.traceparent)
        + len(candidate.state.tenant_id)
        + 2 * len(candidate.state.ref.key)  # the run key in the grant and in the result's ref
        + SIGNATURE_BYTES_PER_SECRET * len(candidate.signing_secrets)
        + (AUTH_HEADER_BYTES if candidate.target is not None and candidate.target.auth else 0)
    )


def within_budget(
    answers: Sequence[Grant | Rejection],
    candidates: Mapping[RunRef, LeaseCandidate],
    extra_bytes: Callable[[LeaseCandidate], int],
    budget: int,
) -> list[Grant | Rejection]:
    """``answers`` with every grant past ``budget`` bytes replaced by ANSWER_FULL.

    Grants are taken in request order; one that would pass the budget is cut (a later,
    smaller one may still fit); the first grant is always kept. Rejections pass
    through (they are small).
    """
    spent = 0
    kept = 0
    out: list[Grant | Rejection] = []
    for answer in answers:
        if isinstance(answer, Grant):
            candidate = candidates[answer.ref]
            size = grant_bytes(candidate, extra_bytes(candidate))
            if kept and spent + size > budget:
                out.append(ANSWER_FULL)
                continue
            spent += size
            kept += 1
        out.append(answer)
    return out


def wire_sizes() -> Callable[[LeaseCandidate], int]:
    """The serialized size of a candidate's target and egress policy, computed once per
    distinct object within one call (a herd's runs share them)."""
    sizes: dict[tuple[int, int], int] = {}

    def size(candidate: LeaseCandidate) -> int:
        key = (id(candidate.target), id(candidate.egress))
        found = sizes.get(key)
        if found is None:
            found = wire.target(candidate.target).ByteSize() if candidate.target else 0
            if candidate.egress is not None:
                found += wire.egress_policy(candidate.egress).ByteSize()
            sizes[key] = found
        return found

    return size
