"""The CLI of call authentication and of Sundial's keys (issue 27), against the API's real
graph: ``sundial jobs create/update`` set a target's Standard Webhooks and identity token
and ``jobs get`` shows them; ``sundial admin identity-keys rotate/list`` and ``sundial
admin secrets rewrap`` after a key-encryption-key rotation."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sundial.cli.app import app
from tests.integration.api.support import ADMIN_TOKEN, SECRET_KEYS, TARGET_URL, Api, StartApi

pytestmark = pytest.mark.timeout(90)

NEW_KEYS = "test-kek-2:" + "bmV3LWtleS1lbmNyeXB0aW9uLWtleS1vZi10ZXN0cyE="


async def run(api: Api, token: str, *args: str, code: int = 0) -> Result:
    """``sundial *args`` in a thread (the API serves on this test's loop)."""
    env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": token, "COLUMNS": "250"}
    result = await asyncio.to_thread(CliRunner().invoke, app, list(args), env=env)
    assert result.exit_code == code, (args, result.output)
    return result


async def as_json(api: Api, token: str, *args: str) -> Any:
    return json.loads((await run(api, token, *args, "-o", "json")).stdout)


def auth_of(job: dict[str, Any]) -> dict[str, Any]:
    return dict(job["target"]["http"].get("auth", {}))


async def test_jobs_create_update_and_get_target_auth(api: Api) -> None:
    token = (await api.tenant("acme")).token
    created = await as_json(
        api,
        token,
        *("jobs", "create", "report", "--cron", "0 3 * * *", "--url", TARGET_URL),
        *("--standard-webhooks", "--identity-token", "--audience", "https://jobs.example.com"),
        *("--token-lifetime", "10m"),
    )
    job_id = created["job"]["job_id"]
    assert auth_of(created["job"]) == {
        "standard_webhooks": True,
        "identity_token": {"audience": "https://jobs.example.com", "lifetime": "600s"},
    }
    shown = (await run(api, token, "jobs", "get", job_id)).stdout
    assert (
        "standard webhooks, identity token (aud https://jobs.example.com, lifetime 10m)" in shown
    ), shown

    # An update changes what its options name and keeps the rest of the auth (and the
    # target): Standard Webhooks off, another audience, the lifetime kept.
    updated = await as_json(
        api, token, "jobs", "update", job_id, "--no-standard-webhooks", "--audience", "aud-2"
    )
    assert updated["job"]["target"]["http"]["url"] == TARGET_URL
    assert auth_of(updated["job"]) == {"identity_token": {"audience": "aud-2", "lifetime": "600s"}}
    # An identity token with the defaults: the target's URL as audience, 5 minutes.
    plain = await as_json(
        api,
        token,
        *("jobs", "create", "plain", "--cron", "0 3 * * *", "--url", TARGET_URL),
        "--identity-token",
    )
    assert auth_of(plain["job"]) == {"identity_token": {"lifetime": "300s"}}
    shown = (await run(api, token, "jobs", "get", plain["job"]["job_id"])).stdout
    assert "identity token (aud the target's URL, lifetime 5m)" in shown, shown
    off = await as_json(api, token, "jobs", "update", job_id, "--no-identity-token")
    assert auth_of(off["job"]) == {}
    lines = (await run(api, token, "jobs", "get", job_id)).stdout.splitlines()
    assert ["target", "auth", "-"] in [line.split() for line in lines], lines

    # Bad input: the API's INVALID_ARGUMENT names the field; a contradiction is refused
    # before any call.
    refused = await run(api, token, "jobs", "update", job_id, "--token-lifetime", "2h", code=1)
    assert "INVALID_ARGUMENT" in refused.output
    assert "target.http.auth.identity_token.lifetime" in refused.output
    contradiction = await run(
        api, token, "jobs", "update", job_id, "--no-identity-token", "--audience", "x", code=1
    )
    assert "--audience" in contradiction.output
    assert (await as_json(api, token, "jobs", "get", job_id))["job"]["version"] == "3"


async def test_identity_keys_rotated_and_listed(api: Api) -> None:
    (first,) = (await as_json(api, ADMIN_TOKEN, "admin", "identity-keys", "list"))["keys"]
    assert (first["signing"], first["published"], first["key_id"]) == (True, True, "test-kek-1")
    assert (await run(api, ADMIN_TOKEN, "admin", "identity-keys", "list", "-o", "name")).stdout == (
        first["kid"] + "\n"
    )
    rotated = await run(api, ADMIN_TOKEN, "admin", "identity-keys", "rotate", "--overlap", "3h")
    new_kid = rotated.stdout.split()[2]
    assert rotated.stdout == f"identity key {new_kid} signs from now on\n"
    keys = (await as_json(api, ADMIN_TOKEN, "admin", "identity-keys", "list"))["keys"]
    assert [(k["kid"], k.get("signing", False), k["published"]) for k in keys] == [
        (new_kid, True, True),
        (first["kid"], False, True),
    ]
    retires = datetime.fromisoformat(keys[1]["retire_time"])
    assert abs(retires - (datetime.now(UTC) + timedelta(hours=3))) < timedelta(minutes=5)
    table = (await run(api, ADMIN_TOKEN, "admin", "identity-keys", "list")).stdout
    assert "signing" in table and "published" in table and "test-kek-1" in table
    refused = await run(
        api, ADMIN_TOKEN, "admin", "identity-keys", "rotate", "--overlap", "10m", code=1
    )
    assert "INVALID_ARGUMENT" in refused.output and "overlap" in refused.output


async def test_secrets_rewrap_after_a_key_encryption_key_rotation(start_api: StartApi) -> None:
    await start_api()  # the first identity key, sealed under the old key
    rotated = await start_api(secret_keys=f"{NEW_KEYS},{SECRET_KEYS}")
    answer = await as_json(rotated, ADMIN_TOKEN, "admin", "secrets", "rewrap")
    assert answer == {"rewrapped": "1", "identity_keys": "1", "key_id": "test-kek-2"}
    table = (await run(rotated, ADMIN_TOKEN, "admin", "secrets", "rewrap")).stdout
    assert "re-wrapped under test-kek-2" in table and "remaining" in table
    (key,) = (await as_json(rotated, ADMIN_TOKEN, "admin", "identity-keys", "list"))["keys"]
    assert key["key_id"] == "test-kek-2"
