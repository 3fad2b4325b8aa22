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
from sundial.core.signing import Purpose, signature
from sundial.v1 import job_pb2, run_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.helpers.cluster import Cluster
from tests.helpers.eventually import assert_eventually


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def serving(app: object, port: int) -> AsyncIterator[int]:
    """``app`` on loopback ``port``, served by uvicorn until the block ends."""
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
    port = free_port()
    url = f"http://127.0.0.1:{port}/hook"
    app = make_app([tenant.signing_secret], url, lambda key, body: calls.append(key) or "done")
    async with serving(app, port):
        job = await tenant.create_job(
            job_pb2.Job(
                name="example",
                schedule=job_pb2.Schedule(cron="0 3 * * *"),
                target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)),
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
        secret = [tenant.signing_secret.encode()]
        now = datetime.now(UTC)
        again = signature(secret, now, run.run_key, 2, body, purpose=Purpose.RUN, to=url)
        assert await asyncio.to_thread(post, port, again, run.run_key, body) == 200
        assert calls == [run.run_key]
        # A forged call: refused with 401 (a permanent failure for Sundial), no work.
        key = "x@2026-01-01T00:00:00Z"
        forged = signature([b"not-the-secret"], now, key, 2, b"", purpose=Purpose.RUN, to=url)
        assert await asyncio.to_thread(post, port, forged, key, b"") == 401
        # Genuine, but signed as a notification or for another target: refused too.
        for purpose, to in ((Purpose.NOTIFICATION, url), (Purpose.RUN, url + "/other")):
            replayed = signature(secret, now, key, 2, b"", purpose=purpose, to=to)
            assert await asyncio.to_thread(post, port, replayed, key, b"") == 401
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
