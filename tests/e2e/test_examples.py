"""examples/http_target.py as a real target: a job's run calls it through the executor,
the signature verifies, the work is done once, and a forged call is refused (401, final)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import uvicorn

from examples.http_target import make_app
from sundial.scheduler.ledger._signing import signature
from sundial.v1 import job_pb2, run_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.helpers.cluster import Cluster
from tests.helpers.eventually import assert_eventually


@contextlib.asynccontextmanager
async def serving(app: object) -> AsyncIterator[int]:
    """``app`` on a free loopback port, served by uvicorn until the block ends."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    await assert_eventually(lambda: server.started, timeout_s=10, what="uvicorn started")
    try:
        yield port
    finally:
        server.should_exit = True
        await task


async def test_the_example_http_target_verifies_and_does_each_run_once(cluster: Cluster) -> None:
    tenant = await cluster.tenant()
    calls: list[str] = []
    app = make_app([tenant.signing_secret], lambda key, body: calls.append(key) or "done")
    async with serving(app) as port:
        job = await tenant.create_job(
            job_pb2.Job(
                name="example",
                schedule=job_pb2.Schedule(cron="0 3 * * *"),
                target=job_pb2.Target(http=job_pb2.HttpTarget(url=f"http://127.0.0.1:{port}/hook")),
                payload=b'{"report": "usage"}',
            )
        )
        run = (await tenant.call("TriggerJob", pb.TriggerJobRequest(job_id=job.job_id))).run

        async def succeeded() -> None:
            got = await tenant.call("GetRun", pb.GetRunRequest(run_key=run.run_key))
            assert got.run.status == run_pb2.RUN_STATUS_SUCCEEDED, got.run

        await assert_eventually(succeeded, timeout_s=30, interval_s=0.3)
        assert calls == [run.run_key]
        # The same run delivered again (a retry, a replay): a genuine signature, no work.
        body = b'{"report": "usage"}'
        again = signature([tenant.signing_secret.encode()], datetime.now(UTC), run.run_key, 2, body)
        assert await asyncio.to_thread(post, port, again, run.run_key, body) == 200
        assert calls == [run.run_key]
        # A forged call: refused with 401 (a permanent failure for Sundial), no work.
        forged = signature([b"not-the-secret"], datetime.now(UTC), "x@2026-01-01T00:00:00Z", 1, b"")
        assert await asyncio.to_thread(post, port, forged, "x@2026-01-01T00:00:00Z", b"") == 401
        assert calls == [run.run_key]


def post(port: int, signed: str, key: str, body: bytes) -> int:
    """POST ``body`` to the example as Sundial would; the status code."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/hook",
        data=body,
        headers={"Sundial-Signature": signed, "Idempotency-Key": key, "Sundial-Attempt": "2"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return refused.code
