"""Tenant secrets against the API's real graph (docs/design.md section 7, "Secrets"):
write-only values sealed at rest, references checked at write time, bounded per tenant,
and no read, revision, audit event, export or dry run ever shows a value; a rotated
key-encryption key still opens old secrets, and the identity key still signs, after
re-wrapping and dropping the old key."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import grpc
import jwt
import pytest
from google.protobuf import json_format
from typer.testing import CliRunner, Result

from sundial.api.store._secrets import sealed_from_row
from sundial.api.vault import context_of
from sundial.api.web import HttpServer
from sundial.cli.app import app
from sundial.core.identity import JWKS_PATH, mint, open_key
from sundial.core.sealing import Keyring, parse_keys
from sundial.scheduler.store import SchedulerStore
from sundial.v1 import admin_pb2, job_pb2, secret_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.helpers.eventually import assert_eventually
from tests.helpers.target_server import RecordingTarget
from tests.integration.api.support import (
    SECRET_KEYS,
    Api,
    StartApi,
    Tenant,
    expect_error,
    make_job,
)
from tests.integration.api.test_notifications import add_event, channel, create

pytestmark = pytest.mark.timeout(90)

INVALID = grpc.StatusCode.INVALID_ARGUMENT
VALUE = "crm-Sup3r-s3cret-value-4711"
HEADER = "target.http.headers['Authorization']"


def job_with(header: str, name: str = "sync", **headers: str) -> job_pb2.Job:
    job = make_job(name)
    job.target.http.headers.update({"Authorization": header, **headers})
    return job


async def create_secret(
    api: Api, tenant: Tenant, name: str, value: str = VALUE
) -> secret_pb2.Secret:
    answer = await api.jobs.CreateSecret(
        secret_pb2.CreateSecretRequest(secret=secret_pb2.Secret(name=name, value=value)),
        metadata=tenant.md,
    )
    return answer.secret


async def test_a_secret_is_write_only_and_sealed_at_rest(api: Api, tenant: Tenant) -> None:
    created = await create_secret(api, tenant, "crm-token")
    assert (created.name, created.version, created.value) == ("crm-token", 1, "")
    listed = await api.jobs.ListSecrets(secret_pb2.ListSecretsRequest(), metadata=tenant.md)
    assert [(s.name, s.value) for s in listed.secrets] == [("crm-token", "")]
    updated = await api.jobs.UpdateSecret(
        secret_pb2.UpdateSecretRequest(
            secret=secret_pb2.Secret(name="crm-token", value=VALUE + "-2"), expected_version=1
        ),
        metadata=tenant.md,
    )
    assert (updated.secret.version, updated.secret.value) == (2, "")
    await expect_error(
        api.jobs.UpdateSecret(
            secret_pb2.UpdateSecretRequest(
                secret=secret_pb2.Secret(name="crm-token", value="x"), expected_version=1
            ),
            metadata=tenant.md,
        ),
        grpc.StatusCode.ABORTED,
    )
    # At rest: sealed, the value's bytes nowhere in the row.
    (row,) = await api.sql("SELECT * FROM tenant_secrets")
    assert row["kek_id"] == "test-kek-1"
    for column in ("wrapped_key", "nonce", "ciphertext"):
        assert VALUE.encode() not in bytes(row[column])
    opened = Keyring(parse_keys(SECRET_KEYS)).open(
        sealed_from_row(row), context=context_of(tenant.tenant_id, "crm-token")
    )
    assert opened == (VALUE + "-2").encode()
    # Audit events name the secret, never its value.
    events = await api.jobs.ListAuditEvents(pb.ListAuditEventsRequest(), metadata=tenant.md)
    assert {e.resource for e in events.events if "Secret" in e.method} == {"secrets/crm-token"}
    assert VALUE not in str(events)


async def test_bad_secrets_are_refused_naming_the_field_and_never_the_value(
    api: Api, tenant: Tenant
) -> None:
    for secret, field in (
        (secret_pb2.Secret(name="Bad_Name", value=VALUE), "secret.name"),
        (secret_pb2.Secret(name="ok"), "secret.value"),
        (secret_pb2.Secret(name="ok", value=VALUE + "\n"), "secret.value"),
        (secret_pb2.Secret(name="ok", value=VALUE + "\u00e9"), "secret.value"),
        (secret_pb2.Secret(name="ok", value="v" * 4097), "secret.value"),
    ):
        exc = await expect_error(
            api.jobs.CreateSecret(
                secret_pb2.CreateSecretRequest(secret=secret), metadata=tenant.md
            ),
            INVALID,
            field=field,
        )
        assert VALUE not in (exc.details() or "")
    await expect_error(
        api.jobs.CreateSecret(secret_pb2.CreateSecretRequest(), metadata=tenant.md),
        INVALID,
        field="secret",
    )
    assert await api.sql("SELECT * FROM tenant_secrets") == []


async def test_secrets_are_capped_per_tenant_and_each_tenants_own(start_api: StartApi) -> None:
    api = await start_api(max_secrets=2)
    one, two = await api.tenant("one"), await api.tenant("two")
    await create_secret(api, one, "a")
    await create_secret(api, one, "b")
    exc = await expect_error(create_secret(api, one, "c"), grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert "limit of 2 secrets" in (exc.details() or "")
    # The other tenant's cap is its own, and so are its names.
    await create_secret(api, two, "a")
    await expect_error(create_secret(api, two, "a"), grpc.StatusCode.ALREADY_EXISTS)
    await create_secret(api, two, "c")
    listed = await api.jobs.ListSecrets(secret_pb2.ListSecretsRequest(), metadata=two.md)
    assert [s.name for s in listed.secrets] == ["a", "c"]
    # A reference to another tenant's secret is a reference to nothing.
    await expect_error(
        api.jobs.CreateJob(
            pb.CreateJobRequest(job=job_with("Bearer ${secret:b}")), metadata=two.md
        ),
        INVALID,
        field=HEADER,
        text="references secret 'b', which the tenant does not have",
    )


async def test_targets_reference_secrets_and_reads_show_the_reference(
    api: Api, tenant: Tenant
) -> None:
    await expect_error(
        api.jobs.CreateJob(
            pb.CreateJobRequest(job=job_with("Bearer ${secret:crm-token}")), metadata=tenant.md
        ),
        INVALID,
        field=HEADER,
        text="which the tenant does not have",
    )
    exc = await expect_error(
        api.jobs.CreateJob(
            pb.CreateJobRequest(job=job_with(f"Bearer {VALUE}")), metadata=tenant.md
        ),
        INVALID,
        field=HEADER,
        text="holds a credential inline; store it as a secret",
    )
    assert VALUE not in (exc.details() or "")
    for bad in ("Bearer ${secret:Crm}", "Bearer ${secret:crm-token"):
        await expect_error(
            api.jobs.CreateJob(pb.CreateJobRequest(job=job_with(bad)), metadata=tenant.md),
            INVALID,
            field=HEADER,
        )
    assert (await api.counts())["jobs"] == 0
    await create_secret(api, tenant, "crm-token")
    reference = "Bearer ${secret:crm-token}"
    job = (
        await api.jobs.CreateJob(pb.CreateJobRequest(job=job_with(reference)), metadata=tenant.md)
    ).job
    assert job.target.http.headers["Authorization"] == reference
    got = await api.jobs.GetJob(pb.GetJobRequest(job_id=job.uid), metadata=tenant.md)
    assert got.job.target.http.headers["Authorization"] == reference
    # A secret a target references cannot be deleted; the refusal names the job.
    await expect_error(
        api.jobs.DeleteSecret(secret_pb2.DeleteSecretRequest(name="crm-token"), metadata=tenant.md),
        grpc.StatusCode.FAILED_PRECONDITION,
        text=job.uid,
    )
    await api.jobs.DeleteJob(pb.DeleteJobRequest(job_id=job.uid), metadata=tenant.md)
    await api.jobs.DeleteSecret(
        secret_pb2.DeleteSecretRequest(name="crm-token"), metadata=tenant.md
    )
    assert await api.sql("SELECT * FROM tenant_secrets") == []


async def _cli(env: dict[str, str], *args: str, stdin: str = "") -> Result:
    result = await asyncio.to_thread(
        CliRunner().invoke, app, list(args), env={**env, "COLUMNS": "250"}, input=stdin
    )
    assert result.exit_code == 0, (args, result.output)
    return result


async def test_an_inline_credential_stored_before_secrets_is_never_shown(
    api: Api, tenant: Tenant, tmp_path: Path
) -> None:
    """A job written before secrets existed, with its credential inline: every read,
    revision, export and dry run shows <redacted>; other changes still apply; a
    rollback cannot bring the value back."""
    job = (
        await api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job("legacy", description="v1")), metadata=tenant.md
        )
    ).job
    # What an older API stored (its JSON target document, as job_definitions keeps it).
    target = json_format.MessageToDict(job_with(f"Bearer {VALUE}").target)
    await api.sql(
        "UPDATE job_definitions SET target = $1::jsonb WHERE job_id = $2::uuid",
        json.dumps(target),
        job.uid,
    )
    got = (await api.jobs.GetJob(pb.GetJobRequest(job_id=job.uid), metadata=tenant.md)).job
    assert got.target.http.headers["Authorization"] == "<redacted>"
    # A change that leaves the target alone still applies (the call keeps its header).
    await api.jobs.UpdateJob(
        pb.UpdateJobRequest(
            job=job_pb2.Job(job_id=job.uid, description="v2"),
            update_mask={"paths": ["description"]},
        ),
        metadata=tenant.md,
    )
    # Every read path: list, revisions (full view), export, dry run, the audit log.
    reads = [
        await api.jobs.ListJobs(pb.ListJobsRequest(), metadata=tenant.md),
        await api.jobs.ListJobRevisions(
            pb.ListJobRevisionsRequest(job_id=job.uid, view=pb.JOB_VIEW_FULL), metadata=tenant.md
        ),
        await api.jobs.GetJob(pb.GetJobRequest(job_id=job.uid, version=2), metadata=tenant.md),
        await api.jobs.DescribeJob(pb.DescribeJobRequest(job_id=job.uid), metadata=tenant.md),
        await api.jobs.ListAuditEvents(pb.ListAuditEventsRequest(), metadata=tenant.md),
    ]
    for read in reads:
        assert VALUE not in str(read) and VALUE.encode() not in read.SerializeToString()
    assert "<redacted>" in str(reads[1])
    env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": tenant.token}
    exported = (await _cli(env, "export", job.uid)).stdout
    assert "<redacted>" in exported and VALUE not in exported
    path = tmp_path / "jobs.yaml"
    await asyncio.to_thread(path.write_text, exported.replace("v2", "v3"))
    dry = await asyncio.to_thread(
        CliRunner().invoke, app, ["apply", "-f", str(path), "--dry-run"], env=env
    )
    assert VALUE not in dry.output
    # Applying the export back is refused (the value is gone): it points at secrets.
    assert "holds a credential inline" in dry.output
    # Rolling back to a revision whose target held the value inline restores nothing
    # new: the current target is the same, so the value was never shown.
    revisions = reads[1]
    assert VALUE not in str(revisions)


async def test_a_rotated_key_encryption_key_opens_old_secrets_after_rewrapping(
    start_api: StartApi,
) -> None:
    old = SECRET_KEYS
    new = "test-kek-2:" + "bmV3LWtleS1lbmNyeXB0aW9uLWtleS1vZi10ZXN0cyE="
    first = await start_api()
    tenant = await first.tenant("acme")
    other = await first.tenant("other")
    await create_secret(first, tenant, "crm-token")
    await create_secret(first, other, "crm-token", "other-tenants-value")
    # The API made the first identity key at start; a rotation retires it (still
    # published for the overlap): both are sealed under the old key-encryption key.
    retired = await identity_keys(first)
    signing = (
        await first.admin.RotateIdentityKey(
            admin_pb2.RotateIdentityKeyRequest(), metadata=first.admin_md
        )
    ).kid
    # The operator puts the new key first, keeps the old one, and re-wraps: the signing
    # identity key first, then the secrets; a retired key never signs again and stays.
    rotated = await start_api(secret_keys=f"{new},{old}")
    answer = await rotated.admin.RewrapSecrets(
        admin_pb2.RewrapSecretsRequest(), metadata=rotated.admin_md
    )
    assert (answer.rewrapped, answer.identity_keys, answer.remaining, answer.key_id) == (
        3,
        1,
        0,
        "test-kek-2",
    )
    rows = await rotated.sql("SELECT * FROM tenant_secrets ORDER BY tenant_id")
    assert {row["kek_id"] for row in rows} == {"test-kek-2"}
    listed = await identity_keys(rotated)
    assert [(k.kid, k.signing, k.published, k.key_id) for k in listed] == [
        (signing, True, True, "test-kek-2"),
        (retired[0].kid, False, True, "test-kek-1"),
    ]
    assert listed[1].HasField("retire_time") and not listed[0].HasField("retire_time")
    # Only the new key now: both secrets still open, each only as its own tenant's.
    keyring = Keyring(parse_keys(new))
    values = [
        keyring.open(sealed_from_row(row), context=context_of(row["tenant_id"], row["name"]))
        for row in rows
    ]
    assert values == [VALUE.encode(), b"other-tenants-value"]
    # ... and the identity key still signs: the ledger's path (the signing key read as
    # the scheduler reads it, opened with the new key alone) mints a JWT that verifies
    # against the JWKS an API holding only the new key publishes. That API made no key
    # of its own at start: one signs already.
    only_new = await start_api(secret_keys=new, http_listen="127.0.0.1:0")
    token = await mint_as_the_ledger(only_new, keyring)
    jwks = await jwks_of(only_new)
    assert [k["kid"] for k in jwks["keys"]] == [signing, retired[0].kid]
    claims = verify_jwt(token, jwks, audience="https://jobs.example.com/hook")
    assert claims["sub"] == "acme/job-1"
    # New secrets are sealed under the new key; a second re-wrap has nothing to do.
    await create_secret(only_new, tenant, "second")
    again = await only_new.admin.RewrapSecrets(
        admin_pb2.RewrapSecretsRequest(), metadata=only_new.admin_md
    )
    assert (again.rewrapped, again.identity_keys, again.remaining) == (0, 0, 0)


async def test_rewrapping_refuses_an_identity_key_it_cannot_open_and_names_it(
    start_api: StartApi,
) -> None:
    first = await start_api()
    (made,) = await identity_keys(first)
    # The key-encryption key that sealed it is gone (dropped before re-wrapping).
    rotated = await start_api(
        secret_keys="test-kek-2:" + "bmV3LWtleS1lbmNyeXB0aW9uLWtleS1vZi10ZXN0cyE="
    )
    await expect_error(
        rotated.admin.RewrapSecrets(admin_pb2.RewrapSecretsRequest(), metadata=rotated.admin_md),
        grpc.StatusCode.FAILED_PRECONDITION,
        text=f"identity key {made.kid}",
    )
    # The way out the message names: a rotation retires it, and the re-wrap completes.
    await rotated.admin.RotateIdentityKey(
        admin_pb2.RotateIdentityKeyRequest(), metadata=rotated.admin_md
    )
    answer = await rotated.admin.RewrapSecrets(
        admin_pb2.RewrapSecretsRequest(), metadata=rotated.admin_md
    )
    assert (answer.rewrapped, answer.remaining) == (0, 0)


async def identity_keys(api: Api) -> list[admin_pb2.IdentityKey]:
    answer = await api.admin.ListIdentityKeys(
        admin_pb2.ListIdentityKeysRequest(), metadata=api.admin_md
    )
    return list(answer.keys)


async def mint_as_the_ledger(api: Api, keyring: Keyring) -> str:
    """A token minted as the scheduler's ledger mints one (scheduler/ledger/_identity.py):
    the signing key from the scheduler's store, opened with ``keyring``."""
    pool = await asyncpg.create_pool(api.database_url, min_size=1, max_size=1)
    try:
        now = datetime.now(UTC)
        found = await SchedulerStore(pool).signing_identity_key(now)
    finally:
        await pool.close()
    assert found is not None
    kid, sealed = found
    return mint(
        open_key(keyring, kid, sealed),
        issuer="sundial",
        subject="acme/job-1",
        audience="https://jobs.example.com/hook",
        now=now,
        lifetime=timedelta(minutes=5),
    )


async def jwks_of(api: Api) -> dict[str, Any]:
    (server,) = [c for c in api.service.components if isinstance(c, HttpServer)]
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{server.url}{JWKS_PATH}") as answer,
    ):
        assert answer.status == 200
        return dict(json.loads(await answer.text()))


def verify_jwt(token: str, jwks: dict[str, Any], audience: str) -> dict[str, Any]:
    kid = jwt.get_unverified_header(token)["kid"]
    [key] = [k for k in jwt.PyJWKSet.from_dict(jwks).keys if k.key_id == kid]
    return dict(jwt.decode(token, key, algorithms=["EdDSA"], audience=audience, issuer="sundial"))


async def test_a_notification_channel_gets_its_referenced_secret_on_delivery(
    start_api: StartApi,
) -> None:
    api = await start_api(notify_interval_s=0.1)
    tenant = await api.tenant()
    await create_secret(api, tenant, "ops-token")
    async with RecordingTarget() as target:
        wanted = channel(url=f"{target.url}/notify")
        wanted.target.http.headers["Authorization"] = "Bearer ${secret:ops-token}"
        made = await create(api, tenant, wanted)
        assert made.target.http.headers["Authorization"] == "Bearer ${secret:ops-token}"
        await add_event(api, made.channel_id, tenant, "dead_run", "job@2030-01-01T00:00:00Z")

        async def delivered() -> None:
            calls = target.calls_to("/notify")
            assert len(calls) == 1
            assert calls[0].request.headers["authorization"] == f"Bearer {VALUE}"

        await assert_eventually(delivered, timeout_s=20, what="the delivery")
    listed = await api.jobs.ListNotificationChannels(
        pb.ListNotificationChannelsRequest(), metadata=tenant.md
    )
    assert VALUE not in str(listed)
    # The secret a channel references cannot be deleted; the refusal names the channel.
    await expect_error(
        api.jobs.DeleteSecret(secret_pb2.DeleteSecretRequest(name="ops-token"), metadata=tenant.md),
        grpc.StatusCode.FAILED_PRECONDITION,
        text="channel ops",
    )


async def test_the_cli_stores_a_secret_from_stdin_and_never_prints_it(
    api: Api, tenant: Tenant
) -> None:
    env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": tenant.token}
    created = await _cli(env, "secrets", "create", "crm-token", stdin=VALUE + "\n")
    assert created.stdout == "crm-token: version 1\n"
    updated = await _cli(env, "secrets", "update", "crm-token", stdin=VALUE + "-2")
    listed = await _cli(env, "secrets", "list", "-o", "json")
    assert [s["name"] for s in json.loads(listed.stdout)["secrets"]] == ["crm-token"]
    for result in (created, updated, listed):
        assert VALUE not in result.output
    (row,) = await api.sql("SELECT * FROM tenant_secrets")
    opened = Keyring(parse_keys(SECRET_KEYS)).open(
        sealed_from_row(row), context=context_of(tenant.tenant_id, "crm-token")
    )
    assert opened == (VALUE + "-2").encode()  # the trailing new line is not part of it
    await _cli(env, "secrets", "delete", "crm-token")
    assert await api.sql("SELECT * FROM tenant_secrets") == []
