"""A target's checks: its form (HTTP, gRPC) and, with I/O, its addresses (TargetGuard: SSRF)."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import urlsplit

from sundial.api.validation._fields import (
    _SPACE_OR_CONTROL,
    HTTP_METHODS,
    MAX_ADDRESS_CHARS,
    MAX_HEADER_BYTES,
    MAX_HEADERS,
    MAX_URL_CHARS,
    _fail,
    _has_control,
)
from sundial.core import netpolicy
from sundial.core.auth import current_credential
from sundial.core.egress import EgressPolicy, Protocol, default_policy, judge
from sundial.core.netpolicy import (
    AddressError,
    AddressPolicy,
    Endpoint,
    IPAddress,
    ResolveError,
    ip_literal,
    parse_address,
    resolve,
)
from sundial.run import (
    GrpcTarget,
    HttpTarget,
    SecretReferenceError,
    Target,
    TargetAuth,
    inline_credential,
    references,
)

# RFC 9110 token characters: what an HTTP field name may contain.
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


_METADATA_KEY = re.compile(r"[a-z0-9\-_.]+")


_BRACKETED_NETLOC = re.compile(r"\[[^\[\]]*\](:[^\[\]]*)?")  # [v6-address] then :port


# Set by Sundial or owned by the transport (job.proto): a tenant may not override them.
_RESERVED_HEADERS = frozenset(
    {
        "idempotency-key",
        "traceparent",
        "tracestate",
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
    }
)


_RESERVED_METADATA = frozenset({"idempotency-key", "traceparent", "tracestate"})


def _check_kv_size(field: str, key: str, value: str) -> None:
    size = len(key.encode()) + len(value.encode())
    if size > MAX_HEADER_BYTES:
        raise _fail(field, f"name plus value is {size} bytes, more than {MAX_HEADER_BYTES}")


def _check_references(where: str, value: str) -> None:
    try:
        references(value)
    except SecretReferenceError as exc:
        raise _fail(where, str(exc)) from None


def _entries(target: Target, field: str) -> list[tuple[str, str, str]]:
    """(path, name, value) of each header or metadata entry of a checked target."""
    if isinstance(target, HttpTarget):
        return [(f"{field}.http.headers[{k!r}]", k, v) for k, v in sorted(target.headers.items())]
    return [(f"{field}.grpc.metadata[{k!r}]", k, v) for k, v in sorted(target.metadata.items())]


SecretLookup = Callable[[str, Sequence[str]], Awaitable[set[str]]]
"""``(tenant_id, names) -> the names the tenant has`` (the store's ``existing_secrets``)."""


async def check_credentials(
    items: Sequence[tuple[Target, str]], tenant_id: str | None, lookup: SecretLookup | None
) -> None:
    """Refuse an inline credential (a sensitive header written without a secret
    reference) and a reference to a secret the tenant does not have (docs/design.md
    section 7, "Secrets"); the messages name the field, never a value."""
    wanted: set[str] = set()
    for target, field in items:
        for where, name, value in _entries(target, field):
            if inline_credential(name, value):
                raise _fail(
                    where,
                    "holds a credential inline; store it as a secret (sundial secrets create "
                    "<name>) and reference it as ${secret:<name>}, e.g. 'Bearer "
                    "${secret:<name>}'",
                )
            wanted.update(references(value))
    if not wanted:
        return
    found = (
        set() if lookup is None or tenant_id is None else await lookup(tenant_id, sorted(wanted))
    )
    for target, field in items:
        for where, _, value in _entries(target, field):
            for name in references(value):
                if name not in found:
                    raise _fail(
                        where,
                        f"references secret {name!r}, which the tenant does not have: "
                        "create it first",
                    )


_STANDARD_WEBHOOK_HEADERS = frozenset({"webhook-id", "webhook-timestamp", "webhook-signature"})
MAX_AUDIENCE_CHARS = 1024
MIN_TOKEN_LIFETIME_S = 60
MAX_TOKEN_LIFETIME_S = 3600


def check_auth(auth: TargetAuth, names: dict[str, str], field: str) -> None:
    """A target's ``auth``, and the headers (lower-cased name -> path) it would clash
    with: the Standard Webhooks headers, Authorization with an identity token."""
    if auth.standard_webhooks:
        for name in sorted(_STANDARD_WEBHOOK_HEADERS & names.keys()):
            raise _fail(names[name], "is set by Sundial when auth.standard_webhooks is on")
    token = auth.identity_token
    if token is None:
        return
    if "authorization" in names:
        raise _fail(names["authorization"], "is set by Sundial when auth.identity_token is set")
    where = f"{field}.auth.identity_token"
    if len(token.audience) > MAX_AUDIENCE_CHARS:
        raise _fail(f"{where}.audience", f"longer than {MAX_AUDIENCE_CHARS} characters")
    if not all(" " < ch <= "~" for ch in token.audience):
        raise _fail(f"{where}.audience", "must be printable ASCII without spaces")
    if not MIN_TOKEN_LIFETIME_S <= token.lifetime_s <= MAX_TOKEN_LIFETIME_S:
        raise _fail(f"{where}.lifetime", "must be between 1m and 60m")


def check_http_target(target: HttpTarget, field: str = "target.http") -> HttpTarget:
    """Check an HTTP target; returns it with the method upper-cased (POST when empty)."""
    url = target.url
    if not url:
        raise _fail(f"{field}.url", "is required")
    if len(url) > MAX_URL_CHARS:
        raise _fail(f"{field}.url", f"longer than {MAX_URL_CHARS} characters")
    if _SPACE_OR_CONTROL.search(url):
        raise _fail(f"{field}.url", "must not contain whitespace or control characters")
    try:
        parts = urlsplit(url)
    except ValueError:
        # urlsplit checks a bracketed host: "[1.1.1.1]", "[example.com]", "[::1" fail here.
        raise _fail(
            f"{field}.url", "has a malformed host (brackets hold an IPv6 address only)"
        ) from None
    if parts.scheme.lower() not in ("http", "https"):
        raise _fail(f"{field}.url", "must be an absolute http:// or https:// URL")
    if not parts.netloc or not parts.hostname:
        raise _fail(f"{field}.url", "has no host")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise _fail(f"{field}.url", "must not contain user info (user:password@)")
    if ("[" in parts.netloc or "]" in parts.netloc) and (
        not _BRACKETED_NETLOC.fullmatch(parts.netloc) or ":" not in parts.hostname
    ):
        # urlsplit takes "[::1]x", "x[::1]" and "[::1]]" as the host ::1, and "[v1.fe]"
        # (an RFC 3986 IPvFuture) as the name v1.fe; a client reading the URL by RFC 3986
        # would not.
        raise _fail(f"{field}.url", "has a malformed host (brackets hold an IPv6 address only)")
    try:
        port = parts.port
    except ValueError:
        raise _fail(f"{field}.url", "has an invalid port") from None
    if port == 0:
        raise _fail(f"{field}.url", "has an invalid port")
    check_host(parts.hostname, f"{field}.url")
    method = (target.method or "POST").upper()
    if method not in HTTP_METHODS:
        raise _fail(f"{field}.method", f"must be one of {', '.join(sorted(HTTP_METHODS))}")
    if len(target.headers) > MAX_HEADERS:
        raise _fail(f"{field}.headers", f"at most {MAX_HEADERS} entries, got {len(target.headers)}")
    seen: dict[str, str] = {}
    for name in sorted(target.headers):
        where = f"{field}.headers[{name!r}]"
        value = target.headers[name]
        if not _HEADER_NAME.fullmatch(name):
            raise _fail(where, "is not a valid HTTP header name")
        lowered = name.lower()
        if lowered in seen:
            raise _fail(where, f"same header as {seen[lowered]!r} (names are case-insensitive)")
        seen[lowered] = name
        if lowered in _RESERVED_HEADERS or lowered.startswith("sundial-"):
            raise _fail(where, "is set by Sundial or the transport and cannot be overridden")
        if any(ch in value for ch in "\r\n\0") or _has_control(value.replace("\t", "")):
            raise _fail(where, "value must not contain control characters")
        _check_references(where, value)
        _check_kv_size(where, name, value)
    check_auth(target.auth, {k: f"{field}.headers[{v!r}]" for k, v in seen.items()}, field)
    # Unchanged when already normal (the wire's default is filled at conversion): the
    # spec holding it then need not be copied either.
    return target if method == target.method else dataclasses.replace(target, method=method)


def split_address(address: str, field: str) -> Endpoint:
    """Split ``host:port`` (IPv6 in brackets) and check both parts."""
    if not address:
        raise _fail(field, "is required")
    if len(address) > MAX_ADDRESS_CHARS:
        raise _fail(field, f"longer than {MAX_ADDRESS_CHARS} characters")
    try:
        return parse_address(address)
    except AddressError as exc:
        raise _fail(field, exc.problem) from None


def check_host(host: str, field: str) -> None:
    """An IP literal or a syntactically valid DNS name."""
    try:
        netpolicy.check_host(host)
    except AddressError as exc:
        raise _fail(field, exc.problem) from None


def check_grpc_target(target: GrpcTarget, field: str = "target.grpc") -> GrpcTarget:
    """Check a gRPC target."""
    split_address(target.address, f"{field}.address")
    if len(target.metadata) > MAX_HEADERS:
        raise _fail(
            f"{field}.metadata", f"at most {MAX_HEADERS} entries, got {len(target.metadata)}"
        )
    for key in sorted(target.metadata):
        where = f"{field}.metadata[{key!r}]"
        value = target.metadata[key]
        if not _METADATA_KEY.fullmatch(key):
            raise _fail(where, "keys are lowercase a-z, 0-9, '-', '_', '.'")
        if key.startswith("grpc-") or key.endswith("-bin"):
            raise _fail(where, "keys must not start with 'grpc-' or end with '-bin'")
        if key in _RESERVED_METADATA or key.startswith("sundial-"):
            raise _fail(where, "is set by Sundial and cannot be overridden")
        if not all(" " <= ch <= "~" for ch in value):
            raise _fail(where, "value must be printable ASCII")
        _check_references(where, value)
        _check_kv_size(where, key, value)
    check_auth(target.auth, {k: f"{field}.metadata[{k!r}]" for k in target.metadata}, field)
    return target


def check_target(target: Target | None) -> Target:
    """Exactly one target kind, valid; returns it normalised."""
    if target is None:
        raise _fail("target", "one of http or grpc is required")
    if isinstance(target, HttpTarget):
        return check_http_target(target)
    return check_grpc_target(target)


# The operator's rules, the parsing and the resolver are shared with the executor, which
# checks again at call time (sundial.core.netpolicy, sundial.core.egress).
TargetPolicy = AddressPolicy


def protocol_of(target: Target) -> Protocol:
    """Which egress rules apply to ``target``."""
    return Protocol.HTTP if isinstance(target, HttpTarget) else Protocol.GRPC


def _endpoint(
    target: Target, field: str, parsed: dict[Target, Endpoint] | None = None
) -> tuple[str, Endpoint]:
    """The field to blame and the host and port the executor will connect to.

    Args:
        parsed: Endpoints of targets seen before in the same request (filled here).
    """
    where = f"{field}.http.url" if isinstance(target, HttpTarget) else f"{field}.grpc.address"
    try:
        known = parsed.get(target) if parsed is not None else None
    except TypeError:  # unhashable (a headers mapping): parsed on its own
        known, parsed = None, None
    if known is not None:
        return where, known
    if isinstance(target, HttpTarget):
        parts = urlsplit(target.url)
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        endpoint = Endpoint(parts.hostname or "", port)
    else:
        endpoint = split_address(target.address, where)
    if parsed is not None:
        parsed[target] = endpoint
    return where, endpoint


class TargetGuard:
    """Refuses targets whose host is or resolves now to an address the tenant's egress
    policy forbids (docs/design.md section 7).

    An IP literal is judged as it is. A name is resolved: every address must be allowed
    (a name with one public and one private address is refused, since the executor
    could connect to either). A name that does not resolve now (no such name, a
    resolver failure, a timeout) is accepted: a service may be created after its
    schedule, and the check that protects anything is the executor's, on the address it
    connects to at call time.

    Args:
        operator: The operator's deny list and default policy.
        resolve_timeout_s: Bound on each name resolution.
    """

    def __init__(
        self,
        operator: TargetPolicy,
        *,
        resolve_timeout_s: float = 2.0,
        secrets: SecretLookup | None = None,
    ) -> None:
        self.operator = operator
        self._timeout_s = resolve_timeout_s
        self._secrets = secrets

    async def check(
        self, target: Target, policy: EgressPolicy | None = None, field: str = "target"
    ) -> None:
        """Raise InvalidArgument naming ``field``'s url/address if the target is refused.

        Args:
            target: A target already checked by :func:`check_target`.
            policy: The tenant's egress policy in force (None: the operator's default).
            field: Path of the target (``jobs[3].target``).
        """
        await self.check_all([(target, field)], policy)

    async def check_all(
        self, items: Sequence[tuple[Target, str]], policy: EgressPolicy | None = None
    ) -> None:
        """:meth:`check` for many targets; each distinct host is resolved once.

        The problem reported is the first one in ``items`` order, so a batch names the
        lowest failing index.

        Raises:
            InvalidArgument: A host is refused.
        """
        # Each target object once, where it first appears (the jobs of a batch converted
        # from the wire share one object per distinct target): the first problem in
        # `items` order is still the one reported.
        first: dict[int, tuple[Target, str]] = {}
        for target, field in items:
            first.setdefault(id(target), (target, field))
        firsts = list(first.values())
        verdicts = await self.verdicts([target for target, _ in firsts], policy)
        for (target, field), verdict in zip(firsts, verdicts, strict=True):
            if verdict is not None:
                where, _ = _endpoint(target, field)
                raise _fail(where, f"{verdict}; calls to it are not allowed")
        caller = current_credential()
        await check_credentials(firsts, caller.tenant_id if caller else None, self._secrets)

    async def verdicts(
        self, targets: Sequence[Target], policy: EgressPolicy | None = None
    ) -> list[str | None]:
        """Why each target is forbidden now (``"host a.example (10.0.0.7) is ..."``), or
        None where it is allowed or its name does not resolve now."""
        policy = policy if policy is not None else default_policy(self.operator)
        hosts: list[str] = []
        ports: dict[str, int] = {}  # each distinct name, with the port of its first use
        parsed: dict[Target, Endpoint] = {}  # each distinct target's endpoint
        for target in targets:
            _, endpoint = _endpoint(target, "target", parsed)
            host = endpoint.host
            if ip_literal(host) is None:
                host = host.lower()  # names are case-insensitive: one lookup per name
                ports.setdefault(host, endpoint.port)
            hosts.append(host)
        limit = asyncio.Semaphore(16)

        caller = current_credential()
        tenant = caller.tenant_id if caller is not None else None

        async def lookup(host: str, port: int) -> tuple[IPAddress, ...]:
            async with limit:
                return await resolve(
                    host,
                    port,
                    timeout_s=self._timeout_s,
                    resolver=self.operator.resolver,
                    tenant=tenant,  # its lookups wait for its own alone
                )

        # return_exceptions: every failure is retrieved; a failed lookup is no verdict.
        results = await asyncio.gather(
            *(lookup(host, port) for host, port in ports.items()), return_exceptions=True
        )
        resolved = dict(zip(ports, results, strict=True))
        verdicts: list[str | None] = []
        for target, host in zip(targets, hosts, strict=True):
            literal = ip_literal(host)
            found = (literal,) if literal is not None else resolved[host]
            if isinstance(found, ResolveError):
                verdicts.append(None)  # checked at call time
                continue
            if isinstance(found, BaseException):
                raise found
            verdicts.append(self._verdict(policy, protocol_of(target), host, found))
        return verdicts

    def _verdict(
        self,
        policy: EgressPolicy,
        protocol: Protocol,
        host: str,
        addresses: Sequence[IPAddress],
    ) -> str | None:
        for address in addresses:
            reason = judge(self.operator, policy, protocol, host, address)
            if reason is not None:
                shown = host if str(address) == host.strip("[]") else f"{host} ({address})"
                return f"host {shown} is {reason}"
        return None
