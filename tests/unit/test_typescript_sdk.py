"""The TypeScript SDK (sdk/typescript, built by `make setup`) verifies signatures made by
Sundial's own ledger code, run by Node's test runner: one vector per secret count and
body kind, written here with the ledger's `signature` and checked there."""

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
from sundial.scheduler.ledger._signing import signature

SDK = Path(__file__).resolve().parents[2] / "sdk" / "typescript"


def vectors() -> list[dict[str, object]]:
    at = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    key = "8f1c2e4a-7b3d-4c5e-9f60-1a2b3c4d5e6f@2026-12-01T09:30:00Z"
    cases = [
        (["whsec-current"], b'{"kind": "usage"}', 1),
        (["whsec-new", "whsec-old"], b"", 2),  # a rotation's overlap: two v1 values
        (["s\u00e9cret-\u00fcnicode"], bytes(range(256)), 7),  # binary body, UTF-8 secret
    ]
    made = []
    for secrets, body, attempt in cases:
        header = signature([s.encode() for s in secrets], at, key, attempt, body)
        # The Python verifier agrees (both implement target.proto's rule).
        verify_signature(
            header,
            secrets=secrets,
            idempotency_key=key,
            attempt=attempt,
            body=body,
            now=at.timestamp(),
        )
        made.append(
            {
                "header": header,
                "secrets": secrets,
                "idempotency_key": key,
                "attempt": attempt,
                "body_base64": base64.b64encode(body).decode(),
                "t": int(at.timestamp()),
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
