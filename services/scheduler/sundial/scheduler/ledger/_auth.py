"""RunLedgerService authentication: executor tokens only (docs/design.md section 7).

Every RunLedgerService call and the Heartbeat stream must carry an executor token
(``authorization: Bearer <token>``, TOKEN_ROLE_EXECUTOR issued by AdminService). The
check runs in an interceptor, before the handler reads the request: without a valid
token a caller gets UNAUTHENTICATED whatever it asked, so it learns nothing about which
runs exist; a tenant or admin token gets PERMISSION_DENIED. A Heartbeat stream checks the
token again with every message (one index probe every 10 s per executor), so a revoked
token also ends streams already open at their next beat.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from sundial.core.auth import (
    Admitted,
    Authenticator,
    Role,
    RoleInterceptor,
    authorize,
    current_credential,
)


def current_token_id() -> str:
    """The calling executor's token id (set by :class:`LedgerAuthInterceptor`): a lease
    is re-granted only under the credential it was granted to."""
    who = current_credential()
    if who is None:  # a handler reached without the interceptor: a wiring bug
        raise RuntimeError("RunLedgerService served without LedgerAuthInterceptor")
    return str(who.token_id or "")


class LedgerAuthInterceptor(RoleInterceptor):
    """Admits RunLedgerService calls carrying a valid executor token; other services pass."""

    def __init__(self, tokens: Authenticator) -> None:
        super().__init__(tokens, {"/sundial.internal.v1.RunLedgerService/": Role.EXECUTOR})

    def wrap(
        self, handler: grpc.RpcMethodHandler[Any, Any], call: Admitted
    ) -> grpc.RpcMethodHandler[Any, Any]:
        if handler.stream_stream is None:
            return handler
        behavior: Callable[..., Any] = handler.stream_stream
        tokens = self.tokens

        async def reverifying(
            requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            # The servicer reads the stream's requests; each one is let through only while
            # the token that opened the stream is still valid.
            async def checked() -> AsyncIterator[Any]:
                async for request in requests:
                    await authorize(tokens, call.metadata, call.role, call.service)
                    yield request

            async for response in behavior(checked(), context):
                yield response

        return grpc.stream_stream_rpc_method_handler(
            reverifying,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
