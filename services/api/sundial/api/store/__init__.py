"""The API service's only access to PostgreSQL: named queries in, domain values out.

Every public method is one unit of work (one statement or one transaction) and
translates database errors into :mod:`sundial.core.errors` at this boundary, so the
managers above never see asyncpg. Tenancy is enforced here too: every job and run query
takes the caller's tenant and matches it in SQL. The SQL is ``sundial/api/queries.sql``.
"""

from __future__ import annotations

import asyncpg

from sundial.api.store._base import (
    JobIdTaken,
    RequestClaim,
    RequestRecord,
    RequestTaken,
    queries,
)
from sundial.api.store._calendars import (
    CalendarChanged,
    CalendarJob,
    CalendarStore,
    CalendarTransaction,
)
from sundial.api.store._flow import FlowStore
from sundial.api.store._identity import IdentityKeyStore
from sundial.api.store._jobs import JobStore
from sundial.api.store._operations import OperationStore, RunScan, Selected
from sundial.api.store._runs import RunStore
from sundial.api.store._secrets import SecretStore
from sundial.api.store._slo import SloStore
from sundial.api.store._tenants import TenantStore

__all__ = [
    "CalendarChanged",
    "CalendarJob",
    "CalendarTransaction",
    "JobIdTaken",
    "RequestClaim",
    "RequestRecord",
    "RequestTaken",
    "RunScan",
    "Selected",
    "Store",
    "queries",
]


class Store(
    JobStore,
    OperationStore,
    RunStore,
    SloStore,
    TenantStore,
    CalendarStore,
    SecretStore,
    FlowStore,
    IdentityKeyStore,
):
    """Named-query access for the API service.

    Args:
        pool: The service's connection pool.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
