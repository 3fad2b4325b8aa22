"""The executor's own types (pure: no servers)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from sundial.executor.model import Lease
from sundial.run import HttpTarget, RunRef

# The namespace the soak's checks derive the same ids in (tests/fault/soak/_checks.py).
_NAMESPACE = uuid.UUID("6f1d3c1e-5a57-4e0b-9d3c-1b2a0e7c5f41")


def _lease(lease_id: str) -> Lease:
    at = datetime(2026, 3, 8, 14, 0, tzinfo=UTC)
    ref = RunRef(uuid.uuid4(), at)
    return Lease(
        run=ref,
        attempt=1,
        lease_until=at,
        target=HttpTarget(url="http://127.0.0.1:1/", method="POST", headers={}),
        payload=b"",
        run_timeout_s=1.0,
        tenant_id="t",
        run_key=ref.key,
        signature="",
        lease_id=lease_id,
    )


# Fixed lease ids (random ones would name the tests differently in each test process).
@pytest.mark.parametrize(
    "lease_id", [str(uuid.UUID(int=i * 0x9E3779B97F4A7C15 << 40)) for i in range(20)] + ["x", "é"]
)
def test_execution_id_is_the_uuid5_of_the_lease_id(lease_id: str) -> None:
    assert _lease(lease_id).execution_id == str(uuid.uuid5(_NAMESPACE, lease_id))


def test_no_lease_id_no_execution_id() -> None:
    assert _lease("").execution_id == ""
