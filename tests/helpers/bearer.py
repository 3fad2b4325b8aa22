"""A client-side interceptor that presents a bearer token on every call of a channel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc


def _with_token(details: Any, token: str) -> Any:
    metadata = [*(details.metadata or ()), ("authorization", f"Bearer {token}")]
    return details._replace(metadata=metadata)


class _UnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], client_call_details: Any, request: Any
    ) -> Any:
        return await continuation(_with_token(client_call_details, self._token), request)


class _StreamStream(grpc.aio.StreamStreamClientInterceptor):
    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_stream_stream(
        self, continuation: Callable[..., Any], client_call_details: Any, request_iterator: Any
    ) -> Any:
        return await continuation(_with_token(client_call_details, self._token), request_iterator)


def bearer_interceptors(token: str) -> list[grpc.aio.ClientInterceptor]:
    """Interceptors for ``grpc.aio.insecure_channel(..., interceptors=...)``."""
    return [_UnaryUnary(token), _StreamStream(token)]
