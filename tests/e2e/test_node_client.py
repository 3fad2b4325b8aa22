"""A Node.js client against the real services (issue 14's done-when, as a Node team
would write it): sdk/typescript/test/e2e.test.mjs run by Node's test runner with this
stack's API address, a tenant token and the tenant's signing secret."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import google.rpc
import pytest

from tests.helpers.cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "typescript"


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
@pytest.mark.timeout(120)
async def test_a_node_client_applies_a_job_reads_typed_errors_and_verifies_a_call(
    cluster: Cluster,
) -> None:
    assert (SDK / "node_modules").is_dir(), "sdk/typescript is not installed: run make setup"
    tenant = await cluster.tenant()
    env = {
        "PATH": os.environ["PATH"],
        "SUNDIAL_API": cluster.services.processes["api"].address,
        "SUNDIAL_TOKEN": tenant.token,
        "SUNDIAL_SIGNING_SECRET": tenant.signing_secret,
        "SUNDIAL_PROTO_PATH": str(ROOT / "proto"),
        # google/rpc/*.proto, as googleapis-common-protos installs them.
        "SUNDIAL_GOOGLE_PROTO_PATH": str(Path(next(iter(google.rpc.__path__))).parents[1]),
    }
    done = await asyncio.to_thread(
        subprocess.run,
        ["node", "--test", "test/e2e.test.mjs"],
        cwd=SDK,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# pass 1" in done.stdout and "# skipped 0" in done.stdout, done.stdout
