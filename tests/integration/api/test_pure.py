"""Pure pieces of the API service that need no server: page tokens, prefix bounds, the
SSRF address policy and target guard (with a fake resolver), update masks, new job
ids."""

from __future__ import annotations

import ipaddress
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from sundial.api import slo
from sundial.api.jobs._create import new_job_ids
from sundial.api.jobs._read import prefix_upper_bound
from sundial.api.kit import UpdateMask, check_expected_version, paging, require_version
from sundial.api.model import MisfireRecord
from sundial.api.servicer import check_update_mask
from sundial.api.validation import TargetGuard, TargetPolicy
from sundial.core.errors import InvalidArgument, SundialError
from sundial.run import GrpcTarget, HttpTarget
from tests.helpers.dns_server import DnsServer


@pytest.mark.parametrize(
    ("prefix", "bound"),
    [
        ("a", "b"),
        ("crm-", "crm."),
        ("z\u00e9", "z\u00ea"),
        ("a\U0010ffff", "b"),
        ("\U0010ffff", None),
        ("x\ud7ff", "x\ue000"),
    ],
)
def test_prefix_upper_bound(prefix: str, bound: str | None) -> None:
    assert prefix_upper_bound(prefix) == bound
    if bound is not None:
        # Every string with the prefix sorts below the bound in UTF-8 byte order.
        for suffix in ("", "\U0010ffff" * 3, "zzz"):
            assert (prefix + suffix).encode() < bound.encode()


def test_page_tokens_round_trip_and_are_bound_to_filters() -> None:
    fingerprint = paging.fingerprint("jobs", {"prefix": "a"})
    text = (paging.Text(200),)
    token = paging.encode(["name-9"], fingerprint)
    assert paging.decode(token, fingerprint, text) == ("name-9",)
    assert paging.decode("", fingerprint, text) is None
    with pytest.raises(InvalidArgument, match="other filters"):
        paging.decode(token, paging.fingerprint("jobs", {"prefix": "b"}), text)
    for garbage in ("%%%", "bm90IGpzb24", paging.encode([], fingerprint)[:-3]):
        with pytest.raises(InvalidArgument, match="page_token"):
            paging.decode(garbage, fingerprint, text)


def test_page_tokens_carry_instants_in_utc_and_uuids() -> None:
    fingerprint = paging.fingerprint("tokens", {})
    at = datetime(2026, 3, 8, 2, 30, 0, 123456, tzinfo=timezone(timedelta(hours=-5)))
    token_id = uuid.uuid4()
    token = paging.encode([at, token_id], fingerprint)
    decoded = paging.decode(token, fingerprint, (paging.INSTANT, paging.UUID))
    assert decoded == (at, token_id)
    assert decoded is not None and decoded[0].tzinfo is UTC
    # A cursor of the wrong length is as invalid as one of the wrong kinds.
    with pytest.raises(InvalidArgument, match=r"^page_token: is not a valid page token$"):
        paging.decode(token, fingerprint, (paging.INSTANT,))


@pytest.mark.parametrize(
    ("address", "strict", "loopback", "private"),
    [
        ("93.184.216.34", None, None, None),
        ("2606:4700::1111", None, None, None),
        ("127.0.0.1", "loopback", None, "loopback"),
        ("::1", "loopback", None, "loopback"),
        ("::ffff:127.0.0.1", "loopback", None, "loopback"),
        ("10.1.2.3", "private", "private", None),
        ("100.64.1.1", "private", "private", None),
        ("169.254.3.4", "link-local", "link-local", None),
        ("fe80::1", "link-local", "link-local", None),
        ("fc00::5", "private", "private", None),
        ("64:ff9b::a01:203", "private", "private", None),  # NAT64 of 10.1.2.3
        ("169.254.169.254", "metadata", "metadata", "metadata"),
        ("fd00:ec2::254", "metadata", "metadata", "metadata"),
        ("0.0.0.0", "unspecified", "unspecified", "unspecified"),
        ("224.0.0.251", "multicast", "multicast", "multicast"),
        ("240.0.0.1", "reserved", "reserved", "reserved"),
    ],
)
def test_target_policy(
    address: str, strict: str | None, loopback: str | None, private: str | None
) -> None:
    ip = ipaddress.ip_address(address)
    for policy, expected in (
        (TargetPolicy(), strict),
        (TargetPolicy(allow_loopback=True), loopback),
        (TargetPolicy(allow_private=True), private),
    ):
        reason = policy.refusal(ip)
        if expected is None:
            assert reason is None, (policy, reason)
        else:
            assert reason is not None and expected in reason, (policy, reason)


def test_update_mask_paths() -> None:
    ok = ["name", "schedule.dst.gap", "policies.retry.max_attempts", "target.http.headers"]
    assert check_update_mask(ok) == ok
    with pytest.raises(InvalidArgument, match="PauseJob"):
        check_update_mask(["paused"])


async def test_target_guard_resolves_each_name_once_as_the_executor_dials_it(
    dns_server: DnsServer,
) -> None:
    dns_server.answers["example.com"] = ["93.184.216.34"]
    await TargetGuard(TargetPolicy()).check_all(
        [
            (HttpTarget("https://Example.COM./x"), "jobs[0].target"),
            (GrpcTarget("EXAMPLE.com.:50051"), "jobs[1].target"),
            (HttpTarget("http://example.com/"), "jobs[2].target"),
            (HttpTarget("http://93.184.216.34/"), "jobs[3].target"),
        ]
    )
    # Names are case-insensitive (one lookup), but "example.com." is the absolute name
    # the executor resolves, not "example.com" (which search domains may extend): two
    # lookups, which reach the server as the same name.
    assert dns_server.order == ["example.com", "example.com"]


async def test_target_guard_reports_the_first_problem_in_item_order(
    dns_server: DnsServer,
) -> None:
    dns_server.answers["mixed.example"] = ["93.184.216.34", "10.0.0.7"]
    dns_server.failing.add("flaky.example")  # gone.example: NXDOMAIN
    guard = TargetGuard(TargetPolicy())
    with pytest.raises(InvalidArgument) as refused:
        await guard.check_all(
            [
                (HttpTarget("http://93.184.216.34/"), "jobs[0].target"),
                (GrpcTarget("mixed.example:443"), "jobs[1].target"),
                (HttpTarget("http://gone.example/"), "jobs[2].target"),
            ]
        )
    assert str(refused.value) == (
        "jobs[1].target.grpc.address: host mixed.example (10.0.0.7) is a private or "
        "non-public address the tenant's egress policy does not allow for grpc targets; "
        "calls to it are not allowed"
    )
    # A name that does not resolve now, or not yet (a resolver failure), is accepted:
    # the executor checks the addresses it connects to at call time.
    await guard.check(HttpTarget("http://gone.example/"))
    await guard.check(GrpcTarget("flaky.example:443"))


# -- the SLO's skipped misfires in a window (docs/design.md section 11) --------------------

_M0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("start_minutes", "expected"),
    [
        (-10, 5),  # the whole span is in the window
        (0, 5),  # the window starts at the first skipped occurrence
        (0.5, 4),  # just after it: 12:01 .. 12:04
        (2, 3),
        (3.99, 1),
        (4, 1),  # the last one alone
        (4.01, 0),
        (60, 0),
    ],
)
def test_missed_occurrences_of_a_record_cut_by_the_window(
    start_minutes: float, expected: int
) -> None:
    # Five skipped occurrences at 12:00, 12:01 ... 12:04.
    record = MisfireRecord(_M0, _M0 + timedelta(minutes=4), 5)
    assert slo.missed_since(record, _M0 + timedelta(minutes=start_minutes)) == expected


def test_one_skipped_occurrence_is_in_or_out() -> None:
    record = MisfireRecord(_M0, _M0, 1)
    assert slo.missed_since(record, _M0) == 1
    assert slo.missed_since(record, _M0 + timedelta(microseconds=1)) == 0


def test_slo_windows_default_and_order() -> None:
    assert slo.check_windows([]) == (
        timedelta(hours=1),
        timedelta(hours=24),
        timedelta(days=7),
    )
    asked = [timedelta(days=30), timedelta(minutes=1)]
    assert slo.check_windows(asked) == tuple(asked)  # kept in the asked order


def test_an_empty_update_mask_names_every_updatable_field() -> None:
    """The kit's one rule, for every Update call (job_service.proto UPDATE MASKS)."""
    assert check_update_mask([]) == [
        "name",
        "description",
        "schedule",
        "target",
        "payload",
        "policies",
        "labels",
    ]
    mask = UpdateMask(("a", "b"), subpaths=("b.c",))
    assert mask.paths([]) == ["a", "b"]
    assert mask.paths(["b.c"]) == ["b.c"]
    with pytest.raises(InvalidArgument) as refused:
        mask.paths(["a", "z"])
    assert refused.value.field == "update_mask.paths[1]"


def test_expected_version_rule() -> None:
    assert check_expected_version(0) == 0
    require_version("job", "j", 4, 0)
    require_version("job", "j", 4, 4)
    with pytest.raises(InvalidArgument):
        check_expected_version(-1)
    with pytest.raises(SundialError) as stale:
        require_version("job", "j", 4, 3)
    assert stale.value.reason == "VERSION_MISMATCH"


def test_number_page_keys_round_trip() -> None:
    pager = paging.Pager("things", (paging.NUMBER,))
    cursor = pager.open(2, "")
    page = cursor.page([1, 2, 3], lambda n: [n])
    assert list(page.items) == [1, 2]
    assert pager.open(2, page.next_page_token).after == (2,)
    forged = paging.encode(["x1"], cursor.fingerprint)
    with pytest.raises(InvalidArgument):
        pager.open(2, forged)


def test_number_page_keys_stay_within_bigint() -> None:
    pager = paging.Pager("things", (paging.NUMBER,))
    fingerprint = pager.open(2, "").fingerprint
    assert pager.open(2, paging.encode([2**63 - 1], fingerprint)).after == (2**63 - 1,)
    with pytest.raises(InvalidArgument):
        pager.open(2, paging.encode([2**63], fingerprint))


def test_new_job_ids_are_distinct_version_4_uuids() -> None:
    ids = new_job_ids(2_000)
    assert len(set(ids)) == 2_000
    for job_id in ids:
        assert isinstance(job_id, uuid.UUID)
        assert job_id.version == 4 and job_id.variant == uuid.RFC_4122
        # The same value as the standard type: equal, hashing alike, the same text.
        same = uuid.UUID(str(job_id))
        assert same == job_id and hash(same) == hash(job_id) and str(same) == str(job_id)
    # Each id's other bits are random: every hex digit outside the version's and the
    # variant's takes many values across the ids.
    for at in (0, 7, 15, 21, 35):
        assert len({str(job_id)[at] for job_id in ids}) >= 12
