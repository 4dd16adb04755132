"""At most `limit` requests are served at once; one waiting past `wait_s` is told to retry."""

from __future__ import annotations

import anyio
import httpx
import pytest
from starlette.types import Receive, Scope, Send

from gencoach.service.web.httpserver import Concurrency


@pytest.mark.asyncio
async def test_a_request_waiting_too_long_for_its_turn_is_503_with_retry_after() -> None:
    """One slot, held: the next request waits `wait_s`, then gets 503 and Retry-After: 1."""
    entered, release = anyio.Event(), anyio.Event()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        entered.set()
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    limited = Concurrency(app, limit=1, wait_s=0.2)
    transport = httpx.ASGITransport(app=limited)
    answers: list[httpx.Response] = []
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:

        async def ask() -> None:
            answers.append(await client.get("/v1/runs"))

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            with anyio.fail_after(10):
                await entered.wait()  # the first request holds the slot
            refused = await client.get("/v1/runs")
            release.set()
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["detail"] == (
        "the controller is busy: 1 requests in progress for over 0.2 s "
        "(api.max_concurrent_requests); try again"
    )
    assert [a.status_code for a in answers] == [200]
