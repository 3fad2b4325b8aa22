"""The demo target the local stack starts: answers every call and logs it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest

from sundial.devstack import start_demo_target
from tests.helpers.eventually import assert_eventually

pytestmark = pytest.mark.timeout(30)


async def test_demo_target_answers_and_logs_each_call(tmp_path: Path) -> None:
    demo = await asyncio.to_thread(start_demo_target, tmp_path)
    try:
        async with (
            aiohttp.ClientSession(trust_env=False) as client,
            client.post(
                f"{demo.url}/hook",
                data=b'{"report":"usage"}',
                headers={"Idempotency-Key": "job@2026-03-08T14:00:00Z", "Sundial-Attempt": "1"},
            ) as answer,
        ):
            assert answer.status == 200

        def logged() -> dict[str, object]:
            lines = [
                json.loads(line)
                for line in (tmp_path / "demo-target.log").read_text().splitlines()
                if line.startswith("{")
            ]
            assert lines, "nothing logged yet"
            return lines[-1]

        entry = await assert_eventually(logged, timeout_s=5)
        assert entry["idempotency_key"] == "job@2026-03-08T14:00:00Z"
        assert entry["path"] == "/hook"
        assert entry["body_bytes"] == 18
    finally:
        await asyncio.to_thread(demo.stop)
