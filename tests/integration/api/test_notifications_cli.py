"""``sundial notifications ...`` and the failure-policy flag of ``sundial jobs`` against
the API's real graph on loopback."""

from __future__ import annotations

import json

from tests.integration.api.support import Api
from tests.integration.api.test_admin_cli import _cli


async def test_channels_through_the_cli(api: Api) -> None:
    acme = await api.tenant("acme")
    env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": acme.token}
    made = json.loads(
        (
            await _cli(
                env,
                *("notifications", "create", "ops", "--url", "http://127.0.0.1:9/n"),
                *("--event", "dead-run", "--event", "auto-paused", "--digest", "5m", "-o", "json"),
            )
        ).stdout
    )["channel"]
    channel_id = made["channel_id"]
    assert made["event_kinds"] == [
        "NOTIFICATION_EVENT_KIND_DEAD_RUN",
        "NOTIFICATION_EVENT_KIND_AUTO_PAUSED",
    ]
    shown = (await _cli(env, "notifications", "get", channel_id)).stdout
    assert "dead-run, auto-paused" in shown and "5m" in shown
    listed = (await _cli(env, "notifications", "list", "-o", "wide")).stdout
    assert "ops" in listed and "POST http://127.0.0.1:9/n" in listed
    assert (await _cli(env, "notifications", "list", "-o", "name")).stdout.split() == [channel_id]
    updated = json.loads(
        (
            await _cli(
                env, "notifications", "update", channel_id, "--event", "late-run", "-o", "json"
            )
        ).stdout
    )["channel"]
    assert updated["event_kinds"] == ["NOTIFICATION_EVENT_KIND_LATE_RUN"]
    assert updated["version"] == "2"
    refused = await _cli(
        env,
        "notifications",
        "create",
        "x",
        "--url",
        "http://10.0.0.1/",
        "--event",
        "dead-run",
        code=1,
    )
    assert "channel.target.http.url" in refused.stderr
    bad = await _cli(
        env, "notifications", "create", "x", "--url", "http://a/", "--event", "boom", code=1
    )
    assert "--event" in bad.stderr
    await _cli(env, "notifications", "delete", channel_id)
    assert (await _cli(env, "notifications", "list", "-o", "name")).stdout == ""


async def test_the_failure_policy_flag_and_its_display(api: Api) -> None:
    acme = await api.tenant("acme")
    env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": acme.token}
    made = json.loads(
        (
            await _cli(
                env,
                *("jobs", "create", "nightly", "--cron", "0 3 * * *"),
                *("--url", "http://127.0.0.1:9/h", "--pause-after-dead", "3", "-o", "json"),
            )
        ).stdout
    )["job"]
    assert made["policies"]["failure"] == {"pause_after_consecutive_dead": 3}
    shown = (await _cli(env, "jobs", "get", made["uid"])).stdout
    assert "pause after 3 consecutive dead runs" in shown
    await _cli(env, "jobs", "update", made["uid"], "--pause-after-dead", "0")
    described = (await _cli(env, "jobs", "describe", made["uid"])).stdout
    assert "never pause" in described
    refused = await _cli(env, "jobs", "update", made["uid"], "--pause-after-dead", "1001", code=1)
    assert "policies.failure.pause_after_consecutive_dead" in refused.stderr
