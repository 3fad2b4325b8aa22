"""Bearer-token authentication: every JobService and AdminService call names its caller.

:class:`AuthInterceptor` reads ``authorization: Bearer <token>``, resolves it to a
:class:`~sundial.api.model.Principal` (tenant or admin) and makes it available to the
handler through :func:`current_principal`. JobService needs a TENANT token, AdminService
an ADMIN one; health and reflection need none. It runs after the error interceptor,
so it simply raises ``Unauthenticated`` / ``PermissionDenied``.

Tokens are looked up by their sha256 (one index probe); the bootstrap admin token from
configuration is compared in constant time. There is no cache: a revoked token stops
working at once on every replica.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import grpc

from sundial.api.model import Principal, Role
from sundial.api.store import Store
from sundial.api.tenancy import token_hash
from sundial.core.clock import Clock
from sundial.core.errors import PermissionDenied, Unauthenticated

log = logging.getLogger(__name__)

_principal: ContextVar[Principal | None] = ContextVar("sundial_principal", default=None)

_ROLE_BY_SERVICE = {
    "/sundial.v1.JobService/": Role.TENANT,
    "/sundial.v1.AdminService/": Role.ADMIN,
}
_MAX_TOKEN_CHARS = 512


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


def _bearer(metadata: Any) -> str:
    for key, value in metadata or ():
        if key == "authorization":
            if not isinstance(value, str):
                break
            scheme, _, token = value.strip().partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token:
                raise Unauthenticated("authorization must be 'Bearer <token>'")
            return token
    raise Unauthenticated("missing authorization: Bearer <token> metadata")


class Authenticator:
    """Resolves bearer tokens to principals.

    Args:
        store: Where issued tokens are.
        clock: The source of "now" (expiry, last use).
        admin_token: The bootstrap admin token; empty disables it.
    """

    def __init__(self, store: Store, clock: Clock, *, admin_token: str = "") -> None:
        self._store = store
        self._clock = clock
        self._admin_token = admin_token.encode()

    async def authenticate(self, token: str) -> Principal:
        """The principal ``token`` stands for.

        Raises:
            Unauthenticated: Unknown, revoked or expired token.
        """
        if len(token) > _MAX_TOKEN_CHARS or not token.isascii():
            raise Unauthenticated("invalid token")
        if self._admin_token and hmac.compare_digest(token.encode(), self._admin_token):
            return Principal(role=Role.ADMIN, tenant_id=None, token_id=None)
        now = self._clock.now()
        record = await self._store.find_token(token_hash(token), now)
        if record is None or not record.usable:
            raise Unauthenticated("invalid, revoked or expired token")
        last = record.last_used_at
        if last is None or (now - last).total_seconds() >= 60:
            await self._store.touch_token(record.token_id, now)
        return Principal(role=record.role, tenant_id=record.tenant_id, token_id=record.token_id)


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


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Authenticates JobService (TENANT role) and AdminService (ADMIN role) calls."""

    def __init__(self, authenticator: Authenticator) -> None:
        self._authenticator = authenticator

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        method = handler_call_details.method
        required = next(
            (role for prefix, role in _ROLE_BY_SERVICE.items() if method.startswith(prefix)),
            None,
        )
        if required is None:  # health, reflection
            return await continuation(handler_call_details)
        token = _bearer(handler_call_details.invocation_metadata)
        principal = await self._authenticator.authenticate(token)
        if principal.role is not required:
            if required is Role.ADMIN:
                raise PermissionDenied("AdminService needs an admin token")
            raise PermissionDenied("JobService needs a tenant token; admin tokens are refused")
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler  # every JobService and AdminService method is unary
        return grpc.unary_unary_rpc_method_handler(
            _with_principal(handler.unary_unary, principal),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
