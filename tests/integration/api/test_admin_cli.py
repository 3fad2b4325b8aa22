"""``sundial admin tokens ...`` against the API's real graph on loopback: an operator
issues an executor token, finds it in the listing, revokes it, and it stops working at
once. The create command also runs as a real process, the way a script captures it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
from typer.testing import CliRunner, Result

from sundial.cli.app import app
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import ADMIN_TOKEN, Api, bearer, expect_error


async def _cli(env: dict[str, str], *args: str, code: int = 0) -> Result:
    """Run ``sundial *args`` in a thread (the API serves on this test's loop)."""
    result = await asyncio.to_thread(
        CliRunner().invoke, app, list(args), env={**env, "COLUMNS": "250"}
    )
    assert result.exit_code == code, (args, result.output)
    return result


async def _listed(env: dict[str, str], *args: str) -> dict[str, Any]:
    """``tokens list -o json`` as {token_id: token}."""
    listing = await _cli(env, "admin", "tokens", "list", "-o", "json", *args)
    return {token["token_id"]: token for token in json.loads(listing.stdout).get("tokens", [])}


async def test_executor_token_issued_listed_and_revoked(api: Api) -> None:
    env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": ADMIN_TOKEN}

    # As a script runs it: `SECRET=$(sundial admin tokens create ...)`. stdout holds the
    # secret alone, without a newline (not a terminal); the note goes to stderr.
    created = await asyncio.to_thread(
        subprocess.run,
        [
            *(sys.executable, "-m", "sundial.cli", "admin", "tokens", "create"),
            *("--role", "executor", "--description", "executors, eu-1", "--expires", "30d"),
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert created.returncode == 0, created.stderr
    secret = created.stdout
    assert secret and secret.isascii() and secret.isprintable() and " " not in secret
    assert "executor" in created.stderr and "only this once" in created.stderr
    assert secret not in created.stderr

    [(token_id, token)] = [
        (tid, t) for tid, t in (await _listed(env)).items() if t["description"] == "executors, eu-1"
    ]
    assert token["role"] == "TOKEN_ROLE_EXECUTOR" and not token.get("tenant_id")
    assert secret.startswith(token["prefix"]) and "revoke_time" not in token
    expires = datetime.fromisoformat(token["expire_time"])
    assert abs(expires - (datetime.now(UTC) + timedelta(days=30))) < timedelta(minutes=5)
    table = (await _cli(env, "admin", "tokens", "list")).stdout
    assert token_id in table and "executor" in table and "executors, eu-1" in table
    assert secret not in table

    # The token is real and an executor's: JobService knows it and refuses it.
    jobs_call = api.jobs.ListJobs(pb.ListJobsRequest(), metadata=bearer(secret))
    await expect_error(jobs_call, grpc.StatusCode.PERMISSION_DENIED)

    revoked = await _cli(env, "admin", "tokens", "revoke", token_id)
    assert f"revoked {token_id}" in revoked.stdout and token["prefix"] in revoked.stdout
    # At once: the next call with it is unauthenticated.
    jobs_call = api.jobs.ListJobs(pb.ListJobsRequest(), metadata=bearer(secret))
    await expect_error(jobs_call, grpc.StatusCode.UNAUTHENTICATED)
    assert token_id not in await _listed(env)
    assert "revoke_time" in (await _listed(env, "--include-revoked"))[token_id]
    # Revoking again changes nothing and still succeeds.
    again = await _cli(env, "admin", "tokens", "revoke", token_id, "-o", "json")
    assert json.loads(again.stdout)["token"]["revoke_time"]


async def test_tenant_tokens_and_refusals(api: Api) -> None:
    env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": ADMIN_TOKEN}
    acme = await api.tenant("acme")

    created = json.loads(
        (
            await _cli(
                env,
                *("admin", "tokens", "create", "--role", "tenant", "--tenant", "acme"),
                *("--description", "billing backend", "-o", "json"),
            )
        ).stdout
    )
    assert created["token"]["tenant_id"] == "acme" and created["secret"]
    # The new tenant token works for its tenant.
    await api.jobs.ListJobs(pb.ListJobsRequest(), metadata=bearer(created["secret"]))
    only_acme = await _listed(env, "--tenant", "acme")
    assert created["token"]["token_id"] in only_acme
    assert {t["tenant_id"] for t in only_acme.values()} == {"acme"}
    assert created["secret"] not in json.dumps(await _listed(env))

    # Refused before any call: the role and --tenant must agree.
    missing = await _cli(
        env, "admin", "tokens", "create", "--role", "tenant", "--description", "x", code=1
    )
    assert "--tenant is required" in missing.output
    stray = await _cli(
        env,
        *("admin", "tokens", "create", "--role", "executor", "--tenant", "acme"),
        *("--description", "x"),
        code=1,
    )
    assert "--tenant is only for --role tenant" in stray.output
    bad_expiry = await _cli(
        env,
        *("admin", "tokens", "create", "--role", "admin", "--description", "x"),
        *("--expires", "soon"),
        code=1,
    )
    assert "--expires" in bad_expiry.output
    # The API's answers: a past expiry, a tenant token instead of an admin one.
    past = await _cli(
        env,
        *("admin", "tokens", "create", "--role", "admin", "--description", "x"),
        *("--expires", "2020-01-01T00:00:00Z"),
        code=1,
    )
    assert "INVALID_ARGUMENT" in past.stderr and not past.stdout
    as_tenant = await _cli({**env, "SUNDIAL_TOKEN": acme.token}, "admin", "tokens", "list", code=1)
    assert "PERMISSION_DENIED" in as_tenant.stderr
    assert acme.token not in as_tenant.output
    no_token = await _cli({**env, "SUNDIAL_TOKEN": ""}, "admin", "tokens", "list", code=1)
    assert "SUNDIAL_TOKEN" in no_token.output


async def _tenant(env: dict[str, str], tenant_id: str) -> dict[str, Any]:
    return json.loads((await _cli(env, "admin", "tenants", "get", tenant_id, "-o", "json")).stdout)


async def test_tenants_created_listed_updated_and_their_secret_rotated(api: Api) -> None:
    env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": ADMIN_TOKEN}
    created = await _cli(env, "admin", "tenants", "create", "globex", "--max-jobs", "50")
    first_secret = created.stdout
    # The secret alone on stdout (no newline into a pipe), the note on stderr.
    assert first_secret and " " not in first_secret and "only this once" in created.stderr
    shown = await _tenant(env, "globex")
    assert shown["tenant"]["quotas"]["max_jobs"] == "50"
    assert first_secret not in json.dumps(shown)  # metadata only
    names = (await _cli(env, "admin", "tenants", "list", "-o", "name")).stdout.split()
    assert "globex" in names
    await _cli(env, "admin", "tenants", "update", "globex", "--max-concurrent-runs", "7")
    updated = await _tenant(env, "globex")
    # The fair weight read is the effective one: the operator's default, 1.
    assert updated["tenant"]["quotas"] == {
        "max_jobs": "50",
        "max_concurrent_runs": 7,
        "fair_weight": 1,
    }
    weighted = await _cli(env, "admin", "tenants", "update", "globex", "--fair-weight", "4")
    assert ["fair", "weight", "4"] in [line.split() for line in weighted.stdout.splitlines()]
    assert (await _tenant(env, "globex"))["tenant"]["quotas"]["fair_weight"] == 4
    refused = await _cli(
        env, "admin", "tenants", "update", "globex", "--fair-weight", "101", code=1
    )
    assert "tenant.quotas.fair_weight" in refused.output
    rotated = await _cli(env, "admin", "tenants", "rotate-secret", "globex", "--overlap", "1h")
    assert rotated.stdout and rotated.stdout != first_secret
    after = await _tenant(env, "globex")
    assert len(after["tenant"]["signing_secrets"]) == 2  # the old one valid for the overlap
    nothing = await _cli(env, "admin", "tenants", "update", "globex", code=1)
    assert "nothing to change" in nothing.output


async def test_a_tenant_rotates_its_own_signing_secret(api: Api) -> None:
    acme = await api.tenant("acme")
    env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": acme.token}
    rotated = await _cli(env, "signing-secret", "rotate", "--overlap", "1h")
    secret = rotated.stdout
    assert secret and secret != acme.signing_secret and " " not in secret
    assert "shown only this once" in rotated.stderr and secret not in rotated.stderr
    admin_env = {**env, "SUNDIAL_TOKEN": ADMIN_TOKEN}
    tenant = (await _tenant(admin_env, "acme"))["tenant"]
    newest, previous = tenant["signing_secrets"]
    assert "expire_time" not in newest and "expire_time" in previous  # the old one, 1 h
    again = json.loads(
        (await _cli(env, "signing-secret", "rotate", "--overlap", "0s", "-o", "json")).stdout
    )
    assert again["signing_secret"] != secret and again["secret_id"] != newest["secret_id"]
    # An admin token is not a tenant's: JobService refuses it.
    refused = await _cli(admin_env, "signing-secret", "rotate", code=1)
    assert "PERMISSION_DENIED" in refused.stderr
