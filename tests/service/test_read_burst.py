"""A burst of reads waits its turn: no 'Too many connections', the loops keep running, and
a scrape never takes the loops' connections."""

from __future__ import annotations

from collections import Counter

import anyio
import httpx
import pytest
import redis
from redis.asyncio import BlockingConnectionPool, Redis

from gencoach.constants import Keys
from gencoach.metrics.catalog import EVENTS
from gencoach.reporting.client import Reporter
from gencoach.service.metrics import ControllerMetrics
from gencoach.service.pools import API_SOCKET_TIMEOUT_S, pooled_client
from tests.support.controller import ControllerProcess
from tests.support.graphs import RUN_STARTED
from tests.support.metrics import parse
from tests.support.processes import STARTUP_S

BURST = 200
RUNS = 40
LATE_RUN = "reported-during-the-burst"


def _passes(controller: ControllerProcess) -> int:
    """How many reconcile passes the controller logged so far."""
    return sum(1 for e in controller.log_events() if e.get("event") == "reconcile.pass")


async def _burst_until_loops_move(
    controller: ControllerProcess, client: redis.Redis, redis_url: str
) -> list[httpx.Response | Exception]:
    """Keep BURST reads in flight until, after the first wave, intake has applied a run
    reported straight to the stream and reconcile has passed twice (or fail naming what
    did not move)."""
    answers: list[httpx.Response | Exception] = []
    done = anyio.Event()
    limits = httpx.Limits(max_connections=BURST, max_keepalive_connections=0)
    meta = Keys().run(LATE_RUN, "meta")
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:

        async def reader() -> None:
            while not done.is_set():
                try:
                    answers.append(await http.get(f"{controller.url}/v1/runs"))
                except httpx.HTTPError as error:
                    answers.append(error)

        def report() -> None:
            with Reporter(LATE_RUN, redis_url=redis_url) as reporter:
                reporter.emit("run.started", **RUN_STARTED)

        async with anyio.create_task_group() as tg:
            for _ in range(BURST):
                tg.start_soon(reader)
            try:
                with anyio.move_on_after(STARTUP_S):
                    while len(answers) < BURST:  # noqa: ASYNC110 - a count, no event
                        await anyio.sleep(0.05)
                before = await anyio.to_thread.run_sync(_passes, controller)
                await anyio.to_thread.run_sync(report)
                applied, passes = False, before
                with anyio.move_on_after(STARTUP_S):
                    while not (applied and passes >= before + 2):
                        await anyio.sleep(0.2)
                        applied = bool(await anyio.to_thread.run_sync(client.exists, meta))
                        passes = await anyio.to_thread.run_sync(_passes, controller)
                assert applied, f"intake did not apply {LATE_RUN} during the burst"
                assert passes >= before + 2, f"{passes - before} reconcile passes in the burst"
            finally:
                done.set()
    return answers


def test_200_concurrent_reads_are_answered_or_told_to_retry(
    controller: ControllerProcess, redis_client: redis.Redis, redis_url: str
) -> None:
    """While 200 reads are in flight at every moment, each is 200, or 503 with Retry-After;
    none fails on the pool; and the loops go on: intake applies a run reported meanwhile,
    reconcile keeps passing."""
    events = [
        {"type": "run.started", "run_id": f"burst-{n}", "seq": 0, **RUN_STARTED}
        for n in range(RUNS)
    ]
    assert httpx.post(f"{controller.url}/v1/events", json=events).status_code == 202
    answers = anyio.run(_burst_until_loops_move, controller, redis_client, redis_url)
    errors = [repr(a) for a in answers if isinstance(a, Exception)]
    assert errors == []
    responses = [a for a in answers if isinstance(a, httpx.Response)]
    statuses = Counter(r.status_code for r in responses)
    details = Counter(r.json()["detail"][:60] for r in responses if r.status_code != 200)
    assert set(statuses) <= {200, 503}, (statuses, details)
    assert statuses[200] >= len(responses) // 2, (statuses, details)
    for refused in (r for r in responses if r.status_code == 503):
        assert refused.headers["retry-after"] == "1"
        # Busy (its request waited past api.busy_wait_s), or refused at the connection limit
        # (closed connections still count for a moment while 200 are opened again).
        detail = refused.json()["detail"]
        assert detail.startswith(("the controller is busy", "the controller has ")), detail
    log = controller.log_text()
    assert "Too many connections" not in log
    assert "No connection available" not in log
    assert "reconcile.redis_unavailable" not in log
    assert httpx.get(f"{controller.url}/health").status_code == 200


@pytest.mark.asyncio
async def test_a_scrape_never_takes_the_loops_connections(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """With every connection of the loops' pool taken, a scrape still flushes the counts
    and answers at once, on the API's pool."""
    loops = Redis(connection_pool=BlockingConnectionPool.from_url(redis_url, max_connections=1))
    api = pooled_client(redis_url, 4, 5.0, API_SOCKET_TIMEOUT_S)
    held = await loops.connection_pool.get_connection()

    async def no_backlogs() -> list[object]:
        return []

    metrics = ControllerMetrics(loops, api, Keys(), no_backlogs)  # type: ignore[arg-type]
    metrics.recorder.inc(EVENTS, "run.started", "applied", by=3)
    try:
        with anyio.fail_after(10):
            text = await metrics.render()
    finally:
        await loops.connection_pool.release(held)
        for client in (loops, api):  # a pool given to a client outlives its aclose()
            await client.aclose()
            await client.connection_pool.disconnect()
    samples = parse(text.decode())
    assert samples.value("gencoach_events_total", type="run.started", outcome="applied") == 3
    assert samples.value("gencoach_runs", state="active") == 0
