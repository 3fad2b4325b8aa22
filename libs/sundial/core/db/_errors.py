"""Database errors translated into Sundial's errors by SQLSTATE, never by message text.

A store wraps its SQL in :func:`translate_db_errors`; the gRPC interceptor then reports
the result with the right status, and what is not translated stays an unexpected error
(INTERNAL with a logged traceback).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Literal, TypeVar

import asyncpg
from asyncpg.exceptions._base import InternalClientError

from sundial.core.errors import (
    Aborted,
    AlreadyExists,
    DeadlineExceeded,
    FailedPrecondition,
    SundialError,
    Unavailable,
)

F = TypeVar("F", bound=Callable[..., Any])

# SQLSTATE -> (error class, message the caller sees). Messages stay generic: PostgreSQL's
# own text can quote other rows' values.
_BY_SQLSTATE: dict[str, tuple[type[SundialError], str]] = {
    "23505": (AlreadyExists, "already exists"),  # unique_violation
    "23503": (FailedPrecondition, "a referenced resource does not exist or is in use"),
    "40001": (Aborted, "concurrent update conflict; retry"),  # serialization_failure
    "40P01": (Aborted, "concurrent update conflict; retry"),  # deadlock_detected
    "55P03": (Aborted, "resource is busy; retry"),  # lock_not_available (lock_timeout)
    "57014": (DeadlineExceeded, "database statement timed out"),  # query_canceled
    "53300": (Unavailable, "database unavailable"),  # too_many_connections
    "57P01": (Unavailable, "database unavailable"),  # admin_shutdown
    "57P02": (Unavailable, "database unavailable"),  # crash_shutdown
    "57P03": (Unavailable, "database unavailable"),  # cannot_connect_now
}
_BY_CLASS: dict[str, tuple[type[SundialError], str]] = {
    "08": (Unavailable, "database unavailable"),  # connection_exception
}


def map_db_error(
    exc: BaseException, constraint_messages: Mapping[str, str] | None = None
) -> SundialError | None:
    """The :class:`SundialError` a database exception means, or None to re-raise as is.

    Args:
        exc: Usually an ``asyncpg.PostgresError`` (mapped by its SQLSTATE) or an
            ``OSError`` (the network: a database block does no file I/O).
        constraint_messages: Caller-facing messages by constraint name, e.g.
            ``{"jobs_tenant_id_name_key": "a job with this name already exists"}``; a
            violated constraint found here replaces the generic message.
    """
    if isinstance(exc, asyncpg.PostgresError):
        sqlstate = getattr(exc, "sqlstate", None) or ""
        found = _BY_SQLSTATE.get(sqlstate) or _BY_CLASS.get(sqlstate[:2])
        if found is None:
            return None
        cls, message = found
        constraint = getattr(exc, "constraint_name", None)
        if constraint_messages and constraint is not None and constraint in constraint_messages:
            message = constraint_messages[constraint]
        return cls(message)
    if isinstance(exc, OSError | asyncpg.InterfaceError | InternalClientError):
        # InterfaceError: the connection was closed under a statement or a commit (a
        # server restart, a proxy cutting it); the outcome is unknown, a retry is right.
        # InternalClientError: the client's protocol state after the server ended the
        # session under it, e.g. a process frozen past idle_in_transaction_session_timeout
        # whose commit then met "another operation is in progress" (a scheduler resumed
        # from SIGSTOP crashed on it); the pool terminates that connection on release.
        return Unavailable("database unavailable")
    return None


# Lower-case: it reads as a function at the call site (`with translate_db_errors():`).
class translate_db_errors:
    """Translate database errors raised inside a block or function into SundialErrors.

    Works as ``with``, ``async with`` and as a decorator of sync or async functions::

        @translate_db_errors(constraint_messages={"jobs_tenant_id_name_key": "..."})
        async def create_job(...): ...

        async with translate_db_errors():
            await conn.execute(...)

    The original exception is kept as ``__cause__``. Untranslated errors pass unchanged.

    Args:
        constraint_messages: See :func:`map_db_error`.
    """

    def __init__(self, constraint_messages: Mapping[str, str] | None = None) -> None:
        self._messages = dict(constraint_messages or {})

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        if exc is None:
            return False
        mapped = map_db_error(exc, self._messages)
        if mapped is None:
            return False
        raise mapped from exc

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        return self.__exit__(exc_type, exc, tb)

    def __call__(self, fn: F) -> F:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with self:
                    return await fn(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]
