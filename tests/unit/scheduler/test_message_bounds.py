"""What the scheduler puts on the bus and in LeaseRuns answers stays within its byte
bounds, whatever the size of what tenants wrote (docs/design.md section 7)."""

from __future__ import annotations

from datetime import UTC, datetime

from sundial.internal.v1 import events_pb2
from sundial.scheduler.convert import DEAD_LETTER_MAX_BYTES, encode_dead_letter
from sundial.scheduler.model import DeadLetterRun
from tests.helpers.letters import dead_letter_run

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def letter(payload: bytes, headers: dict[str, str]) -> DeadLetterRun:
    return dead_letter_run(payload=payload, headers=headers)


def test_a_dead_letter_within_the_bound_carries_payload_and_headers() -> None:
    body = encode_dead_letter(letter(b"x" * 1000, {"X-Key": "v"}), NOW)
    decoded = events_pb2.DeadLetter.FromString(body)
    assert decoded.payload == b"x" * 1000 and dict(decoded.target.http.headers) == {"X-Key": "v"}
    assert not decoded.truncated


def test_a_dead_letter_past_the_bound_is_sent_without_payload_and_headers() -> None:
    headers = {f"X-H{i}": "v" * 8000 for i in range(64)}
    body = encode_dead_letter(letter(b"x" * (512 * 1024), headers), NOW)
    assert len(body) <= DEAD_LETTER_MAX_BYTES
    decoded = events_pb2.DeadLetter.FromString(body)
    assert decoded.truncated and decoded.payload == b"" and not decoded.target.http.headers
    # What routes and explains the letter is kept.
    assert decoded.target.http.url == "https://example.com/hook"
    assert decoded.run.last_error == "HTTP 500" and dict(decoded.labels) == {"team": "billing"}
