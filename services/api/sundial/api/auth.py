"""Bearer-token authentication: every JobService and AdminService call names its caller.

:class:`AuthInterceptor` reads ``authorization: Bearer <token>``, resolves it to a
:class:`~sundial.api.model.Principal` (tenant or admin) and makes it available to the
handler through :func:`current_principal`. JobService needs a TENANT token, AdminService
an ADMIN one; health and reflection need none. It runs after the error interceptor,
so it simply raises ``Unauthenticated`` / ``PermissionDenied``.

Tokens are resolved by :class:`sundial.core.auth.Tokens` (one index probe by sha256, no
cache: a revoked token stops working at once on every replica); the bootstrap admin token
from configuration is compared in constant time. Executor tokens are refused here: they
are for the scheduler's RunLedger.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import grpc

from sundial.api.model import Principal
from sundial.core.auth import Admitted, Authenticator, Role, RoleInterceptor
from sundial.core.errors import PermissionDenied, Unauthenticated

log = logging.getLogger(__name__)

_principal: ContextVar[Principal | None] = ContextVar("sundial_principal", default=None)


def current_principal() -> Principal:
    """The caller of the RPC being served (set by :class:`AuthInterceptor`)."""
    principal = _principal.get()
    if principal is None:  # a handler reached without the interceptor: a wiring bug
        raise Unauthenticated("missing credentials")
    return principal


def current_tenant() -> str:
    """The calling tenant's id (JobService handlers only)."""
    tenant_id = current_principal().tenant_id
    if tenant_id is None:
        raise PermissionDenied("this call needs a tenant token")
    return tenant_id


def _with_principal(behavior: Callable[..., Any], principal: Principal) -> Callable[..., Any]:
    # Callable[..., Any]: grpc's stubs type a handler's behaviour as synchronous, while
    # every Sundial servicer method is a coroutine function (awaited here).
    async def handler(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        token = _principal.set(principal)
        try:
            return await behavior(request, context)
        finally:
            _principal.reset(token)

    return handler


class AuthInterceptor(RoleInterceptor):
    """Authenticates JobService (TENANT role) and AdminService (ADMIN role) calls and
    gives their handlers the caller (:func:`current_principal`)."""

    def __init__(self, tokens: Authenticator) -> None:
        super().__init__(
            tokens,
            {"/sundial.v1.JobService/": Role.TENANT, "/sundial.v1.AdminService/": Role.ADMIN},
        )

    def wrap(
        self, handler: grpc.RpcMethodHandler[Any, Any], call: Admitted
    ) -> grpc.RpcMethodHandler[Any, Any]:
        if handler.unary_unary is None:
            return handler  # every JobService and AdminService method is unary
        who = call.credential
        principal = Principal(role=who.role, tenant_id=who.tenant_id, token_id=who.token_id)
        return grpc.unary_unary_rpc_method_handler(
            _with_principal(handler.unary_unary, principal),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
