"""Pacing (sundial.executor.pacing.Pacer, and InFlight asking it): while the executor's
event loop lags and another tenant has runs, a tenant starting far more calls than the
least busy one starts at most ``rate`` a second (AIMD on the loop's lateness); a tenant
alone, or tenants sharing about as their weights say, are never slowed. Two tenants
throughout: what the busy one does must not slow the quiet one."""

from __future__ import annotations

import asyncio
import logging

import pytest

from sundial.core.config import ConfigError
from sundial.core.telemetry import EXECUTOR_LOOP_LAG, EXECUTOR_PACED_TENANTS
from sundial.executor.config import ExecutorConfig
from sundial.executor.inflight import InFlight
from sundial.executor.pacing import (
    ACTIVE_S,
    CHUNK_S,
    DECREASE,
    INCREASE,
    MIN_RATE,
    WINDOW_S,
    Pacer,
)
from sundial.run import Completion
from tests.helpers.metrics import meter_and_reader, points

LAG_S = 0.001
LAGGING = 0.005
QUIET = 0.0


def windows(pacer: Pacer, lag_s: float, starts: dict[str, int], count: int = 1) -> None:
    """``count`` windows, each with ``starts`` calls per tenant and the loop at ``lag_s``."""
    for _ in range(count):
        for tenant, n in starts.items():
            pacer.started(tenant, n)
        pacer.window(lag_s)


def test_a_tenant_alone_is_never_paced_however_late_the_loop() -> None:
    pacer = Pacer(LAG_S)
    windows(pacer, LAGGING, {"a": 200}, count=50)
    assert pacer.paced == frozenset() and pacer.rate is None
    assert pacer.allows("a") > 10_000


def test_the_busy_tenant_is_paced_and_the_quiet_one_never() -> None:
    pacer = Pacer(LAG_S)
    # A started 200 calls a window (2,000/s), B 2: A is the busy one.
    windows(pacer, QUIET, {"a": 200, "b": 2}, count=round(ACTIVE_S / WINDOW_S))
    assert pacer.paced == frozenset()  # nobody is slowed while the loop keeps up
    windows(pacer, LAGGING, {"a": 200, "b": 2})
    assert pacer.paced == {"a"}
    assert pacer.rate == pytest.approx(200 / WINDOW_S * DECREASE)
    assert pacer.allows("b") > 10_000
    # A paced tenant starts with no tokens: its first chunk comes after CHUNK_S.
    assert pacer.allows("a") == 0
    windows(pacer, LAGGING, {"a": 5, "b": 2}, count=30)
    assert pacer.rate == MIN_RATE  # halved each lagging window, never below the floor
    assert pacer.paced == {"a"}


def test_a_quiet_tenant_beside_a_quieter_one_is_not_paced_with_the_herd() -> None:
    pacer = Pacer(LAG_S)
    # A's herd, B's 20 runs a second and C's one: B is no herd, and was paced at A's
    # rate only because C started less than half what B did.
    windows(pacer, QUIET, {"a": 2000, "b": 20, "c": 1}, count=round(ACTIVE_S / WINDOW_S))
    windows(pacer, LAGGING, {"a": 2000, "b": 20, "c": 1})
    assert pacer.paced == {"a"}
    assert pacer.allows("b") > 10_000 and pacer.allows("c") > 10_000
    # Two herds beside B: both are paced (the step is below the second of them).
    windows(pacer, LAGGING, {"a": 2000, "d": 1500, "b": 20}, count=round(ACTIVE_S / WINDOW_S))
    assert pacer.paced == {"a", "d"}


def test_with_no_step_between_tenants_the_busiest_alone_is_paced() -> None:
    pacer = Pacer(LAG_S)
    # Each tenant starts under twice the next: no herd stands apart, but the busiest
    # started far more than the least busy.
    shares = {"a": 160, "b": 90, "c": 50, "d": 30, "e": 20}
    windows(pacer, QUIET, shares, count=round(ACTIVE_S / WINDOW_S))
    windows(pacer, LAGGING, shares)
    assert pacer.paced == {"a"}


def test_tokens_come_a_chunk_at_a_time_and_are_spent_by_starts() -> None:
    pacer = Pacer(LAG_S)
    windows(pacer, QUIET, {"a": 100, "b": 1}, count=5)
    windows(pacer, LAGGING, {"a": 100, "b": 1}, count=30)
    assert pacer.rate == MIN_RATE
    chunk = int(MIN_RATE * CHUNK_S)
    assert not pacer.accrue(CHUNK_S / 2)  # half a chunk: nothing to spend yet
    assert pacer.allows("a") == 0
    assert pacer.accrue(CHUNK_S / 2)
    assert pacer.allows("a") == chunk
    pacer.started("a", chunk - 1)
    assert pacer.allows("a") == 1
    # Unused tokens pile up to two chunks at most: a paced tenant idle for a while
    # does not come back with a burst.
    pacer.accrue(10.0)
    assert pacer.allows("a") == 2 * chunk


def test_the_rate_grows_back_and_pacing_ends_when_it_no_longer_binds() -> None:
    pacer = Pacer(LAG_S)
    windows(pacer, QUIET, {"a": 50, "b": 1}, count=5)
    windows(pacer, LAGGING, {"a": 50, "b": 1}, count=2)
    rate = pacer.rate
    assert rate is not None and pacer.paced == {"a"}
    windows(pacer, QUIET, {"a": 10, "b": 1})
    assert pacer.rate == pytest.approx(rate * INCREASE)
    # A keeps starting 10 a window (100/s): once the rate is twice that, it is unpaced.
    windows(pacer, QUIET, {"a": 10, "b": 1}, count=200)
    assert pacer.paced == frozenset() and pacer.rate is None


def test_pacing_ends_once_the_other_tenant_has_been_idle_for_active_s() -> None:
    pacer = Pacer(LAG_S)
    windows(pacer, QUIET, {"a": 100, "b": 1}, count=3)
    windows(pacer, LAGGING, {"a": 100, "b": 1})
    assert pacer.paced == {"a"}
    windows(pacer, LAGGING, {"a": 10}, count=round(ACTIVE_S / WINDOW_S) - 1)
    assert pacer.paced == {"a"}  # B started within ACTIVE_S: still protected
    windows(pacer, LAGGING, {"a": 10})
    assert pacer.paced == frozenset()  # A alone now


def test_weights_set_the_shares() -> None:
    pacer = Pacer(LAG_S)
    # A (weight 3) started 3x what B (weight 1) did: both at their share, neither paced.
    for _ in range(5):
        pacer.started("a", 30, weight=3)
        pacer.started("b", 10, weight=1)
        pacer.window(LAGGING)
    assert pacer.paced == frozenset()
    # Weights 1 and 1 sharing 57/43 (the slots' order is not exact): not paced either,
    # and no rate is kept for nobody.
    windows(pacer, LAGGING, {"a": 57, "b": 43}, count=30)
    assert pacer.paced == frozenset() and pacer.rate is None


def test_a_lag_bound_of_zero_is_no_pacing() -> None:
    with pytest.raises(ConfigError, match="pace_lag_ms"):
        config(pace_lag_ms=-1)
    assert config(pace_lag_ms=0).pace_lag_ms == 0


def config(**settings: float) -> ExecutorConfig:
    return ExecutorConfig(
        nats_url="nats://127.0.0.1:4222",
        ledger_address="127.0.0.1:50051",
        ledger_token="executor-token",
        **settings,  # type: ignore[arg-type]
    )


async def _unused_submit(completion: Completion) -> object:
    raise AssertionError("no run is started in these tests")


async def test_inflight_gives_a_paced_tenant_slots_only_for_its_tokens() -> None:
    pacer = Pacer(LAG_S)
    inflight = InFlight(
        config(max_in_flight=64),
        runner=None,  # type: ignore[arg-type]
        submit=_unused_submit,
        pacer=pacer,
    )
    stop = asyncio.Event()
    # Both tenants start calls; the loop lags: A, over its share, is paced.
    assert await inflight.reserve(20, stop=stop, tenant="a") == 20
    assert await inflight.reserve(1, stop=stop, tenant="b") == 1
    inflight.release(20, "a")
    inflight.release(1, "b")
    pacer.window(LAGGING)
    assert inflight.paced("a") and not inflight.paced("b")
    # A waits for tokens although slots are free; B takes slots at once.
    waiting = asyncio.create_task(inflight.reserve(20, stop=stop, tenant="a"))
    await asyncio.sleep(0)  # the task runs up to its wait
    assert not waiting.done()
    assert await inflight.reserve(5, stop=stop, tenant="b") == 5
    # A chunk of tokens: A's waiting caller gets that many slots, no more.
    assert pacer.accrue(CHUNK_S)
    chunk = pacer.allows("a")
    assert chunk >= 1
    assert pacer.on_tokens is not None
    pacer.on_tokens()
    assert await asyncio.wait_for(waiting, 1.0) == chunk
    assert pacer.allows("a") == 0


def test_pacing_is_visible_in_the_gauges_and_the_log(caplog: pytest.LogCaptureFixture) -> None:
    meter, reader = meter_and_reader()
    pacer = Pacer(LAG_S, meter=meter)
    windows(pacer, QUIET, {"a": 100, "b": 1}, count=3)
    with caplog.at_level(logging.INFO, logger="sundial.executor.pacing"):
        windows(pacer, LAGGING, {"a": 100, "b": 1})
        assert [p.value for p in points(reader, EXECUTOR_PACED_TENANTS)] == [1]
        assert [p.value for p in points(reader, EXECUTOR_LOOP_LAG)] == [LAGGING]
        windows(pacer, LAGGING, {"a": 10}, count=round(ACTIVE_S / WINDOW_S))
        assert [p.value for p in points(reader, EXECUTOR_PACED_TENANTS)] == [0]
    actions = [r.action for r in caplog.records]  # type: ignore[attr-defined]
    assert actions == ["pace.start", "pace.end"]
    assert "pacing the call starts of a at 500 a second" in caplog.records[0].getMessage()
