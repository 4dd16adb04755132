"""A worker taking a job moves its request to the job's running state in the call that first
renews its slot, before any work: nothing asks RQ whether the job started."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import anyio
import redis
import redis.asyncio

from gencoach.config import Limits
from gencoach.constants import Keys
from gencoach.limits import StageLimits
from gencoach.service.coaching.decider import Admitted, Decision, WorkerLost, decide
from gencoach.service.coaching.requests import CoachingRequest, RequestStore
from gencoach.workers.context import WorkerContext
from gencoach.workers.job_functions import run_diagnosis
from tests.support.llm_server import ScriptedLLMServer, held, json_reply
from tests.support.requests import force_admit
from tests.workers.builders import FAILURE_ANSWER, RUN, STAGE, diagnosis_job, results
from tests.workers.pools import wait_until

REQUEST_ID = "req-1"


def _opportunity() -> CoachingRequest:
    return CoachingRequest(
        request_id=REQUEST_ID,
        run_id=RUN,
        route="failure",
        kind="failure",
        type_coaching="failure:decision",
        candidate_id=13,
        candidate_gen_id="c13",
        stage_id=int(STAGE["id"]),
        state="opportunity",
    ).moved("opportunity")


def _queue(redis_url: str, lease_s: float = 30.0, *, retried: bool = False) -> None:
    """Store the request queued for its diagnosis (attempt 1, or 2 once retried), holding
    its slot, as the controller leaves it when it enqueues the job."""

    async def go() -> None:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            store = RequestStore(client, Keys())
            opportunity = _opportunity()
            assert await store.create(opportunity)
            decided = decide(opportunity, Admitted("diagnosis"))
            assert isinstance(decided, Decision)
            assert await force_admit(store, opportunity, decided.request, Limits(), lease_s)
            if retried:
                again = decide(decided.request, WorkerLost("the lease lapsed"))
                assert isinstance(again, Decision)
                assert await force_admit(store, decided.request, again.request, Limits(), lease_s)
        finally:
            await client.aclose()

    anyio.run(go)


def _stored(redis_url: str) -> CoachingRequest:
    async def go() -> CoachingRequest:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            found = await RequestStore(client, Keys()).get(RUN, REQUEST_ID)
            assert found is not None
            return found
        finally:
            await client.aclose()

    return anyio.run(go)


def _lease_alive(redis_url: str) -> bool:
    async def go() -> bool:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            return await StageLimits(client, Keys()).lease_alive(RUN, int(STAGE["id"]), REQUEST_ID)
        finally:
            await client.aclose()

    return anyio.run(go)


def test_the_worker_moves_its_request_to_running_before_asking_the_backend(
    context: WorkerContext, llm_server: ScriptedLLMServer, redis_client: redis.Redis
) -> None:
    """The request is `diagnosing` (moved by the worker, its slot renewed) before the
    backend is asked; the result then finds it there."""
    _queue(context.redis_url)
    answer = threading.Event()
    llm_server.script(held(answer, json_reply(FAILURE_ANSWER)))
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(run_diagnosis, diagnosis_job().model_dump_json())
        wait_until(lambda: llm_server.requests, 30, "the job to call the LLM")
        asked_while = _stored(context.redis_url).state
        answer.set()
        running.result(timeout=30)
    (result,) = results(redis_client)
    assert result.status == "done"
    assert asked_while == "diagnosing"
    request = _stored(context.redis_url)
    assert [step.state for step in request.history] == [
        "opportunity",
        "admitted",
        "queued",
        "diagnosing",
    ]
    assert request.history[-1].reason == "a worker took the job"
    assert _lease_alive(context.redis_url)


def test_a_job_its_request_no_longer_waits_for_is_stopped_before_any_work(
    context: WorkerContext, llm_server: ScriptedLLMServer, redis_client: redis.Redis
) -> None:
    """The request was retried (it waits for attempt 2): attempt 1's job, taken late, does
    not move it and asks no backend; its result says its slot is not its own."""
    _queue(context.redis_url, retried=True)
    run_diagnosis(diagnosis_job().model_dump_json())
    (result,) = results(redis_client)
    assert result.status == "abandoned"
    assert result.reason is not None
    assert "no longer waits for this job" in result.reason
    assert llm_server.requests == []
    request = _stored(context.redis_url)
    assert (request.state, request.attempt) == ("queued", 2)


def test_a_job_whose_slot_lapsed_in_queue_is_stopped_and_the_request_stays_queued(
    context: WorkerContext, llm_server: ScriptedLLMServer, redis_client: redis.Redis
) -> None:
    """The lease lapsed before the worker took the job: the taking is refused as a whole
    (the request stays `queued`, for the controller to retry) and the job stops."""
    _queue(context.redis_url, lease_s=0.05)
    anyio.run(anyio.sleep, 0.2)  # the lease's own expiry, by the Redis server's clock
    run_diagnosis(diagnosis_job().model_dump_json())
    (result,) = results(redis_client)
    assert result.status == "abandoned"
    assert result.reason is not None
    assert "lapsed before this worker renewed it" in result.reason
    assert llm_server.requests == []
    assert _stored(context.redis_url).state == "queued"


def _carrying(record: str, **changes: object) -> str:
    """A diagnosis job whose lease carries `record` as its request's copy."""
    job = diagnosis_job(**changes)
    lease = job.lease.model_copy(update={"record": record})
    return job.model_copy(update={"lease": lease}).model_dump_json()


def test_a_job_carrying_its_request_moves_it_and_reports_the_record_it_left(
    context: WorkerContext, llm_server: ScriptedLLMServer, redis_client: redis.Redis
) -> None:
    """The job carries its request as queued: the worker moves it on from that copy, and
    its result carries the record the taking stored, for the controller to move on from."""
    _queue(context.redis_url)
    llm_server.script(json_reply(FAILURE_ANSWER))
    run_diagnosis(_carrying(_stored(context.redis_url).model_dump_json()))
    (result,) = results(redis_client)
    assert result.status == "done"
    stored = _stored(context.redis_url)
    assert stored.state == "diagnosing"
    assert result.record is not None
    assert CoachingRequest.model_validate_json(result.record) == stored


def test_a_stale_or_broken_copy_of_the_request_costs_a_read_not_a_move(
    context: WorkerContext, llm_server: ScriptedLLMServer, redis_client: redis.Redis
) -> None:
    """The copy a job carries is its request queued for attempt 1, but the request was
    retried since: the move from the copy is refused, the stored request is read, and
    attempt 2's job moves it on all the same. A copy that is not a request is read past."""
    _queue(context.redis_url, retried=True)
    first = decide(_opportunity(), Admitted("diagnosis"))
    assert isinstance(first, Decision)
    llm_server.script(json_reply(FAILURE_ANSWER), json_reply(FAILURE_ANSWER))
    run_diagnosis(_carrying(first.request.model_dump_json(), attempt=2))
    (result,) = results(redis_client)
    assert result.status == "done"
    stored = _stored(context.redis_url)
    assert (stored.state, stored.attempt) == ("diagnosing", 2)
    redis_client.delete(Keys().results)
    run_diagnosis(_carrying("not a request", attempt=2))
    (result,) = results(redis_client)
    assert result.status == "done"
    assert _stored(context.redis_url).history == stored.history
