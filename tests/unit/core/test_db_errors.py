"""Database errors become Sundial errors by class and SQLSTATE, never by message text."""

from __future__ import annotations

import asyncpg
import pytest
from asyncpg.exceptions._base import InternalClientError

from sundial.core.db import map_db_error
from sundial.core.errors import Aborted, AlreadyExists, Unavailable


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        # A connection closed under a statement or at commit: retryable, never INTERNAL.
        (asyncpg.InterfaceError("connection is closed"), Unavailable),
        (asyncpg.ConnectionDoesNotExistError("connection was closed"), Unavailable),
        (ConnectionResetError("reset by peer"), Unavailable),
        # The protocol's state after the server ended a frozen process's session.
        (
            InternalClientError("cannot switch to state 15; another operation (2) is in progress"),
            Unavailable,
        ),
        (asyncpg.UniqueViolationError("duplicate key"), AlreadyExists),
        (asyncpg.DeadlockDetectedError("deadlock"), Aborted),
    ],
)
def test_connection_loss_and_sqlstates_are_mapped(exc: BaseException, expected: type) -> None:
    mapped = map_db_error(exc)
    assert isinstance(mapped, expected)
    assert "closed" not in str(mapped) and "peer" not in str(mapped)  # generic messages


def test_an_untranslated_error_is_left_alone() -> None:
    assert map_db_error(asyncpg.DataError("bad data")) is None
    assert map_db_error(ValueError("not a database error")) is None
