"""``sundial flow ...`` and the flow options of ``sundial jobs`` (priority, rate-limit
and concurrency keys) against the API's real graph on loopback."""

from __future__ import annotations

import json

import pytest

from sundial.cli.flow import parse_rate, rate_text
from sundial.v1 import flow_pb2
from tests.integration.api.support import Api, Tenant
from tests.integration.api.test_admin_cli import _cli


def _rows(text: str) -> dict[str, list[str]]:
    """A table's rows by their first cell (its header row under "key")."""
    return {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.strip()}


async def test_limits_through_the_cli(api: Api, tenant: Tenant) -> None:
    env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": tenant.token}
    made = await _cli(env, "flow", "set", "crm", "--rate", "600/m", "--burst", "20", "-o", "json")
    assert json.loads(made.stdout)["limit"] | {"update_time": "", "create_time": ""} == {
        "key": "crm",
        "rate_per_second": 10,
        "burst": 20,
        "available_tokens": 20,
        "update_time": "",
        "create_time": "",
    }
    shown = await _cli(env, "flow", "set", "customer=42", "--max-running", "5")
    assert ["max", "running", "5"] in [line.split() for line in shown.stdout.splitlines()]
    await _cli(env, "flow", "set", "slow", "--rate", "30/h", "--max-running", "2")
    table = _rows((await _cli(env, "flow", "list")).stdout)
    assert table["key"] == [
        "rate", "burst", "max", "running", "waiting", "running", "tokens", "blocked", "until",
    ]  # fmt: skip
    assert table["crm"] == ["10/s", "20", "-", "0", "0", "20.0", "-"]
    assert table["customer=42"] == ["-", "-", "5", "0", "0", "-", "-"]
    assert table["slow"] == ["30/h", "1", "2", "0", "0", "1.0", "-"]
    assert (await _cli(env, "flow", "list", "-o", "name")).stdout.split() == [
        "crm",
        "customer=42",
        "slow",
    ]
    # Refusals: from the CLI before any call, and the API's naming the field.
    assert "--rate, --max-running or both" in (await _cli(env, "flow", "set", "k", code=1)).output
    bad_rate = await _cli(env, "flow", "set", "k", "--rate", "fast", code=1)
    assert "--rate: 'fast' is not a rate" in bad_rate.output
    too_fast = await _cli(env, "flow", "set", "k", "--rate", "20000/s", code=1)
    assert "INVALID_ARGUMENT: limit.rate_per_second" in too_fast.output
    # Delete, then again (NOT_FOUND).
    assert "deleted the flow limit of slow" in (await _cli(env, "flow", "delete", "slow")).stdout
    assert "NOT_FOUND" in (await _cli(env, "flow", "delete", "slow", code=1)).output
    listed = await api.jobs.ListFlowLimits(flow_pb2.ListFlowLimitsRequest(), metadata=tenant.md)
    assert [limit.key for limit in listed.limits] == ["crm", "customer=42"]


async def test_a_jobs_flow_options(api: Api, tenant: Tenant) -> None:
    env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": tenant.token}
    created = await _cli(
        env, "jobs", "create", "sync", "--every", "15m", "--url", "http://127.0.0.1:9/sync",
        "--priority", "1", "--concurrency-key", "customer=42", "-o", "json",
    )  # fmt: skip
    job = json.loads(created.stdout)["job"]
    job_id = job["job_id"]
    assert job["policies"]["flow"] == {"priority": 1, "concurrency_key": "customer=42"}
    shown = (await _cli(env, "jobs", "get", job_id)).stdout
    flow = [line.split(None, 1) for line in shown.splitlines() if line.split()[:1] == ["flow"]]
    assert flow == [
        ["flow", "priority 1, rate-limit key (the target origin), concurrency key customer=42"]
    ], shown
    # Each option changes its own field; an empty key goes back to its default.
    await _cli(env, "jobs", "update", job_id, "--rate-limit-key", "crm", "--priority", "4")
    updated = json.loads((await _cli(env, "jobs", "get", job_id, "-o", "json")).stdout)["job"]
    assert updated["policies"]["flow"] == {
        "priority": 4,
        "rate_limit_key": "crm",
        "concurrency_key": "customer=42",
    }
    await _cli(env, "jobs", "update", job_id, "--concurrency-key", "")
    cleared = json.loads((await _cli(env, "jobs", "get", job_id, "-o", "json")).stdout)["job"]
    assert cleared["policies"]["flow"] == {"priority": 4, "rate_limit_key": "crm"}
    refused = await _cli(env, "jobs", "update", job_id, "--priority", "9", code=1)
    assert "INVALID_ARGUMENT: policies.flow.priority" in refused.output


@pytest.mark.parametrize(
    ("text", "rate", "shown"),
    [
        ("50/s", 50.0, "50/s"),
        ("600/m", 10.0, "10/s"),
        ("30/m", 0.5, "30/m"),
        ("1/m", 1 / 60, "1/m"),
        ("30/h", 30 / 3600, "30/h"),
        ("2.5", 2.5, "2.5/s"),
        (".5/s", 0.5, "30/m"),
    ],
)
def test_rates_are_read_and_shown_as_set(text: str, rate: float, shown: str) -> None:
    assert parse_rate(text) == pytest.approx(rate)
    assert rate_text(parse_rate(text)) == shown
