"""Signatures bound to purpose and destination (v2, with key ids), v1 during the
transition, and the Standard Webhooks headers checked with the Python
``standardwebhooks`` library (docs/design.md section 7, "Signatures")."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from sundial.client import SignatureError, key_id, standard_webhook_secret, verify_signature
from sundial.core import signing
from sundial.core.signing import Purpose, destination, signature, standard_webhook_headers
from sundial.run import GrpcTarget, HttpTarget

AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
KEY = "8f1c2e4a-7b3d-4c5e-9f60-1a2b3c4d5e6f@2026-12-01T09:30:00Z"
JOB_URL = "https://jobs.example.com/run"
CHANNEL_URL = "https://alerts.example.net/hook"
SECRETS = ["new-secret-" + "n" * 32, "old-secret-" + "o" * 32]


def signed(purpose: Purpose, to: str, secrets: list[str] = SECRETS) -> str:
    return signature([s.encode() for s in secrets], AT, KEY, 3, b'{"a": 1}', purpose=purpose, to=to)


def verify(header: str, **kwargs: object) -> None:
    options: dict[str, object] = {
        "secrets": SECRETS,
        "idempotency_key": KEY,
        "attempt": 3,
        "body": b'{"a": 1}',
        "now": AT.timestamp() + 5,
    }
    options.update(kwargs)
    verify_signature(header, **options)  # type: ignore[arg-type]


def test_the_header_has_a_v1_and_a_v2_per_secret_named_by_key_id() -> None:
    parts = signed(Purpose.RUN, JOB_URL).split(",")
    assert parts[0] == f"t={int(AT.timestamp())}"
    assert [p[:3] for p in parts[1:]] == ["v1=", "v1=", "v2=", "v2="]
    kids = [p[3:].split(":")[0] for p in parts[3:]]
    assert kids == [key_id(s) for s in SECRETS]
    assert kids == [signing.key_id(s.encode()) for s in SECRETS]
    assert all(len(k) == 16 and int(k, 16) >= 0 for k in kids)
    assert not any(s in ",".join(parts) for s in SECRETS)


def test_v2_verifies_for_its_purpose_and_destination_only() -> None:
    run_call = signed(Purpose.RUN, JOB_URL)
    verify(run_call, purpose="run", destination=JOB_URL)
    # Either secret of a rotation's overlap is enough.
    verify(run_call, purpose="run", destination=JOB_URL, secrets=SECRETS[1:])
    with pytest.raises(SignatureError, match="none of the secrets for this purpose"):
        verify(run_call, purpose="run", destination="https://jobs.example.com/other")
    with pytest.raises(SignatureError, match="none of the secrets"):
        verify(run_call, purpose="notification", destination=JOB_URL)
    notification = signed(Purpose.NOTIFICATION, CHANNEL_URL)
    verify(notification, purpose="notification", destination=CHANNEL_URL)
    # The replay: a notification posted to a job's target.
    with pytest.raises(SignatureError, match="none of the secrets"):
        verify(notification, purpose="run", destination=JOB_URL)
    with pytest.raises(SignatureError, match="none of the secrets"):
        verify(run_call, purpose="run", destination=JOB_URL, attempt=4)
    with pytest.raises(SignatureError, match="none of the secrets"):
        verify(run_call, purpose="run", destination=JOB_URL, secrets=["another"])


def test_v1_verifies_without_purpose_and_only_by_opt_in_with_one() -> None:
    run_call = signed(Purpose.NOTIFICATION, CHANNEL_URL)
    verify(run_call)  # a verifier written before v2: it reads v1
    v1_only = ",".join(p for p in run_call.split(",") if not p.startswith("v2="))
    with pytest.raises(SignatureError, match="no v2"):
        verify(v1_only, purpose="run", destination=JOB_URL)
    verify(v1_only, purpose="run", destination=JOB_URL, accept_v1=True)
    with pytest.raises(SignatureError, match="none of the secrets"):
        verify(v1_only, purpose="run", destination=JOB_URL, accept_v1=True, secrets=["x"])
    # And a verifier that refuses v1 outright even without purpose reads nothing.
    with pytest.raises(SignatureError, match="none of the secrets"):
        verify(v1_only, accept_v1=False)


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"purpose": "run"}, "together"),
        ({"destination": JOB_URL}, "together"),
        ({"purpose": "deploy", "destination": JOB_URL}, "purpose must be one of"),
    ],
)
def test_purpose_and_destination_go_together(kwargs: dict[str, str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        verify(signed(Purpose.RUN, JOB_URL), **kwargs)


def test_a_tampered_or_stale_header_is_refused() -> None:
    header = signed(Purpose.RUN, JOB_URL)
    with pytest.raises(SignatureError, match="outside the tolerance"):
        verify(header, purpose="run", destination=JOB_URL, now=AT.timestamp() + 301)
    for bad in ("", "t=x,v2=a:b", "v2=a:b", f"t={int(AT.timestamp())}"):
        with pytest.raises(SignatureError, match="malformed"):
            verify(bad, purpose="run", destination=JOB_URL)
    forged = header.replace("v2=", "v2=00", 1)
    verify(forged, purpose="run", destination=JOB_URL)  # the other secret's v2 still holds
    with pytest.raises(SignatureError):
        verify(forged, purpose="run", destination=JOB_URL, secrets=SECRETS[:1])


def test_a_destination_is_the_url_or_the_address_as_written() -> None:
    assert destination(HttpTarget(url="https://a.example/x?y=1")) == "https://a.example/x?y=1"
    assert destination(GrpcTarget(address="grpc.example:443")) == "grpc.example:443"


def test_the_standardwebhooks_library_verifies_each_secret_of_a_rotation() -> None:
    now = datetime.now(UTC)  # the library judges webhook-timestamp by its own clock
    body = b'{"kind": "dead_run"}'
    headers = standard_webhook_headers(
        [s.encode() for s in SECRETS],
        now,
        KEY,
        body,
        purpose=Purpose.NOTIFICATION,
        to=CHANNEL_URL,
    )
    assert headers["webhook-id"] == KEY
    assert headers["webhook-timestamp"] == str(int(now.timestamp()))
    assert [s[:3] for s in headers["webhook-signature"].split(" ")] == ["v1,", "v1,"]
    for secret in SECRETS:
        whsec = standard_webhook_secret(secret, purpose="notification", destination=CHANNEL_URL)
        assert whsec == signing.standard_webhook_secret(
            secret.encode(), Purpose.NOTIFICATION, CHANNEL_URL
        )
        assert whsec.startswith("whsec_") and secret not in whsec
        assert Webhook(whsec).verify(body, headers) == {"kind": "dead_run"}
        # The same secret's key for a job's target, or another channel, refuses it.
        for purpose, to in (("run", CHANNEL_URL), ("notification", JOB_URL)):
            other = standard_webhook_secret(secret, purpose=purpose, destination=to)
            with pytest.raises(WebhookVerificationError):
                Webhook(other).verify(body, headers)
    with pytest.raises(ValueError, match="purpose"):
        standard_webhook_secret(SECRETS[0], purpose="deploy", destination=JOB_URL)
