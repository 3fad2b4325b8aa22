"""A client generated from /openapi.json by well-known generators (openapi-typescript for
the types, openapi-fetch for the calls; tools/openapi, installed by make setup) creates,
lists and pauses jobs against a running API, its code type-checked against the document
first."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from sundial.api.web import HttpServer
from tests.integration.api.support import TARGET_URL, StartApi

ROOT = Path(__file__).resolve().parents[3]
TOOLS = ROOT / "tools" / "openapi"
CLIENT = Path(__file__).parent / "openapi" / "client.ts"

pytestmark = pytest.mark.timeout(120)


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=90, check=False
    )
    assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
    return done.stdout


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
async def test_a_generated_client_creates_lists_and_pauses_jobs(
    start_api: StartApi, tmp_path: Path
) -> None:
    assert (TOOLS / "node_modules").is_dir(), "tools/openapi is not installed: run make setup"
    api = await start_api(http_listen="127.0.0.1:0")
    tenant = await api.tenant("acme")
    (server,) = [c for c in api.service.components if isinstance(c, HttpServer)]
    async with (
        aiohttp.ClientSession() as session,
        session.get(server.url + "/openapi.json") as answer,
    ):
        assert answer.status == 200
        served = await answer.read()
    (tmp_path / "openapi.json").write_bytes(served)
    (tmp_path / "node_modules").symlink_to(TOOLS / "node_modules")
    shutil.copy(CLIENT, tmp_path / "client.ts")
    (tmp_path / "package.json").write_text('{"type": "module"}')
    (tmp_path / "tsconfig.json").write_text(
        json.dumps(
            {
                "compilerOptions": {
                    "target": "ES2022",
                    "module": "NodeNext",
                    "moduleResolution": "NodeNext",
                    "strict": True,
                    "skipLibCheck": True,
                    "types": [],
                    "lib": ["ES2022", "DOM"],
                    "outDir": "out",
                },
                "files": ["client.ts", "schema.d.ts"],
            }
        )
    )
    bin_dir = TOOLS / "node_modules" / ".bin"

    def build() -> None:
        run([str(bin_dir / "openapi-typescript"), "openapi.json", "-o", "schema.d.ts"], tmp_path)
        run([str(bin_dir / "tsc"), "-p", "tsconfig.json"], tmp_path)  # type-checks, emits

    await asyncio.to_thread(build)
    env = {
        "PATH": os.environ["PATH"],
        "SUNDIAL_HTTP": server.url,
        "SUNDIAL_TOKEN": tenant.token,
        "SUNDIAL_TARGET_URL": TARGET_URL,
    }
    output = await asyncio.to_thread(run, ["node", "out/client.js"], tmp_path, env)
    result: dict[str, Any] = json.loads(output)
    assert result["created"]["jobId"] == "openapi-report"
    assert result["created"]["version"] == "1"  # int64 as a string, as the document says
    assert result["listed"] == ["openapi-report"]
    assert result["paused"]["affected"] == "1" and result["paused"]["jobIds"] == ["openapi-report"]
    assert result["got"]["paused"] is True
    assert result["got"]["pauseNote"] == "from the generated client"
    assert result["error"]["status"] == 400
    assert result["error"]["code"] == "invalid_argument"
    assert result["error"]["message"].startswith("schedule.cron: ")
