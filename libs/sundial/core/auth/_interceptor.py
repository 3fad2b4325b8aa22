"""The interceptor every authenticated service puts after the error interceptor."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import grpc

from sundial.core.auth._tokens import Authenticator, Credential, Role, authorize

Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"


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


class RoleInterceptor(grpc.aio.ServerInterceptor):
    """Admits a call to a guarded gRPC service only with a token of that service's role.

    Args:
        tokens: Resolves bearer tokens.
        roles: ``{"/sundial.v1.JobService/": Role.TENANT, ...}``: method prefix -> the one
            role it accepts. Methods under no prefix (health, reflection) need no token.

    The check raises ``Unauthenticated``/``PermissionDenied`` from ``intercept_service``,
    before the handler exists, so the request is never read. Subclasses override
    :meth:`wrap` to give the handler what it needs (the caller, a re-check per message).
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
        return self.wrap(handler, Admitted(credential, metadata, role, service))

    def wrap(self, handler: Handler, call: Admitted) -> Handler:
        """The handler to serve an admitted call with (``handler`` itself by default)."""
        return handler
