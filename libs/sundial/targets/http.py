"""Calling HTTP targets: one pooled ``aiohttp.ClientSession`` for every target.

The SSRF rules are enforced where the connection is made, under the rules of the call
that makes it (:class:`CallRules`: the operator's deny list and the egress policy of the
lease's tenant, which :meth:`HttpCaller.call` puts in a context variable for the
duration of the request). A target named by host name is resolved by the connector's
resolver (:class:`_GuardedResolver`, aiohttp's ``AbstractResolver`` hook), which checks
every address and hands the connector only those, as numeric addresses: the connector
connects to the address that was checked, so DNS cannot change between check and
connect. aiohttp does not call a resolver for an IP literal; :meth:`HttpCaller.call`
checks that address itself, and it is the one connected to. The connector's DNS cache
is off, so the host is resolved and checked again at every new connection. Pooled
connections were checked when they were opened, under one policy: the pool key of a
request (:class:`_Request`) carries its policy's fingerprint, so a connection is reused
only by calls under an identical policy, and a changed policy (or another tenant's)
opens, and checks, a connection of its own. TLS verifies the certificate against the
URL's host name (aiohttp passes it as SNI and for the hostname check), with the
system's trusted roots.

Redirects are not followed (a 3xx is a final failure: following one would bypass the
address check and change the method); environment proxies and netrc are ignored
(``trust_env`` off) for the same reason; no cookies are kept (one tenant's target must
not set cookies that another tenant's calls carry); bodies are neither advertised nor
decoded as compressed, so the bounded read is a bound on what is received.
"""

from __future__ import annotations

import contextvars
import functools
import ipaddress
import socket
import ssl

import aiohttp
import aiohttp.abc
from multidict import CIMultiDict
from opentelemetry import propagate, trace
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.semconv.attributes.http_attributes import (
    HTTP_REQUEST_METHOD,
    HTTP_RESPONSE_STATUS_CODE,
)
from opentelemetry.semconv.attributes.server_attributes import SERVER_ADDRESS, SERVER_PORT
from opentelemetry.semconv.attributes.url_attributes import URL_SCHEME
from yarl import URL

from sundial.core import tracing
from sundial.core.clock import Clock, SystemClock
from sundial.core.egress import EgressPolicy, Protocol
from sundial.core.netpolicy import ResolveError
from sundial.run import ErrorClass, HttpTarget, Outcome, OutcomeStatus
from sundial.targets.address import AddressPolicy, CallRules, TargetRefused
from sundial.targets.classify import classify_http, failure, parse_retry_after

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


# The rules of the request being made in this task (set by HttpCaller.call): aiohttp
# resolves inside the request's task, or in a task created from it, which copies the
# context, so the resolver and the pool key see the rules of their own request.
_RULES: contextvars.ContextVar[CallRules | None] = contextvars.ContextVar(
    "sundial_http_rules", default=None
)


class _Request(aiohttp.ClientRequest):
    """A request whose pool key names the egress policy it is made under.

    aiohttp reuses a pooled connection for any request with an equal
    ``connection_key``, without resolving again. The key's ``proxy_headers_hash`` is
    only ever used to tell pooled connections apart (no proxy is used: ``trust_env`` is
    off and no request names one), so it carries the policy's fingerprint: a connection
    opened and checked under one policy is never reused under another.
    """

    @property
    def connection_key(self) -> aiohttp.client_reqrep.ConnectionKey:
        key = super().connection_key
        rules = _RULES.get()
        if rules is None:
            return key
        return key._replace(proxy_headers_hash=rules.policy.fingerprint)


class _GuardedResolver(aiohttp.abc.AbstractResolver):
    """The connector's resolver: every address of a host name, checked by the rules of
    the request being made (the operator's default outside a call)."""

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
        rules = _RULES.get() or self._policy.rules(None, Protocol.HTTP)
        addresses = await rules.resolve(host, port)
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
        # The system's trusted roots, hostname checked (aiohttp's default verifies too;
        # spelled out so that no default can turn it off). Loaded here, not at the first
        # call: reading the roots takes tens of milliseconds, which that call waited for.
        self._ssl = ssl.create_default_context()

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
                ssl=self._ssl,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                request_class=_Request,
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

    async def call(
        self,
        target: HttpTarget,
        payload: bytes,
        headers: dict[str, str],
        egress: EgressPolicy | None = None,
        tenant: str | None = None,
    ) -> Outcome:
        """Send ``payload`` to ``target`` with ``headers`` (Sundial's, added to the job's).

        Every connection it opens is checked under ``egress`` (the tenant's policy from
        the grant; None: the operator's default). Never raises for a failed call: the
        failure is the outcome. Cancellation (run timeout, cancel order, shutdown)
        propagates, and closes the request's connection.

        While tracing is on the call has a CLIENT span (the current span's child) with
        the HTTP semantic-convention attributes, and the target receives its context
        as ``traceparent`` (OpenTelemetry's propagator): the aiohttp client
        instrumentation's release for this SDK needs an older semantic-conventions
        package, so this is its span, made here. Never the URL: it may carry a secret.
        """
        if not tracing.enabled() or not trace.get_current_span().is_recording():
            # Off, or the run is not sampled: the headers carry the attempt's context
            # (or a fresh one), and an unrecorded span would only cost.
            return await self._call(target, payload, headers, egress, tenant)
        with tracing.tracer.start_as_current_span(
            target.method, kind=trace.SpanKind.CLIENT, attributes=_http_attributes(target)
        ) as span:
            propagate.inject(headers)  # the attempt's traceparent becomes this span's
            outcome = await self._call(target, payload, headers, egress, tenant)
            if outcome.http_status is not None:
                span.set_attribute(HTTP_RESPONSE_STATUS_CODE, outcome.http_status)
            if outcome.failed:
                span.set_attribute(
                    ERROR_TYPE,
                    str(outcome.http_status or (outcome.error_class or ErrorClass.RETRYABLE).value),
                )
                span.set_status(trace.StatusCode.ERROR)
        return outcome

    async def _call(
        self,
        target: HttpTarget,
        payload: bytes,
        headers: dict[str, str],
        egress: EgressPolicy | None,
        tenant: str | None,
    ) -> Outcome:
        started = self._clock.now()
        # Case-insensitive merge: Sundial's headers replace any spelling of the same name.
        # The job's are sorted so that two spellings of one name always merge alike.
        request_headers: CIMultiDict[str] = CIMultiDict(
            {"Content-Type": "application/octet-stream"}
        )
        for name, value in (*sorted(target.headers.items()), *headers.items()):
            request_headers[name] = value
        rules = self._policy.rules(egress, Protocol.HTTP, tenant)
        token = _RULES.set(rules)
        try:
            url, literal = _parsed(target.url)
            if literal is not None:
                # aiohttp does not call the resolver for an IP literal: check it here.
                rules.check(str(url.raw_host), literal)
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
                started, self._clock.now(), OutcomeStatus.FAILED_FINAL, exc.error_class, str(exc)
            )
        except aiohttp.InvalidURL as exc:  # an unsupported scheme included
            return failure(
                started, self._clock.now(), OutcomeStatus.FAILED_FINAL, ErrorClass.FINAL, str(exc)
            )
        except (aiohttp.ClientError, OSError) as exc:  # timeouts and TLS failures included
            message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if isinstance(exc, aiohttp.ClientConnectorError) and isinstance(
                exc.os_error, ResolveError
            ):
                # aiohttp shows only an OSError's strerror, which a lookup's has not.
                message = f"{type(exc).__name__}: {exc.os_error}"
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
        finally:
            _RULES.reset(token)
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


def _http_attributes(target: HttpTarget) -> dict[str, str | int]:
    attributes: dict[str, str | int] = {HTTP_REQUEST_METHOD: target.method}
    try:
        url = URL(target.url)
    except (ValueError, TypeError):
        return attributes
    if url.absolute and url.host:
        attributes[SERVER_ADDRESS] = url.host
        attributes[URL_SCHEME] = url.scheme
        if url.port is not None:
            attributes[SERVER_PORT] = url.port
    return attributes


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
