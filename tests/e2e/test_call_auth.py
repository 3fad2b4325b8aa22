"""End to end (issue 27 items 2-4): what a target gets to trust a call, through the three
services as real processes and a recording HTTP target.

- A run call's v2 signature verifies for purpose ``run`` at its own URL only: replayed to
  another target of the same tenant it is refused; a DEAD_RUN notification replayed to a
  job's target is refused by the Python and the TypeScript verifiers; v1 still verifies.
- In Standard Webhooks mode both verify with the ``standardwebhooks`` libraries (Python
  and npm), with each secret of a rotation's overlap.
- A run call's identity token verifies with PyJWT against the JWKS fetched from the
  API's HTTP port (audience, subject); after ``RotateIdentityKey`` the new call's token
  and the old one both verify against the JWKS fetched again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import jwt
import pytest
from standardwebhooks import Webhook

from sundial.client import SignatureError, standard_webhook_secret, verify_signature
from sundial.devstack import Services, Stack
from sundial.v1 import admin_pb2, job_pb2, run_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.helpers.cluster import ADMIN_TOKEN, Cluster, Tenant, client_of, shared_services
from tests.helpers.eventually import assert_eventually
from tests.helpers.target_server import Call, RecordingTarget

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

SDK = Path(__file__).resolve().parents[2] / "sdk" / "typescript"


@pytest.fixture(scope="module")
def http_services(
    stack: Stack, module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Services]:
    """The services, the API serving its HTTP port too (the JWKS), for the module's tests
    (each with tenants of its own)."""
    with shared_services(
        stack, module_database_url, tmp_path_factory.mktemp("call-auth"), http=True
    ) as services:
        yield services


@pytest.fixture
async def cluster(http_services: Services) -> AsyncIterator[Cluster]:
    async with client_of(http_services) as running:
        yield running


def auth(*, webhooks: bool = False, token: bool = False) -> job_pb2.TargetAuth:
    message = job_pb2.TargetAuth(standard_webhooks=webhooks)
    if token:
        message.identity_token.lifetime.FromSeconds(120)
    return message


async def job(tenant: Tenant, name: str, url: str, target_auth: job_pb2.TargetAuth) -> Any:
    spec = job_pb2.Job(
        name=name,
        schedule=job_pb2.Schedule(cron="0 3 * * *"),
        target=job_pb2.Target(http=job_pb2.HttpTarget(url=url, auth=target_auth)),
        payload=b'{"report": "usage"}',
    )
    spec.policies.retry.max_attempts = 1
    return await tenant.create_job(spec)


async def call_of(tenant: Tenant, target: RecordingTarget, job_id: str, path: str) -> Call:
    """Trigger the job; its call as the target got it."""
    run = (await tenant.call("TriggerJob", pb.TriggerJobRequest(job_id=job_id))).run

    async def arrived() -> Call:
        calls = [c for c in target.calls_to(path) if c.key == run.run_key]
        assert len(calls) == 1, calls
        return calls[0]

    return await assert_eventually(arrived, timeout_s=30, interval_s=0.2, what=f"a call to {path}")


def check(call: Call, secrets: list[str], purpose: str, url: str, **kwargs: Any) -> None:
    verify_signature(
        call.request.headers["sundial-signature"],
        secrets=secrets,
        idempotency_key=call.key or "",
        attempt=call.attempt,
        body=call.request.body,
        purpose=purpose,
        destination=url,
        **kwargs,
    )


def node(script: str, data: object) -> str:
    """Run ``script`` (an ES module, given ``data`` as JSON on stdin) with the built SDK
    and the npm ``standardwebhooks`` library; its stdout."""
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        cwd=SDK,
        input=json.dumps(data),
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


NODE_VERIFY = """
import { readFileSync } from "node:fs";
import { Webhook } from "standardwebhooks";
import { verifySignature, standardWebhookSecret } from "./dist/index.js";
const d = JSON.parse(readFileSync(0, "utf8"));
const out = {};
const call = { header: d.headers["sundial-signature"], idempotencyKey: d.headers["idempotency-key"],
  attempt: d.headers["sundial-attempt"], body: Buffer.from(d.body, "utf8") };
for (const [name, purpose, destination] of d.checks) {
  try { verifySignature(call, { secrets: d.secrets, purpose, destination }); out[name] = "ok"; }
  catch (e) { out[name] = e.name + ": " + e.message; }
}
out.webhooks = d.secrets.map((s) => {
  try {
    new Webhook(standardWebhookSecret(s, { purpose: d.purpose, destination: d.url }))
      .verify(d.body, d.headers);
    return "ok";
  } catch (e) { return e.message; }
});
console.log(JSON.stringify(out));
"""


def node_checks(call: Call, secrets: list[str], purpose: str, url: str, checks: list[Any]) -> Any:
    return json.loads(
        node(
            NODE_VERIFY,
            {
                "headers": dict(call.request.headers),
                "body": call.request.body.decode(),
                "secrets": secrets,
                "purpose": purpose,
                "url": url,
                "checks": checks,
            },
        )
    )


def jwks_of(cluster: Cluster) -> dict[str, Any]:
    url = f"{cluster.services.processes['api'].http_url}/.well-known/jwks.json"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as answer:
        assert answer.headers["Content-Type"].startswith("application/jwk-set+json")
        assert answer.headers["Cache-Control"] == "public, max-age=300"  # public keys
        return dict(json.load(answer))


def claims_of(token: str, jwks: dict[str, Any], audience: str) -> dict[str, Any]:
    keys = jwt.PyJWKSet.from_dict(jwks)
    kid = jwt.get_unverified_header(token)["kid"]
    [key] = [k for k in keys.keys if k.key_id == kid]
    return dict(jwt.decode(token, key, algorithms=["EdDSA"], audience=audience))


def bearer(call: Call) -> str:
    scheme, _, token = call.request.headers["authorization"].partition(" ")
    assert scheme == "Bearer"
    return token


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
async def test_calls_are_bound_to_their_purpose_and_target_in_every_format(
    cluster: Cluster, target: RecordingTarget
) -> None:
    tenant = await cluster.tenant()
    secret = tenant.signing_secret
    a_url, b_url, notify_url = (f"{target.url}/a", f"{target.url}/b", f"{target.url}/notify")
    a = await job(tenant, "a", a_url, auth(webhooks=True, token=True))
    await job(tenant, "b", b_url, auth())
    target.script("/dead", status=500, body=b"down")
    dead = await job(tenant, "dead", f"{target.url}/dead", auth())
    await tenant.call(
        "CreateNotificationChannel",
        pb.CreateNotificationChannelRequest(
            channel=pb.NotificationChannel(
                display_name="alerts",
                target=job_pb2.Target(
                    http=job_pb2.HttpTarget(url=notify_url, auth=auth(webhooks=True))
                ),
                event_kinds=[pb.NOTIFICATION_EVENT_KIND_DEAD_RUN],
            )
        ),
    )

    # A run call: v2 for its purpose and its own URL; replayed to job b's target, refused.
    first = await call_of(tenant, target, a.job_id, "/a")
    check(first, [secret], "run", a_url)
    with pytest.raises(SignatureError, match="none of the secrets"):
        check(first, [secret], "run", b_url)
    check(first, [secret], "run", b_url, accept_v1=True)  # what v1 let through
    whsec = standard_webhook_secret(secret, purpose="run", destination=a_url)
    assert Webhook(whsec).verify(first.request.body, first.request.headers) == {"report": "usage"}
    verdicts = node_checks(
        first, [secret], "run", a_url, [["own", "run", a_url], ["replayed", "run", b_url]]
    )
    assert verdicts["own"] == "ok" and verdicts["webhooks"] == ["ok"]
    assert "matches none" in verdicts["replayed"]

    # Its identity token: PyJWT against the JWKS the API publishes.
    jwks = jwks_of(cluster)
    claims = claims_of(bearer(first), jwks, a_url)
    assert claims["sub"] == f"{tenant.tenant_id}/{a.uid}" and claims["iss"] == "sundial"
    assert claims["exp"] - claims["iat"] == 120 and claims["run_key"] == first.key
    with pytest.raises(jwt.InvalidAudienceError):
        claims_of(bearer(first), jwks, b_url)

    # A DEAD_RUN notification: verifies at its channel, refused at a job's target.
    await tenant.call("TriggerJob", pb.TriggerJobRequest(job_id=dead.job_id))

    async def notified() -> Call:
        calls = target.calls_to("/notify")
        assert calls and calls[0].status == 200
        return calls[0]

    notice = await assert_eventually(notified, timeout_s=40, interval_s=0.3, what="a notice")
    check(notice, [secret], "notification", notify_url)
    with pytest.raises(SignatureError, match="none of the secrets"):
        check(notice, [secret], "run", a_url)
    body = json.loads(notice.request.body)
    assert (
        Webhook(
            standard_webhook_secret(secret, purpose="notification", destination=notify_url)
        ).verify(notice.request.body, notice.request.headers)
        == body
    )
    verdicts = node_checks(
        notice,
        [secret],
        "notification",
        notify_url,
        [["own", "notification", notify_url], ["replayed", "run", a_url]],
    )
    assert verdicts["own"] == "ok" and verdicts["webhooks"] == ["ok"]
    assert "matches none" in verdicts["replayed"]

    # A signing-secret rotation: during the overlap each secret verifies on its own, in
    # Sundial's header and in the Standard Webhooks one (two signatures).
    rotated = await tenant.call("RotateOwnSigningSecret", pb.RotateOwnSigningSecretRequest())
    new_secret = rotated.signing_secret
    second = await call_of(tenant, target, a.job_id, "/a")
    assert len(second.request.headers["webhook-signature"].split(" ")) == 2
    for one in (secret, new_secret):
        check(second, [one], "run", a_url)
        whsec = standard_webhook_secret(one, purpose="run", destination=a_url)
        Webhook(whsec).verify(second.request.body, second.request.headers)
    verdicts = node_checks(second, [secret, new_secret], "run", a_url, [["own", "run", a_url]])
    assert verdicts == {"own": "ok", "webhooks": ["ok", "ok"]}

    # An identity-key rotation: the next call is signed by the new key; both tokens verify
    # against the JWKS fetched again (the old key stays published for the overlap).
    admin = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
    new_kid = (
        await cluster.admin.RotateIdentityKey(
            admin_pb2.RotateIdentityKeyRequest(), metadata=admin, timeout=10
        )
    ).kid
    third = await call_of(tenant, target, a.job_id, "/a")
    assert jwt.get_unverified_header(bearer(third))["kid"] == new_kid
    assert jwt.get_unverified_header(bearer(first))["kid"] != new_kid
    jwks = jwks_of(cluster)
    assert len(jwks["keys"]) == 2 and jwks["keys"][0]["kid"] == new_kid
    for call in (first, third):
        claims = claims_of(bearer(call), jwks, a_url)
        assert claims["sub"] == f"{tenant.tenant_id}/{a.uid}"

    async def finished() -> None:
        runs = await tenant.runs(a.job_id)
        assert len(runs) == 3 and all(r.status == run_pb2.RUN_STATUS_SUCCEEDED for r in runs)

    await assert_eventually(finished, timeout_s=20, interval_s=0.3, what="three runs")


async def test_target_auth_is_checked_with_the_field_named(cluster: Cluster) -> None:
    tenant = await cluster.tenant()
    cases = [
        (
            job_pb2.HttpTarget(
                url="https://example.com/x",
                headers={"webhook-id": "mine"},
                auth=auth(webhooks=True),
            ),
            "target.http.headers['webhook-id']",
        ),
        (
            job_pb2.HttpTarget(
                url="https://example.com/x",
                headers={"Authorization": "Bearer ${secret:nope}"},
                auth=auth(token=True),
            ),
            "target.http.headers['Authorization']",
        ),
    ]
    long_lived = job_pb2.HttpTarget(url="https://example.com/x", auth=auth(token=True))
    long_lived.auth.identity_token.lifetime.FromTimedelta(timedelta(hours=2))
    cases.append((long_lived, "target.http.auth.identity_token.lifetime"))
    for http, field in cases:
        spec = job_pb2.Job(
            name="bad",
            schedule=job_pb2.Schedule(cron="0 3 * * *"),
            target=job_pb2.Target(http=http),
        )
        with pytest.raises(Exception) as refused:
            await tenant.create_job(spec)
        assert refused.value.code().name == "INVALID_ARGUMENT", refused.value  # type: ignore[attr-defined]
        assert field in refused.value.details(), refused.value  # type: ignore[attr-defined]
    # A notification channel gets no identity token: refused, the field named.
    channel = pb.NotificationChannel(
        display_name="alerts",
        target=job_pb2.Target(
            http=job_pb2.HttpTarget(url="https://example.com/n", auth=auth(token=True))
        ),
        event_kinds=[pb.NOTIFICATION_EVENT_KIND_DEAD_RUN],
    )
    with pytest.raises(Exception) as refused:
        await tenant.call(
            "CreateNotificationChannel", pb.CreateNotificationChannelRequest(channel=channel)
        )
    assert refused.value.code().name == "INVALID_ARGUMENT"  # type: ignore[attr-defined]
    assert "channel.target.http.auth.identity_token" in refused.value.details()  # type: ignore[attr-defined]
