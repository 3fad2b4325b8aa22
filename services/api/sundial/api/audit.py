"""The audit log: every write call to the API, who made it, on what, how it ended.

:class:`AuditInterceptor` runs inside the token check (so it knows the caller) around
each unary write method of JobService and AdminService (anything but Get, List, Describe
and Preview), and after the call records one ``audit_events`` row (migration 0013):
the tenant it acted for or on, the caller's token id, the method, the resource it named
(a job id, run key, tenant or token id), the status code and the request id. A call
refused before it reached the handler (no or a wrong token) is not recorded: it did
nothing and names no tenant.

The row is written after the call's own transaction, so a crash between the two loses
the row of a call that did happen (job changes keep their revisions in the same
statement regardless: ``job_revisions``). A failed insert is logged, never turned into
the call's failure.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import grpc

from sundial.api.kit import Pager
from sundial.api.kit.paging import NUMBER
from sundial.api.model import Page
from sundial.api.store import queries
from sundial.core.auth import current_credential
from sundial.core.clock import Clock
from sundial.core.errors import SundialError
from sundial.core.logging import request_id_var

__all__ = ["AuditEvent", "AuditInterceptor", "AuditLog", "is_write"]

log = logging.getLogger(__name__)

_SERVICES = ("/sundial.v1.JobService/", "/sundial.v1.AdminService/")
_READS = ("Get", "List", "Describe", "Preview", "Count")


def is_write(method: str) -> bool:
    """Whether ``/package.Service/Method`` is a JobService/AdminService write."""
    if not method.startswith(_SERVICES):
        return False
    return not method.rsplit("/", 1)[1].startswith(_READS)


def _resource(request: Any) -> str:
    """What the request names, the first of: a job id, a run key, a tenant, a token, a
    calendar (``calendars/<name>``), a secret (``secrets/<name>``), a flow limit's key
    (``flow_limits/<key>``), a bulk action's filters (its selector, search or name
    prefix)."""
    if type(request).__name__.endswith("SecretRequest"):  # the name, never the value
        secret = getattr(request, "secret", None)
        name = secret.name if secret is not None else getattr(request, "name", "")
        return f"secrets/{name}"[:200]
    calendar = getattr(request, "calendar", None)
    if type(request).__name__.endswith("CalendarRequest"):
        name = calendar.name if calendar is not None else getattr(request, "name", "")
        return f"calendars/{name}"[:200]
    if type(request).__name__.endswith("FlowLimitRequest"):
        limit = getattr(request, "limit", None)
        key = limit.key if limit is not None else getattr(request, "key", "")
        return f"flow_limits/{key[:200]}"  # a valid key whole (at most 200 characters)
    for path in (
        ("job_id",),
        ("job", "job_id"),
        ("run_key",),
        ("ref", "job_id"),
        ("tenant_id",),
        ("tenant", "tenant_id"),
        ("token_id",),
        ("channel_id",),
        ("channel", "channel_id"),
        ("job", "name"),
        ("channel", "display_name"),
        ("selector",),
        ("search",),
        ("name_prefix",),
    ):
        value: Any = request
        for name in path:
            value = getattr(value, name, None)
            if value is None:
                break
        if isinstance(value, str) and value:
            return value[:200]
    return ""


class AuditInterceptor(grpc.aio.ServerInterceptor):
    """Records each write call (see the module docstring).

    Args:
        pool: Where ``audit_events`` is.
        clock: Stamps the rows.
    """

    def __init__(self, pool: asyncpg.Pool, clock: Clock) -> None:
        self._pool = pool
        self._clock = clock

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or handler.unary_unary is None or not is_write(method):
            return handler
        behavior = handler.unary_unary

        async def audited(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            code = grpc.StatusCode.OK
            try:
                return await behavior(request, context)
            except grpc.aio.AbortError:
                code = context.code() or grpc.StatusCode.UNKNOWN
                raise
            except SundialError as exc:
                code = exc.code
                raise
            except BaseException:
                code = grpc.StatusCode.INTERNAL
                raise
            finally:
                await self._record(method, request, code)

        return grpc.unary_unary_rpc_method_handler(
            audited,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    async def _record(self, method: str, request: Any, code: grpc.StatusCode) -> None:
        credential = current_credential()
        if credential is None:
            return
        actor = str(credential.token_id) if credential.token_id is not None else "admin"
        tenant = credential.tenant_id or getattr(request, "tenant_id", None) or None
        if tenant is None and hasattr(request, "tenant"):
            tenant = request.tenant.tenant_id or None
        try:
            await self._pool.execute(
                queries.insert_audit_event,
                tenant,
                self._clock.now(),
                actor,
                method.lstrip("/"),
                _resource(request),
                code.name,
                request_id_var.get() or "",
            )
        except (asyncpg.PostgresError, OSError) as exc:
            log.error(
                "audit event not recorded: %s", exc, extra={"action": "audit", "rpc_method": method}
            )


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One ``audit_events`` row."""

    event_id: int
    at: datetime
    actor: str
    method: str
    resource: str
    code: str
    request_id: str


_EVENTS = Pager("audit_events", (NUMBER,))


class AuditLog:
    """Reads a tenant's audit events (ListAuditEvents)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def events(self, tenant_id: str, *, page_size: int, page_token: str) -> Page[AuditEvent]:
        """A page of the tenant's events, newest first."""
        cursor = _EVENTS.open(page_size, page_token, {"tenant": tenant_id})
        before = None if cursor.after is None else cursor.after[0]
        rows = await self._pool.fetch(queries.list_audit_events, tenant_id, before, cursor.limit)
        events = [AuditEvent(**dict(row)) for row in rows]
        return cursor.page(events, lambda event: [event.event_id])
