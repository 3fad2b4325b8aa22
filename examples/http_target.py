"""An idempotent HTTP target for Sundial in Python (Starlette, the ASGI toolkit FastAPI is
built on; the same handler body works as a FastAPI route).

Every call is checked with :func:`sundial.client.verify_signature` for purpose ``run``
and this target's URL as the job names it (``SUNDIAL_TARGET_URL``): 401 when it does not
verify (a permanent failure, so a forged call is never retried; a notification or a call
signed for another target of the tenant does not verify here), and each run's work is
done once per ``Idempotency-Key``, however often Sundial delivers it (at least once: a
retry after a timeout, an executor crash, a replay)::

    SUNDIAL_SIGNING_SECRET=... SUNDIAL_TARGET_URL=https://host/hook \
        uvicorn examples.http_target:app --port 8090

Keep ``done`` in your database in production (a unique key on the idempotency key,
written in the same transaction as the work), not in memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sundial.client import SignatureError, verify_signature


def make_app(secrets: list[str], url: str, work: Callable[[str, bytes], str]) -> Starlette:
    """The target: ``POST /hook`` does ``work(idempotency_key, body)`` once per key;
    ``url`` is this endpoint's URL as the job's target names it."""
    done: dict[str, str] = {}

    async def hook(request: Request) -> Response:
        body = await request.body()
        key = request.headers.get("idempotency-key", "")
        try:
            verify_signature(
                request.headers.get("sundial-signature", ""),
                secrets=secrets,
                idempotency_key=key,
                attempt=request.headers.get("sundial-attempt", ""),
                body=body,
                purpose="run",
                destination=url,
            )
        except SignatureError as exc:
            return JSONResponse({"error": str(exc)}, status_code=401)
        if key not in done:
            done[key] = work(key, body)
        return JSONResponse({"result": done[key]})

    app = Starlette(routes=[Route("/hook", hook, methods=["POST"])])
    app.state.done = done
    return app


app = make_app(
    [os.environ.get("SUNDIAL_SIGNING_SECRET", "")],
    os.environ.get("SUNDIAL_TARGET_URL", ""),
    lambda key, body: f"{len(body)} bytes done",
)
