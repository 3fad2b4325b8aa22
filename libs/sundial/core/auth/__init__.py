"""Bearer tokens: how every Sundial gRPC API knows its caller (docs/design.md section 7).

Tokens are issued by AdminService (``api_tokens``, stored as their sha256 only) with one
:class:`Role`; each service accepts one role per gRPC service it serves: JobService
TENANT, AdminService ADMIN, the scheduler's RunLedger EXECUTOR. A call presents
``authorization: Bearer <token>`` metadata.

- :func:`bearer` reads the token from a call's metadata (UNAUTHENTICATED when absent).
- :class:`Tokens` resolves a token to its :class:`Credential` with one index probe and
  no cache, so a revoked token stops working at once on every replica of every service.
- :func:`authorize` is both together plus the role check; :class:`RoleInterceptor`
  calls it before any handler runs, so a caller without the right credential learns
  nothing about the request it sent (no existence oracle).
"""

from sundial.core.auth._interceptor import Admitted, Handler, RoleInterceptor, current_credential
from sundial.core.auth._tokens import (
    ALL_SCOPES,
    MAX_TOKEN_CHARS,
    Authenticator,
    Credential,
    Role,
    Scope,
    Tokens,
    authorize,
    bearer,
    token_hash,
)

__all__ = [
    "ALL_SCOPES",
    "MAX_TOKEN_CHARS",
    "Admitted",
    "Authenticator",
    "Credential",
    "Handler",
    "Role",
    "RoleInterceptor",
    "Scope",
    "Tokens",
    "authorize",
    "bearer",
    "current_credential",
    "token_hash",
]
