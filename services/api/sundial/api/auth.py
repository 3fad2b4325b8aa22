"""Bearer-token authentication: every JobService and AdminService call names its caller.

:class:`AuthInterceptor` reads ``authorization: Bearer <token>``, resolves it to a
:class:`~sundial.api.model.Principal` (tenant or admin) and makes it available to the
handler through :func:`current_principal`. JobService needs a TENANT token with the
scope the method needs (:mod:`sundial.api.scopes`), AdminService an ADMIN one; health and
reflection need none. It runs after the error interceptor,
so it simply raises ``Unauthenticated`` / ``PermissionDenied``.

Tokens are resolved by :class:`sundial.core.auth.Tokens` (one index probe by sha256, no
cache: a revoked token stops working at once on every replica); the bootstrap admin token
from configuration is compared in constant time. Executor tokens are refused here: they
are for the scheduler's RunLedgerService.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import grpc

from sundial.api.model import Principal
from sundial.api.ratelimit import TenantCallGate, TenantRateLimiter
from sundial.api.scopes import check_scope
from sundial.core.auth import (
    Admitted,
    Authenticator,
    Handler,
    Role,
    RoleInterceptor,
    current_credential,
)
from sundial.core.errors import PermissionDenied, Unauthenticated

log = logging.getLogger(__name__)


def current_principal() -> Principal:
    """The caller of the RPC being served (set by :class:`AuthInterceptor`)."""
    who = current_credential()
    if who is None:  # a handler reached without the interceptor: a wiring bug
        raise Unauthenticated("missing credentials")
    return Principal(role=who.role, tenant_id=who.tenant_id, token_id=who.token_id)


def current_tenant() -> str:
    """The calling tenant's id (JobService handlers only)."""
    tenant_id = current_principal().tenant_id
    if tenant_id is None:
        raise PermissionDenied("this call needs a tenant token")
    return tenant_id


class AuthInterceptor(RoleInterceptor):
    """Authenticates JobService (TENANT role) and AdminService (ADMIN role) calls and
    gives their handlers the caller (:func:`current_principal`).

    With a ``limiter``, a tenant's JobService call also takes a token of its bucket
    (:class:`~sundial.api.ratelimit.TenantRateLimiter`) before the request is read; with a
    ``gate``, it executes once one of its tenant's slots is free
    (:class:`~sundial.api.ratelimit.TenantCallGate`).
    """

    def __init__(
        self,
        tokens: Authenticator,
        limiter: TenantRateLimiter | None = None,
        gate: TenantCallGate | None = None,
    ) -> None:
        super().__init__(
            tokens,
            {"/sundial.v1.JobService/": Role.TENANT, "/sundial.v1.AdminService/": Role.ADMIN},
        )
        self._limiter = limiter
        self._gate = gate

    def wrap(self, handler: Handler, call: Admitted) -> Handler:
        if call.role is Role.TENANT:
            check_scope(call.method, call.credential.scopes)
        tenant_id = call.credential.tenant_id
        if self._limiter is not None and tenant_id is not None:
            self._limiter.take(tenant_id)
        gate = self._gate
        if gate is None or not gate.enabled or tenant_id is None or handler.unary_unary is None:
            return handler
        # Callable[..., Any]: grpc's stubs type a handler's behaviour as synchronous, while
        # every Sundial servicer method is a coroutine function (awaited here).
        behavior: Callable[..., Any] = handler.unary_unary

        async def gated(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            async with gate.slot(tenant_id):
                return await behavior(request, context)

        return grpc.unary_unary_rpc_method_handler(
            gated,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
