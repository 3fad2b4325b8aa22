"""The TypeScript SDK (sdk/typescript, built by `make setup`) verifies signatures made by
Sundial's own signing code, run by Node's test runner: one vector per secret count and
body kind, written here with `sundial.core.signing` and checked there: v2 bound to its
purpose and destination (a replay to another target or as another purpose refused), v1
during the transition, and the Standard Webhooks headers with the npm `standardwebhooks`
library."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sundial.client import verify_signature
from sundial.core.signing import Purpose, signature, standard_webhook_headers

SDK = Path(__file__).resolve().parents[2] / "sdk" / "typescript"
DESTINATION = "https://hooks.example.com/sundial?team=ops"


def vectors() -> list[dict[str, object]]:
    # Now: the standardwebhooks library judges webhook-timestamp by its own clock.
    at = datetime.now(UTC).replace(microsecond=0)
    key = "8f1c2e4a-7b3d-4c5e-9f60-1a2b3c4d5e6f@2026-12-01T09:30:00Z"
    cases = [
        (["whsec-current"], b'{"kind": "usage"}', 1, Purpose.RUN),
        (["whsec-new", "whsec-old"], b"", 2, Purpose.NOTIFICATION),  # a rotation's overlap
        (["s\u00e9cret-\u00fcnicode"], bytes(range(256)), 7, Purpose.RUN),  # binary body
    ]
    made = []
    for secrets, body, attempt, purpose in cases:
        keys = [s.encode() for s in secrets]
        header = signature(keys, at, key, attempt, body, purpose=purpose, to=DESTINATION)
        # The Python verifier agrees (both implement target.proto's rule).
        verify_signature(
            header,
            secrets=secrets,
            idempotency_key=key,
            attempt=attempt,
            body=body,
            purpose=purpose,
            destination=DESTINATION,
            now=at.timestamp(),
        )
        made.append(
            {
                "header": header,
                "secrets": secrets,
                "idempotency_key": key,
                "attempt": attempt,
                "purpose": str(purpose),
                "destination": DESTINATION,
                "body_base64": base64.b64encode(body).decode(),
                "t": int(at.timestamp()),
                # The standardwebhooks libraries read the body as UTF-8 text.
                "webhook_headers": standard_webhook_headers(
                    keys, at, key, body, purpose=purpose, to=DESTINATION
                )
                if body.isascii()
                else None,
            }
        )
    return made


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_the_typescript_verifier_accepts_the_ledgers_signatures(tmp_path: Path) -> None:
    assert (SDK / "dist" / "index.js").exists(), "sdk/typescript is not built: run make setup"
    path = tmp_path / "vectors.json"
    path.write_text(json.dumps(vectors()))
    done = subprocess.run(
        ["node", "--test", "test/verify.test.mjs"],
        cwd=SDK,
        env={"PATH": os.environ["PATH"], "SUNDIAL_SIGNATURE_VECTORS": str(path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# fail 0" in done.stdout and "# skipped 0" in done.stdout, done.stdout
    assert "# pass 4" in done.stdout, done.stdout
