"""Calling HTTP targets: one pooled ``httpx.AsyncClient`` for every target.

The SSRF rules are enforced where the connection is made: the pool's network backend
resolves the host, checks every address (:class:`AddressPolicy`) and connects to the
address it checked, so DNS cannot change between check and connect. TLS still verifies
the certificate against the URL's host name (httpcore passes the origin host as SNI).
Pooled connections were checked when they were opened.

Redirects are not followed (a 3xx is a final failure: following one would bypass the
address check and change the method); environment proxies are ignored (``trust_env``
off) for the same reason.
"""

from __future__ import annotations

import ssl
import typing

import httpcore
import httpx

from sundial.core.clock import Clock, SystemClock
from sundial.executor.targets.address import AddressPolicy, TargetRefused
from sundial.executor.targets.classify import classify_http, failure, parse_retry_after
from sundial.run import ErrorClass, HttpTarget, Outcome, OutcomeStatus

__all__ = ["HttpCaller", "breaker_key"]

# How much of a response body is read into the run's last_error (the rest is dropped).
_ERROR_BODY_BYTES = 1024
# Most of a successful response body read (to reuse the connection); beyond, it is closed.
_MAX_BODY_BYTES = 64 * 1024
_CONNECT_TIMEOUT_S = 10.0
_CONNECTIONS_PER_POOL = 4


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the SSRF check at connect time."""

    def __init__(self, policy: AddressPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: typing.Iterable[typing.Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._policy.resolve(host, port)
        last_error: Exception | None = None
        for address in addresses:  # every one was checked; try them in resolver order
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last_error = exc
        assert last_error is not None
        raise last_error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: typing.Iterable[typing.Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise TargetRefused("unix sockets are not targets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport with :class:`_GuardedBackend` in its pool.

    httpx does not expose the pool's network backend, so the pool is rebuilt with it;
    httpx is pinned exactly, and the rest of the transport (request and response
    mapping, error translation) is httpx's own.
    """

    def __init__(
        self, policy: AddressPolicy, limits: httpx.Limits, ssl_context: ssl.SSLContext
    ) -> None:
        super().__init__(verify=ssl_context, trust_env=False, limits=limits)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_GuardedBackend(policy),
        )


def breaker_key(target: HttpTarget) -> str:
    """The circuit breaker key of an HTTP target: its origin (scheme, host, port)."""
    try:
        url = httpx.URL(target.url)
    except httpx.InvalidURL:
        return target.url
    return f"{url.scheme}://{url.host}:{url.port or (443 if url.scheme == 'https' else 80)}"


class HttpCaller:
    """Makes one HTTP request per attempt through shared connection pools.

    The connections are split over many small pools: httpcore matches waiting requests
    to connections in time proportional to requests x connections on every request and
    response, which at 256 connections in one pool costs more CPU than the calls
    themselves (bench: 16 calls/s with one pool of 256, 380 with pools of 4). Each
    request goes to the pool with the fewest calls in flight, so a pool held by slow
    calls never makes a request wait while another pool has room.

    Args:
        policy: The SSRF rules, applied where each connection is made.
        max_connections: Connections of all pools together.
        clock: Stamps the outcomes and reads HTTP-date Retry-After values.
    """

    def __init__(
        self, policy: AddressPolicy, *, max_connections: int = 256, clock: Clock | None = None
    ) -> None:
        self._clock = clock or SystemClock()
        pools = max(1, -(-max_connections // _CONNECTIONS_PER_POOL))
        per_pool = -(-max_connections // pools)
        limits = httpx.Limits(
            max_connections=per_pool,
            max_keepalive_connections=per_pool,
            keepalive_expiry=30.0,
        )
        # One TLS context for all pools: building one loads the CA bundle (~10 ms).
        ssl_context = httpx.create_ssl_context(trust_env=False)
        self._clients = [
            httpx.AsyncClient(
                transport=_GuardedTransport(policy, limits, ssl_context),
                follow_redirects=False,
                trust_env=False,
                # The run timeout (enforced by the runner) bounds the whole call; only
                # connecting gets its own, shorter limit.
                timeout=httpx.Timeout(None, connect=_CONNECT_TIMEOUT_S),
            )
            for _ in range(pools)
        ]
        self._in_flight = [0] * pools

    async def aclose(self) -> None:
        """Close every pooled connection."""
        for client in self._clients:
            await client.aclose()

    async def call(self, target: HttpTarget, payload: bytes, headers: dict[str, str]) -> Outcome:
        """Send ``payload`` to ``target`` with ``headers`` (Sundial's, added to the job's).

        Never raises for a failed call: the failure is the outcome. Cancellation (run
        timeout, cancel order, shutdown) propagates.
        """
        started = self._clock.now()
        # Case-insensitive merge: Sundial's headers replace any spelling of the same name.
        # The job's are sorted so that two spellings of one name always merge alike.
        request_headers = httpx.Headers({"Content-Type": "application/octet-stream"})
        for name, value in (*sorted(target.headers.items()), *headers.items()):
            request_headers[name] = value
        try:
            pool = min(range(len(self._clients)), key=self._in_flight.__getitem__)
            self._in_flight[pool] += 1
            try:
                async with self._clients[pool].stream(
                    target.method, target.url, content=payload, headers=request_headers
                ) as response:
                    body = await _read_some(response, succeeded=response.is_success)
            finally:
                self._in_flight[pool] -= 1
        except TargetRefused as exc:
            return failure(
                started, self._clock.now(), OutcomeStatus.FAILED_FINAL, ErrorClass.REFUSED, str(exc)
            )
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            return failure(
                started, self._clock.now(), OutcomeStatus.FAILED_FINAL, ErrorClass.FINAL, str(exc)
            )
        except (httpx.TransportError, OSError) as exc:  # timeouts included
            message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return failure(
                started,
                self._clock.now(),
                OutcomeStatus.FAILED_RETRYABLE,
                ErrorClass.CONNECTION,
                message,
            )
        finished = self._clock.now()
        status, error_class = classify_http(response.status_code)
        if status is OutcomeStatus.SUCCEEDED:
            return Outcome(
                status=status,
                started_at=started,
                finished_at=finished,
                http_status=response.status_code,
            )
        reason = response.reason_phrase or ""
        detail = body[:_ERROR_BODY_BYTES].decode(errors="replace").strip()
        error = f"HTTP {response.status_code} {reason}".strip()
        if detail:
            error = f"{error}: {detail}"
        return Outcome(
            status=status,
            started_at=started,
            finished_at=finished,
            error=error,
            error_class=error_class,
            retry_after=parse_retry_after(response.headers.get("retry-after"), finished),
            http_status=response.status_code,
        )


async def _read_some(response: httpx.Response, *, succeeded: bool) -> bytes:
    """Read at most a bounded prefix of the body: a target cannot make us buffer GBs."""
    limit = _MAX_BODY_BYTES if succeeded else _ERROR_BODY_BYTES
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)
