"""Calling HTTP targets: one pooled ``aiohttp.ClientSession`` for every target.

The SSRF rules are enforced where the connection is made. A target named by host name
is resolved by the connector's resolver (:class:`_GuardedResolver`, aiohttp's
``AbstractResolver`` hook), which checks every address (:class:`AddressPolicy`) and
hands the connector only those, as numeric addresses: the connector connects to the
address that was checked, so DNS cannot change between check and connect. aiohttp does
not call a resolver for an IP literal; :meth:`HttpCaller.call` checks that address
itself, and it is the one connected to. The connector's DNS cache is off, so the host is
resolved and checked again at every new connection; pooled connections were checked when
they were opened. TLS verifies the certificate against the URL's host name (aiohttp
passes it as SNI and for the hostname check), with the system's trusted roots.

Redirects are not followed (a 3xx is a final failure: following one would bypass the
address check and change the method); environment proxies and netrc are ignored
(``trust_env`` off) for the same reason; no cookies are kept (one tenant's target must
not set cookies that another tenant's calls carry); bodies are neither advertised nor
decoded as compressed, so the bounded read is a bound on what is received.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
import ssl

import aiohttp
import aiohttp.abc
from multidict import CIMultiDict
from yarl import URL

from sundial.core.clock import Clock, SystemClock
from sundial.executor.targets.address import AddressPolicy, TargetRefused
from sundial.executor.targets.classify import classify_http, failure, parse_retry_after
from sundial.run import ErrorClass, HttpTarget, Outcome, OutcomeStatus

__all__ = ["HttpCaller", "breaker_key"]

# How much of a response body is read into the run's last_error (the rest is dropped).
_ERROR_BODY_BYTES = 1024
# Most of a successful response body read (to reuse the connection); beyond, it is closed.
_MAX_BODY_BYTES = 64 * 1024
# Bound on opening one connection: TCP connect and TLS handshake (the name lookup has its
# own bound, RESOLVE_TIMEOUT_S). The run timeout (enforced by the runner) bounds the
# whole call; waiting for a free pooled connection is not a connection failure.
_CONNECT_TIMEOUT_S = 10.0
_KEEPALIVE_S = 30.0
# The client's automatic headers, none of which a target needs: Accept-Encoding would
# invite compressed bodies (see the module docstring); the runner sets User-Agent.
_SKIPPED_AUTO_HEADERS = ("Accept-Encoding", "User-Agent")


class _GuardedResolver(aiohttp.abc.AbstractResolver):
    """The connector's resolver: every address of a host name, checked by the policy."""

    def __init__(self, policy: AddressPolicy) -> None:
        self._policy = policy

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[aiohttp.abc.ResolveResult]:
        """Resolve ``host`` and check every address (``family`` is not used: the
        policy's resolution returns both families, in the resolver's order).

        Raises:
            TargetRefused: Any resolved address is forbidden (aiohttp passes it on as
                it is: it is no ``OSError``).
            OSError: The name does not resolve now (aiohttp wraps it as a connection
                error).
        """
        addresses = await self._policy.resolve(host, port)
        numeric = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
                "proto": socket.IPPROTO_TCP,
                "flags": numeric,
            }
            for address in addresses
        ]

    async def close(self) -> None:
        """Nothing to release: lookups run on the event loop's resolver."""


def breaker_key(url: str) -> str:
    """The circuit breaker key of an HTTP target's URL: its origin (scheme, host, port)."""
    try:
        parsed = URL(url)
    except (ValueError, TypeError):
        return url
    if not parsed.absolute:
        return url
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return f"{parsed.scheme}://{parsed.host}:{port}"


@functools.lru_cache(maxsize=4096)
def _parsed(url: str) -> tuple[URL, ipaddress.IPv4Address | ipaddress.IPv6Address | None]:
    """``url`` parsed once (jobs share URLs: parsing per call was a per-run cost), with
    the IP address it names literally (None: a host name, checked by the resolver).

    Raises:
        ValueError: ``url`` is not a URL.
    """
    parsed = URL(url)
    host = parsed.raw_host
    if host is None:
        return parsed, None  # aiohttp refuses a URL without a host (InvalidURL)
    try:
        return parsed, ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return parsed, None


class HttpCaller:
    """Makes one HTTP request per attempt through one shared connection pool.

    Args:
        policy: The SSRF rules, applied where each connection is made.
        max_connections: Open connections of the pool, all targets together; a request
            finding all of them busy waits for one.
        clock: Stamps the outcomes and reads HTTP-date Retry-After values.
    """

    def __init__(
        self, policy: AddressPolicy, *, max_connections: int = 256, clock: Clock | None = None
    ) -> None:
        self._clock = clock or SystemClock()
        self._policy = policy
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    def _pool(self) -> aiohttp.ClientSession:
        """The session, opened by the first call (it belongs to the running loop)."""
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._max_connections,
                limit_per_host=0,
                keepalive_timeout=_KEEPALIVE_S,
                resolver=_GuardedResolver(self._policy),
                # Resolve (and so check) at every new connection: a name's addresses can
                # change, and the policy must see what is connected to.
                use_dns_cache=False,
                # The system's trusted roots, hostname checked (aiohttp's default
                # verifies too; spelled out so that no default can turn it off).
                ssl=ssl.create_default_context(),
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=False,
                skip_auto_headers=_SKIPPED_AUTO_HEADERS,
                raise_for_status=False,
                timeout=aiohttp.ClientTimeout(
                    total=None, connect=None, sock_connect=_CONNECT_TIMEOUT_S, sock_read=None
                ),
            )
        return self._session

    async def aclose(self) -> None:
        """Close every pooled connection."""
        if self._session is not None:
            await self._session.close()

    async def call(self, target: HttpTarget, payload: bytes, headers: dict[str, str]) -> Outcome:
        """Send ``payload`` to ``target`` with ``headers`` (Sundial's, added to the job's).

        Never raises for a failed call: the failure is the outcome. Cancellation (run
        timeout, cancel order, shutdown) propagates, and closes the request's connection.
        """
        started = self._clock.now()
        # Case-insensitive merge: Sundial's headers replace any spelling of the same name.
        # The job's are sorted so that two spellings of one name always merge alike.
        request_headers: CIMultiDict[str] = CIMultiDict(
            {"Content-Type": "application/octet-stream"}
        )
        for name, value in (*sorted(target.headers.items()), *headers.items()):
            request_headers[name] = value
        try:
            url, literal = _parsed(target.url)
            if literal is not None:
                # aiohttp does not call the resolver for an IP literal: check it here.
                self._policy.check(literal)
            async with self._pool().request(
                target.method,
                url,
                data=payload,
                headers=request_headers,
                allow_redirects=False,
            ) as response:
                body = await _read_some(response, succeeded=200 <= response.status < 300)
        except TargetRefused as exc:
            return failure(
                started, self._clock.now(), OutcomeStatus.FAILED_FINAL, ErrorClass.REFUSED, str(exc)
            )
        except aiohttp.InvalidURL as exc:  # an unsupported scheme included
            return failure(
                started, self._clock.now(), OutcomeStatus.FAILED_FINAL, ErrorClass.FINAL, str(exc)
            )
        except (aiohttp.ClientError, OSError) as exc:  # timeouts and TLS failures included
            message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return failure(
                started,
                self._clock.now(),
                OutcomeStatus.FAILED_RETRYABLE,
                ErrorClass.CONNECTION,
                message,
            )
        except ValueError as exc:  # a request that cannot be sent (a header aiohttp refuses)
            return failure(
                started, self._clock.now(), OutcomeStatus.FAILED_FINAL, ErrorClass.FINAL, str(exc)
            )
        finished = self._clock.now()
        status, error_class = classify_http(response.status)
        if status is OutcomeStatus.SUCCEEDED:
            return Outcome(
                status=status,
                started_at=started,
                finished_at=finished,
                http_status=response.status,
            )
        reason = response.reason or ""
        detail = body[:_ERROR_BODY_BYTES].decode(errors="replace").strip()
        error = f"HTTP {response.status} {reason}".strip()
        if detail:
            error = f"{error}: {detail}"
        return Outcome(
            status=status,
            started_at=started,
            finished_at=finished,
            error=error,
            error_class=error_class,
            retry_after=parse_retry_after(response.headers.get("Retry-After"), finished),
            http_status=response.status,
        )


async def _read_some(response: aiohttp.ClientResponse, *, succeeded: bool) -> bytes:
    """Read at most a bounded prefix of the body: a target cannot make us buffer GBs.

    What is left unread closes the connection when the response is released (aiohttp
    pools only connections whose response was read to its end).
    """
    limit = _MAX_BODY_BYTES if succeeded else _ERROR_BODY_BYTES
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = await response.content.read(limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
