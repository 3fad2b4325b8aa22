"""The interceptor every authenticated service puts after the error interceptor."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeAlias

import grpc

from sundial.core.auth._tokens import Authenticator, Credential, Role, authorize

Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"

_credential: ContextVar[Credential | None] = ContextVar("sundial_credential", default=None)


def current_credential() -> Credential | None:
    """Who is calling the unary RPC being served (set by :class:`RoleInterceptor`);
    None outside one (a handler reached without the interceptor)."""
    return _credential.get()


def _with_credential(behavior: Callable[..., Any], credential: Credential) -> Callable[..., Any]:
    # Callable[..., Any]: grpc's stubs type a handler's behaviour as synchronous, while
    # every Sundial servicer method is a coroutine function (awaited here).
    async def handler(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        token = _credential.set(credential)
        try:
            return await behavior(request, context)
        finally:
            _credential.reset(token)

    return handler


@dataclass(frozen=True, slots=True)
class Admitted:
    """A call :class:`RoleInterceptor` let through."""

    credential: Credential
    metadata: Any
    """The call's invocation metadata (to check the token again)."""
    role: Role
    """The role the service requires."""
    service: str
    """The service's short name, e.g. ``RunLedger``."""
    method: str = ""
    """The full method name, e.g. ``/sundial.v1.JobService/ListJobs``."""


class RoleInterceptor(grpc.aio.ServerInterceptor):
    """Admits a call to a guarded gRPC service only with a token of that service's role.

    Args:
        tokens: Resolves bearer tokens.
        roles: ``{"/sundial.v1.JobService/": Role.TENANT, ...}``: method prefix -> the one
            role it accepts. Methods under no prefix (health, reflection) need no token.

    The check raises ``Unauthenticated``/``PermissionDenied`` from ``intercept_service``,
    before the handler exists, so the request is never read. A unary handler runs with
    the caller in :func:`current_credential`; subclasses override :meth:`wrap` for what
    else a handler needs (a re-check per stream message).
    """

    def __init__(self, tokens: Authenticator, roles: Mapping[str, Role]) -> None:
        self.tokens = tokens
        self._roles = dict(roles)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        method = handler_call_details.method
        guarded = next(((p, r) for p, r in self._roles.items() if method.startswith(p)), None)
        if guarded is None:
            return await continuation(handler_call_details)
        prefix, role = guarded
        service = prefix.strip("/").rsplit(".", 1)[-1]  # "JobService"
        metadata = handler_call_details.invocation_metadata
        credential = await authorize(self.tokens, metadata, role, service)
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        if handler.unary_unary is not None:
            handler = grpc.unary_unary_rpc_method_handler(
                _with_credential(handler.unary_unary, credential),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return self.wrap(handler, Admitted(credential, metadata, role, service, method))

    def wrap(self, handler: Handler, call: Admitted) -> Handler:
        """The handler to serve an admitted call with (``handler`` itself by default)."""
        return handler
