"""Waiting for a dependency: the backoff, the address in the log, what is retried."""

from __future__ import annotations

import logging

import pytest

from sundial.core.dependency import Backoff, Dependency, safe_address


def test_backoff_doubles_up_to_its_ceiling_with_half_of_it_jittered() -> None:
    backoff = Backoff(initial_s=0.25, max_s=5.0, multiplier=2.0)
    assert [backoff.delay_s(n, rand=lambda: 1.0) for n in range(1, 8)] == [
        0.25,
        0.5,
        1.0,
        2.0,
        4.0,
        5.0,
        5.0,
    ]
    assert backoff.delay_s(3, rand=lambda: 0.0) == 0.5  # never less than half
    assert backoff.delay_s(10_000, rand=lambda: 1.0) == 5.0  # no overflow, still capped


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://sundial:s3cret@db:5432/sundial?sslpassword=x", "db:5432/sundial"),
        ("postgresql://db1:5432,db2:5432/sundial", "db1:5432,db2:5432/sundial"),
        ("nats://user:pw@nats-0:4222,nats://nats-1:4222", "nats-0:4222,nats://nats-1:4222"),
        ("etcd-0:2379", "etcd-0:2379"),
    ],
)
def test_safe_address_drops_credentials_and_query(url: str, shown: str) -> None:
    assert safe_address(url) == shown


async def test_transient_errors_are_retried_and_logged_once_per_attempt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures = [ConnectionRefusedError("refused"), TimeoutError()]

    async def attempt() -> str:
        if failures:
            raise failures.pop(0)
        return "connected"

    dependency = Dependency("PostgreSQL", "db:5432/sundial", (OSError,))
    with caplog.at_level(logging.INFO, logger="sundial.core.dependency"):
        result = await dependency.wait(attempt, backoff=Backoff(initial_s=0.001, max_s=0.002))
    assert result == "connected"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.__dict__["attempt"] for r in warnings] == [1, 2]
    assert "ConnectionRefusedError: refused" in warnings[0].getMessage()
    assert "db:5432/sundial" in warnings[0].getMessage()
    assert caplog.records[-1].__dict__["action"] == "dependency.up"


async def test_other_errors_are_raised_at_once() -> None:
    calls = 0

    async def attempt() -> None:
        nonlocal calls
        calls += 1
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        await Dependency("etcd", "etcd:2379", (OSError,)).wait(attempt)
    assert calls == 1
