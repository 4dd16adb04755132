"""A diagnosis's repair handed to the worker that ran the diagnosis: one RQ job a
correction, and no repair lost to a worker that stopped waiting."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import anyio
import redis
import redis.asyncio

from gencoach.constants import Keys
from gencoach.followups import announce, await_follow_up, hand_over, handed
from gencoach.service.dispatching.dispatch import RQDispatcher
from gencoach.workers.context import WorkerContext, worker_context
from gencoach.workers.job_functions import run_diagnosis
from gencoach.workers.resources import JobResources
from tests.support.agent_server import ScriptedAgent
from tests.support.llm_server import ScriptedLLMServer, json_reply
from tests.workers.builders import (
    FAILURE_ANSWER,
    RUN,
    admit,
    diagnosis_job,
    repair_job,
    results,
    settings_for,
)
from tests.workers.pools import wait_until

REQUEST = "req-1"


def _waiting(redis_url: str) -> None:
    """Mark a worker waiting for attempt 1's repair, as one does as it publishes a diagnosis."""

    async def go() -> None:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            pipe = client.pipeline(transaction=False)
            announce(pipe, Keys(), RUN, REQUEST, 1)
            await pipe.execute()
        finally:
            await client.aclose()

    anyio.run(go)


def _follow_up(redis_url: str, wait_s: float) -> str | None:
    async def go() -> str | None:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            return await await_follow_up(client, Keys(), RUN, REQUEST, 1, wait_s)
        finally:
            await client.aclose()

    return anyio.run(go)


def test_the_repair_runs_in_the_job_that_diagnosed(
    llm_server: ScriptedLLMServer,
    scripted_agent: ScriptedAgent,
    redis_url: str,
    redis_client: redis.Redis,
) -> None:
    """The diagnosis is published with its worker waiting; the repair handed over then runs
    in the same call of the job function, and both results are published."""
    diagnosis, repair = diagnosis_job(), repair_job(scripted_agent.url)
    admit(redis_url, diagnosis.lease)
    llm_server.script(json_reply(FAILURE_ANSWER))
    settings = settings_for(llm_server.endpoint)
    with (
        worker_context(settings, redis_url, follow_up_wait_s=30.0),
        ThreadPoolExecutor(1) as pool,
    ):
        running = pool.submit(run_diagnosis, diagnosis.model_dump_json())
        wait_until(lambda: results(redis_client), 30, "the diagnosis to be published")
        assert not running.done()
        payload = repair.model_dump_json()
        assert hand_over(redis_client, Keys(), RUN, REQUEST, 1, payload, 30.0)
        running.result(timeout=30)
    assert [(result.job, result.status) for result in results(redis_client)] == [
        ("diagnosis", "done"),
        ("repair", "done"),
    ]
    assert len(scripted_agent.coaching_requests) == 1


def test_a_repair_built_after_the_worker_stopped_waiting_goes_to_rq(
    redis_client: redis.Redis, redis_url: str
) -> None:
    """No worker waits (its wait ended, or it never announced one): the hand-over is refused,
    nothing is left behind, and the dispatcher would enqueue the repair."""
    assert not hand_over(redis_client, Keys(), RUN, REQUEST, 1, "{}", 30.0)
    _waiting(redis_url)
    assert _follow_up(redis_url, 0.1) is None
    assert not hand_over(redis_client, Keys(), RUN, REQUEST, 1, "{}", 30.0)
    assert not handed(redis_client, Keys(), RUN, REQUEST, 1)
    assert redis_client.keys("*followup*") == []


def test_a_repair_handed_over_as_the_wait_ends_is_still_taken(
    redis_client: redis.Redis, redis_url: str
) -> None:
    """The controller claims the waiting mark just after the worker's wait timed out, before
    it gave up: giving up finds the repair there, and takes it."""
    _waiting(redis_url)
    assert hand_over(redis_client, Keys(), RUN, REQUEST, 1, '{"repair": 1}', 30.0)
    # A wait of 0 goes straight to giving up, as a wait that just timed out does.
    assert _follow_up(redis_url, 0) == '{"repair": 1}'


def test_a_handed_repair_counts_waiting_until_its_lease_time_passes(
    redis_client: redis.Redis, redis_url: str
) -> None:
    """With no RQ job of its own, a handed repair is `waiting` to the controller's holder
    while its worker has not taken it; once its lease's time passes (the worker died before
    taking it), it has `ended`, and the request is retried."""
    _waiting(redis_url)
    assert hand_over(redis_client, Keys(), RUN, REQUEST, 1, "{}", 0.3)

    async def state() -> str:
        dispatcher = RQDispatcher(redis_url, Keys(), 60.0)
        return await dispatcher.job_state(RUN, REQUEST, "repair", 1)

    assert anyio.run(state) == "waiting"
    deadline = time.monotonic() + 10
    while handed(redis_client, Keys(), RUN, REQUEST, 1) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert anyio.run(state) == "ended"


def test_every_job_of_a_full_worker_can_wait_for_its_repair_at_once(
    llm_server: ScriptedLLMServer, redis_url: str, redis_client: redis.Redis
) -> None:
    """A wait for a repair holds a Redis connection (a blocking read): with every job of a
    worker of concurrency 64 waiting while each holds a second connection, its shared pool
    does not run out (redis-py's default pool stops at 100 connections)."""
    settings = settings_for(llm_server.endpoint, workers={"concurrency": 64})

    async def go() -> list[str | None]:
        context = WorkerContext(settings, redis_url)
        async with JobResources(context) as resources:
            found: list[str | None] = []

            async def hold_another(index: int) -> None:
                await resources.redis.blpop([f"nothing-{index}"], 1)

            async def job(index: int) -> None:
                request = f"req-{index}"
                pipe = resources.redis.pipeline(transaction=False)
                announce(pipe, Keys(), RUN, request, 1)
                await pipe.execute()
                async with anyio.create_task_group() as both:
                    both.start_soon(hold_another, index)
                    found.append(
                        await await_follow_up(resources.redis, Keys(), RUN, request, 1, 1.0)
                    )

            async with anyio.create_task_group() as jobs:
                for index in range(64):
                    jobs.start_soon(job, index)
            return found

    assert anyio.run(go) == [None] * 64
