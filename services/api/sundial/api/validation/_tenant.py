"""Tenant and token fields: ids, display names, quotas."""

from __future__ import annotations

import re
from collections.abc import Mapping

from sundial.api.validation._fields import MAX_TENANT_ID_CHARS, _fail
from sundial.api.validation._job import check_name

_TENANT_ID = re.compile(r"[a-z][a-z0-9-]{0,62}")


# What a stored tenant id can be (migration 0001's CHECK), looser than CreateTenant's
# rule above: an id a lookup names is checked against it before it reaches a query.
_STORED_TENANT_ID = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_TENANT_ID_CHARS}}}")


def check_tenant_id(tenant_id: str, field: str = "tenant.tenant_id") -> None:
    """1-63 chars of [a-z0-9-], starting with a letter."""
    if not tenant_id:
        raise _fail(field, "is required")
    if not _TENANT_ID.fullmatch(tenant_id):
        raise _fail(field, "must be 1-63 characters of a-z, 0-9 and '-', starting with a letter")


def check_tenant_ref(tenant_id: str, field: str = "tenant_id") -> None:
    """A tenant id a request names: one that could be stored (1-64 chars of
    [A-Za-z0-9_-]), so an impossible one (a NUL, which PostgreSQL text cannot hold,
    above all) is INVALID_ARGUMENT instead of reaching a query."""
    if not tenant_id:
        raise _fail(field, "is required")
    if not _STORED_TENANT_ID.fullmatch(tenant_id):
        raise _fail(field, "is not a tenant id (1-64 characters of A-Z, a-z, 0-9, '_', '-')")


def check_display_name(name: str, field: str) -> None:
    """1-200 chars, no control characters."""
    check_name(name, field)


_QUOTA_RANGES = {
    "max_calendars": 100_000,
    "max_waiting_requested_runs": 10_000_000,
    "revisions_per_job": 100_000,
    "fair_weight": 100,
}
"""The highest value of each quota overriding an operator's default (admin.proto)."""


def check_quota_overrides(values: Mapping[str, int | None], field: str = "tenant.quotas") -> None:
    """Each set value 0 (the operator's default) or within admin.proto's range."""
    for name, value in values.items():
        high = _QUOTA_RANGES[name]
        if value is not None and not 0 <= value <= high:
            raise _fail(f"{field}.{name}", f"must be 1 to {high:,} or 0, got {value}")


def check_quotas(max_jobs: int, max_concurrent_runs: int, field: str = "tenant.quotas") -> None:
    """0 (the cluster default) or within admin.proto's ranges."""
    if not (max_jobs == 0 or 1 <= max_jobs <= 100_000_000):
        raise _fail(f"{field}.max_jobs", f"must be 1 to 100,000,000 or 0, got {max_jobs}")
    if not (max_concurrent_runs == 0 or 1 <= max_concurrent_runs <= 1_000_000):
        raise _fail(
            f"{field}.max_concurrent_runs",
            f"must be 1 to 1,000,000 or 0, got {max_concurrent_runs}",
        )
