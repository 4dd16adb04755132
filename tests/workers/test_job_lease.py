"""Worker jobs hold their request's lease: renewed while they run, stopped when it is gone."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import redis

from gencoach.workers.context import WorkerContext, worker_context
from gencoach.workers.job_functions import run_diagnosis
from tests.support.llm_server import ScriptedLLMServer, delayed, held, json_reply
from tests.workers.builders import (
    FAILURE_ANSWER,
    admit,
    counts,
    diagnosis_job,
    release,
    results,
    settings_for,
)
from tests.workers.pools import wait_until


def test_the_lease_is_renewed_while_a_slow_job_runs(
    context: WorkerContext, llm_server: ScriptedLLMServer, redis_client: redis.Redis
) -> None:
    """An LLM reply held past a 1 s lease: the slot stays pending until the job ends."""
    job = diagnosis_job(lease_s=1.0)
    admit(context.redis_url, job.lease)
    answer = threading.Event()
    llm_server.script(held(answer, json_reply(FAILURE_ANSWER)))
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(run_diagnosis, job.model_dump_json())
        wait_until(lambda: llm_server.requests, 30, "the job to call the LLM")
        time.sleep(2 * job.lease.lease_s)  # the scenario: the job outlives its first lease
        assert counts(context.redis_url, job.lease).pending == 1
        answer.set()
        running.result(timeout=15)
    (result,) = results(redis_client)
    assert result.status == "done"


def test_a_job_whose_lease_is_gone_stops_early(
    context: WorkerContext, llm_server: ScriptedLLMServer, redis_client: redis.Redis
) -> None:
    """When the controller reclaims the slot, the job stops at the next renewal: abandoned."""
    job = diagnosis_job(lease_s=0.6)
    admit(context.redis_url, job.lease)
    llm_server.script(delayed(20.0, json_reply(FAILURE_ANSWER)))
    started = time.monotonic()
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(run_diagnosis, job.model_dump_json())
        while not llm_server.requests and time.monotonic() - started < 5:
            time.sleep(0.02)
        release(context.redis_url, job.lease)
        running.result(timeout=10)
    assert time.monotonic() - started < 5
    (result,) = results(redis_client)
    assert result.status == "abandoned"
    assert result.reason == (
        "lease of request req-1 is gone: the controller released or reclaimed its pending "
        "slot, or the request no longer waits for this job (it ended or was retried)"
    )


def test_a_job_never_admitted_does_no_work(
    context: WorkerContext, llm_server: ScriptedLLMServer, redis_client: redis.Redis
) -> None:
    """Without a live lease at start, the job is abandoned before asking the LLM anything."""
    run_diagnosis(diagnosis_job().model_dump_json())
    (result,) = results(redis_client)
    assert result.status == "abandoned"
    assert llm_server.requests == []


def test_a_job_past_its_time_limit_reports_an_error(
    llm_server: ScriptedLLMServer, redis_url: str, redis_client: redis.Redis
) -> None:
    """A job still waiting at `workers.job_timeout_s` stops and publishes an error saying so."""
    settings = settings_for(llm_server.endpoint, workers={"job_timeout_s": 1})
    job = diagnosis_job()
    admit(redis_url, job.lease)
    llm_server.script(delayed(20.0, json_reply(FAILURE_ANSWER)))
    started = time.monotonic()
    with worker_context(settings, redis_url):
        run_diagnosis(job.model_dump_json())
    assert time.monotonic() - started < 5
    (result,) = results(redis_client)
    assert (result.status, result.reason) == ("error", "the job did not finish within 1.0 s")
