"""Admission's pure rules (sundial.scheduler.admission; docs/design.md section 7, "Flow
control"): the tenant window, priority order, held rate-limit keys, token buckets and
the default rate-limit key."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from sundial.run import GrpcTarget, HttpTarget, RunStatus
from sundial.scheduler.admission import (
    KeyBucket,
    TenantFlow,
    admit_at_dispatch,
    interleave,
    origin_of,
    take_tokens,
)
from sundial.scheduler.model import PlannedRun

NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)


def run(
    tenant: str = "a", *, priority: int = 3, due_s: float = 0.0, rate_key: str = ""
) -> PlannedRun:
    due = NOW + timedelta(seconds=due_s)
    return PlannedRun(
        job_id=uuid.uuid4(),
        scheduled_at=due,
        tenant_id=tenant,
        partition_id=0,
        status=RunStatus.QUEUED,
        due_at=due,
        lateness_ms=0,
        priority=priority,
        rate_key=rate_key,
    )


def bucket(
    rate_per_s: float = 10.0,
    burst: int = 5,
    tokens: float = 0.0,
    *,
    ago_s: float = 0.0,
    blocked_for_s: float | None = None,
) -> KeyBucket:
    """A bucket holding ``tokens`` as of ``ago_s`` seconds before NOW."""
    return KeyBucket(
        rate_per_s,
        burst,
        tokens,
        NOW - timedelta(seconds=ago_s),
        None if blocked_for_s is None else NOW + timedelta(seconds=blocked_for_s),
    )


# --- the window --------------------------------------------------------------------------


def test_runs_past_the_windows_free_room_wait() -> None:
    runs = [run(due_s=-i) for i in range(5)]
    wait = admit_at_dispatch(runs, {"a": TenantFlow(window=4, in_flight=2)}, NOW)
    # The two oldest due go (two free places), the others wait, not throttled: it is
    # the tenant's fair share that holds them, not a limit of its own.
    assert wait == dict.fromkeys(runs[:3], False)


def test_a_full_window_holds_every_run_and_an_overfull_one_too() -> None:
    runs = [run(), run()]
    full = TenantFlow(window=4, in_flight=4)
    assert admit_at_dispatch(runs, {"a": full}, NOW) == dict.fromkeys(runs, False)
    overfull = TenantFlow(window=4, in_flight=9)
    assert admit_at_dispatch(runs, {"a": overfull}, NOW) == dict.fromkeys(runs, False)
    assert TenantFlow(window=4, in_flight=9).free == 0


def test_a_tenant_with_waiting_runs_queues_new_ones_behind_them_whatever_its_room() -> None:
    runs = [run(priority=1)]
    flow = TenantFlow(window=100, in_flight=0, waiting=True)
    assert admit_at_dispatch(runs, {"a": flow}, NOW) == dict.fromkeys(runs, False)


def test_each_tenant_has_its_own_window_and_one_without_flow_is_not_limited() -> None:
    busy = [run("busy") for _ in range(3)]
    quiet = [run("quiet") for _ in range(3)]
    unknown = [run("unknown") for _ in range(50)]
    flows = {"busy": TenantFlow(window=3, in_flight=3), "quiet": TenantFlow(3, 0)}
    assert admit_at_dispatch(busy + quiet + unknown, flows, NOW) == dict.fromkeys(busy, False)


# --- priority ------------------------------------------------------------------------------


def test_the_window_takes_the_highest_priority_first_then_the_oldest_due() -> None:
    low_old = run(priority=5, due_s=-10)
    high_new = run(priority=1, due_s=0)
    high_old = run(priority=1, due_s=-1)
    middle = run(priority=3, due_s=-5)
    runs = [low_old, high_new, middle, high_old]
    wait = admit_at_dispatch(runs, {"a": TenantFlow(window=2, in_flight=0)}, NOW)
    assert set(wait) == {low_old, middle}
    wait = admit_at_dispatch(runs, {"a": TenantFlow(window=3, in_flight=0)}, NOW)
    assert set(wait) == {low_old}


# --- rate-limit keys -------------------------------------------------------------------------


def test_a_run_of_a_rate_limited_key_always_waits_and_leaves_its_room_to_others() -> None:
    limited = run(priority=1, rate_key="crm")
    other = run(priority=5, rate_key="erp")
    flow = TenantFlow(window=1, in_flight=0, keys={"crm": bucket(tokens=5)})
    # Even with tokens in its bucket: the sweeper spends them, in priority order. It
    # waits throttled: for its tenant's own limit.
    assert admit_at_dispatch([limited, other], {"a": flow}, NOW) == {limited: True}


def test_a_run_of_a_held_key_is_throttled_even_when_the_window_is_full_too() -> None:
    limited, other = run(rate_key="crm"), run(rate_key="erp")
    flow = TenantFlow(window=1, in_flight=1, keys={"crm": bucket()})
    assert admit_at_dispatch([limited, other], {"a": flow}, NOW) == {limited: True, other: False}


def test_a_key_blocked_by_retry_after_holds_its_runs_until_then_only() -> None:
    blocked = TenantFlow(window=10, in_flight=0, keys={"crm": bucket(0, 0, blocked_for_s=3)})
    over = TenantFlow(window=10, in_flight=0, keys={"crm": bucket(0, 0, blocked_for_s=-1)})
    runs = [run(rate_key="crm")]
    assert admit_at_dispatch(runs, {"a": blocked}, NOW) == dict.fromkeys(runs, True)
    assert admit_at_dispatch(runs, {"a": over}, NOW) == {}
    assert blocked.held_keys(NOW) == {"crm"} and over.held_keys(NOW) == frozenset()


# --- token buckets -------------------------------------------------------------------------


def test_a_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    assert bucket(10, 5, 0, ago_s=0).available(NOW) == 0
    assert bucket(10, 5, 0, ago_s=0.25).available(NOW) == pytest.approx(2.5)
    assert bucket(10, 5, 1.5, ago_s=0.1).available(NOW) == pytest.approx(2.5)
    assert bucket(10, 5, 0, ago_s=60).available(NOW) == 5


def test_a_bucket_without_burst_holds_one_seconds_worth_and_at_least_one() -> None:
    assert bucket(20, 0).size == 20
    assert bucket(2.5, 0).size == 3
    assert bucket(0.2, 0).size == 1
    assert bucket(0.2, 0, ago_s=3600).available(NOW) == 1


def test_a_refill_time_ahead_of_now_adds_nothing() -> None:
    # Another scheduler's clock a little ahead wrote refilled_at.
    assert bucket(10, 5, 1, ago_s=-2).available(NOW) == 1


def test_a_blocked_bucket_has_nothing_and_a_key_without_rate_is_unbounded() -> None:
    assert bucket(10, 5, 5, blocked_for_s=1).available(NOW) == 0
    assert bucket(10, 5, 5, blocked_for_s=-1).available(NOW) == 5
    assert math.isinf(bucket(0, 0).available(NOW))
    assert not bucket(0, 0).holds(NOW) and bucket(0, 0, blocked_for_s=1).holds(NOW)
    assert bucket(0.5, 0).holds(NOW)


def test_take_tokens_takes_whole_tokens_and_keeps_the_fraction() -> None:
    assert take_tokens(bucket(10, 5, 0, ago_s=0.25), 10, NOW) == (2, pytest.approx(0.5))
    assert take_tokens(bucket(10, 5, 0, ago_s=0.25), 1, NOW) == (1, pytest.approx(1.5))
    assert take_tokens(bucket(10, 5, 0, ago_s=60), 100, NOW) == (5, 0)
    assert take_tokens(bucket(10, 5, 0, ago_s=0.05), 3, NOW) == (0, pytest.approx(0.5))
    assert take_tokens(bucket(10, 5, 5, blocked_for_s=2), 3, NOW) == (0, 0)


def test_take_tokens_of_an_unlimited_key_takes_all_and_leaves_the_bucket_alone() -> None:
    assert take_tokens(bucket(0, 0, 0.75), 42, NOW) == (42, 0.75)


def test_tokens_taken_over_passes_never_exceed_burst_plus_rate_times_time() -> None:
    state = bucket(20, 5, 5, ago_s=0)
    taken = 0
    for step in range(1, 101):  # a pass every 30 ms, each wanting 3
        now = NOW + timedelta(seconds=0.03 * step)
        got, left = take_tokens(state, 3, now)
        taken += got
        state = KeyBucket(state.rate_per_s, state.burst, left, now)
        assert taken <= 5 + 20 * 0.03 * step + 1e-9
    # And the rate is reached: fractions carry over, only the last one is not whole yet.
    assert taken >= 5 + 20 * 3 - 1


# --- the default key -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://CRM.example.com/hook?x=1", "https://crm.example.com:443"),
        ("http://crm.example.com/hook", "http://crm.example.com:80"),
        ("http://127.0.0.1:8080/a/b", "http://127.0.0.1:8080"),
        ("https://crm.example.com:8443", "https://crm.example.com:8443"),
        ("http://[::1]:9000/x", "http://::1:9000"),
    ],
)
def test_the_default_key_of_an_http_target_is_its_origin(url: str, origin: str) -> None:
    assert origin_of(HttpTarget(url)) == origin


def test_two_urls_of_one_origin_share_the_key() -> None:
    assert origin_of(HttpTarget("https://a.example.com/x")) == origin_of(
        HttpTarget("https://a.example.com:443/y")
    )


def test_the_default_key_of_a_grpc_target_is_its_address_and_none_has_none() -> None:
    assert origin_of(GrpcTarget("worker.internal:50051")) == "worker.internal:50051"
    assert origin_of(None) == ""


def test_a_url_whose_port_does_not_parse_is_its_own_key() -> None:
    assert origin_of(HttpTarget("http://example.com:99999/x")) == "http://example.com:99999/x"


# --- one pass's message ----------------------------------------------------------------------


def test_interleave_spreads_each_group_evenly_and_keeps_its_order() -> None:
    one = ["c1"]
    three = ["d1", "d2", "d3"]
    assert interleave([one, three]) == ["d1", "c1", "d2", "d3"]
    assert interleave([three, one]) == ["d1", "d2", "c1", "d3"]  # a tie: the first group
    merged = interleave([[f"c{i}" for i in range(4)], [f"d{i}" for i in range(12)]])
    assert [x for x in merged if x[0] == "d"] == [f"d{i}" for i in range(12)]
    # Neither tenant's runs wait at the message's tail: in every prefix each has about
    # its proportion.
    for n in range(1, 17):
        assert abs(sum(x[0] == "c" for x in merged[:n]) - n / 4) <= 1


def test_a_groups_average_place_does_not_depend_on_its_place_among_the_groups() -> None:
    def mean_place(merged: list[str], group: str) -> float:
        places = [i for i, x in enumerate(merged) if x[0] == group]
        return sum(places) / len(places)

    c = [f"c{i}" for i in range(4)]
    d = [f"d{i}" for i in range(12)]
    for merged in (interleave([c, d]), interleave([d, c])):
        assert abs(mean_place(merged, "c") - mean_place(merged, "d")) <= 1


def test_interleave_of_nothing_and_of_one_group() -> None:
    assert interleave([]) == []
    assert interleave([[], ["a", "b"]]) == ["a", "b"]
    assert interleave([["a", "b", "c"]]) == ["a", "b", "c"]
