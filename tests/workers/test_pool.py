"""The worker pool in a real subprocess: both queues served, shutdowns, crashes, and `enqueue`."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from rq import Queue, Worker

from gencoach.constants import QUEUE_DIAGNOSIS, QUEUE_REPAIR
from gencoach.rq_adapter import JOB_FUNCTIONS, enqueue, job_id
from tests.support.agent_server import ScriptedAgent
from tests.support.llm_server import ScriptedLLMServer, delayed, json_reply
from tests.support.processes import pid_alive, wait_gone
from tests.workers.builders import (
    FAILURE_ANSWER,
    admit,
    counts,
    diagnosis_job,
    repair_job,
    results,
    settings_data,
)
from tests.workers.pools import PoolProcess, child_pids, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def pool_factory(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis, llm_server: ScriptedLLMServer
) -> Iterator[Callable[[], PoolProcess]]:
    """Make pool processes using the scripted LLM server; all are killed after the test."""
    made: list[PoolProcess] = []

    def make() -> PoolProcess:
        folder = tmp_path / f"pool{len(made)}"
        folder.mkdir()
        pool = PoolProcess(folder, settings_data(llm_server.endpoint), redis_url)
        made.append(pool)
        return pool

    yield make
    for pool in made:
        pool.stop()


def test_job_ids_are_what_rq_accepts() -> None:
    """Request ids with colons become RQ-safe ids, distinct from ids that merely look alike."""
    plain = diagnosis_job(request_id="req-1")
    colons = diagnosis_job(request_id="run:12:failure")
    underscores = diagnosis_job(request_id="run_12_failure")
    assert job_id(plain) == "req-1-diagnosis-1"
    assert job_id(colons).startswith("run_12_failure_")
    assert job_id(colons).endswith("-diagnosis-1")
    assert job_id(colons) != job_id(underscores) == "run_12_failure-diagnosis-1"


def test_enqueue_puts_each_job_on_its_queue_once(
    redis_client: redis.Redis, scripted_agent: ScriptedAgent
) -> None:
    """Diagnosis goes to the diagnosis queue, repair to the repair queue; a repeat is a no-op."""
    diagnosis, repair = diagnosis_job(), repair_job(scripted_agent.url)
    first = enqueue(redis_client, diagnosis, job_timeout_s=60)
    assert enqueue(redis_client, diagnosis, job_timeout_s=60) == first
    enqueue(redis_client, repair, job_timeout_s=60)
    queued = Queue(QUEUE_DIAGNOSIS, connection=redis_client).jobs
    assert [job.id for job in queued] == [first]
    assert queued[0].func_name == JOB_FUNCTIONS["diagnosis"]
    assert queued[0].args == (diagnosis.model_dump_json(),)
    # RQ's limit comes after the job's own: a diagnosis's covers the repair its worker
    # may do next (60 + 60 s, the 2 s wait for it, the 30 s margin), a repair's its own.
    assert queued[0].timeout == 152
    (repaired,) = Queue(QUEUE_REPAIR, connection=redis_client).jobs
    assert repaired.func_name == JOB_FUNCTIONS["repair"]
    assert repaired.timeout == 90


@pytest.mark.timeout(90)
def test_a_burst_pool_serves_both_queues_and_exits_zero(
    pool_factory: Callable[[], PoolProcess],
    llm_server: ScriptedLLMServer,
    scripted_agent: ScriptedAgent,
    redis_client: redis.Redis,
    redis_url: str,
) -> None:
    """One process serves both queues, repair first, runs a diagnosis and a repair job, exits 0."""
    diagnosis = diagnosis_job(request_id="req-d")
    repair = repair_job(scripted_agent.url, request_id="req-r")
    for job in (diagnosis, repair):
        admit(redis_url, job.lease)
        enqueue(redis_client, job, job_timeout_s=60)
    llm_server.script(json_reply(FAILURE_ANSWER))
    pool = pool_factory()
    pool.start(QUEUE_REPAIR, QUEUE_DIAGNOSIS, processes=1, burst=True)
    assert pool.wait(60) == 0, pool.log()
    done = {result.request_id: (result.job, result.status) for result in results(redis_client)}
    assert done == {"req-d": ("diagnosis", "done"), "req-r": ("repair", "done")}
    (started,) = pool.events("worker.started")
    assert started["queues"] == [QUEUE_REPAIR, QUEUE_DIAGNOSIS]


@pytest.mark.timeout(90)
def test_sigterm_lets_the_current_job_finish_then_exits_zero(
    pool_factory: Callable[[], PoolProcess],
    llm_server: ScriptedLLMServer,
    redis_client: redis.Redis,
    redis_url: str,
) -> None:
    """A warm shutdown waits for the job in flight to publish its result, then exits 0."""
    pool = pool_factory()
    pool.start(QUEUE_DIAGNOSIS, QUEUE_REPAIR, processes=2)
    job = diagnosis_job()
    admit(redis_url, job.lease)
    llm_server.script(delayed(2.0, json_reply(FAILURE_ANSWER)))
    enqueue(redis_client, job, job_timeout_s=60)
    wait_until(lambda: llm_server.requests, 30, "the job to call the LLM")
    pool.workers()
    pool.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    assert pool.wait(30) == 0, pool.log()
    (result,) = results(redis_client)
    assert result.status == "done"
    assert pool.events("pool.stopping")[0]["mode"] == "warm"


@pytest.mark.timeout(90)
def test_a_second_signal_stops_at_once(
    pool_factory: Callable[[], PoolProcess],
    llm_server: ScriptedLLMServer,
    redis_client: redis.Redis,
    redis_url: str,
) -> None:
    """A cold shutdown does not wait for a 30 s job: the pool is gone within seconds."""
    pool = pool_factory()
    pool.start(QUEUE_DIAGNOSIS, processes=1)
    job = diagnosis_job()
    admit(redis_url, job.lease)
    llm_server.script(delayed(30.0, json_reply(FAILURE_ANSWER)))
    enqueue(redis_client, job, job_timeout_s=60)
    wait_until(lambda: llm_server.requests, 30, "the job to call the LLM")
    pool.workers()
    pool.process.send_signal(signal.SIGINT)  # type: ignore[union-attr]
    # Two signals before the pool handles the first would count as one.
    wait_until(lambda: pool.events("pool.stopping"), 30, "the pool's warm shutdown")
    pool.process.send_signal(signal.SIGINT)  # type: ignore[union-attr]
    started = time.monotonic()
    assert pool.wait(15) == 0, pool.log()
    assert time.monotonic() - started < 8
    assert [event["mode"] for event in pool.events("pool.stopping")] == ["warm", "cold"]
    wait_until(lambda: not any(pid_alive(pid) for pid in pool.seen), 10, "no process left")


@pytest.mark.timeout(90)
def test_a_killed_forking_worker_frees_the_pending_slot_within_the_lease(
    pool_factory: Callable[[], PoolProcess],
    llm_server: ScriptedLLMServer,
    redis_client: redis.Redis,
    redis_url: str,
) -> None:
    """SIGKILL on a busy forking worker: the slot comes back within lease_s, the work-horse
    reports its job abandoned, and the worker is replaced."""
    lease_s = 2.0
    pool = pool_factory()
    pool.start(QUEUE_DIAGNOSIS, processes=1, mode="fork")
    pool.wait_workers(redis_client, QUEUE_DIAGNOSIS)
    job = diagnosis_job(lease_s=lease_s)
    admit(redis_url, job.lease)
    llm_server.script(delayed(60.0, json_reply(FAILURE_ANSWER)))
    enqueue(redis_client, job, job_timeout_s=120)
    wait_until(lambda: llm_server.requests, 30, "the job to call the LLM")
    pool.workers()
    (registered,) = Worker.all(queue=Queue(QUEUE_DIAGNOSIS, connection=redis_client))
    worker = registered.pid
    assert worker is not None
    (horse,) = child_pids(worker)
    time.sleep(lease_s)  # the job outlives its first lease: it renews it
    assert counts(redis_url, job.lease).pending == 1
    os.kill(worker, signal.SIGKILL)
    killed = time.monotonic()
    wait_until(lambda: counts(redis_url, job.lease).pending == 0, lease_s + 3, "the slot")
    assert time.monotonic() - killed < lease_s + 3
    assert wait_gone(horse, 5), "the work-horse outlived its worker"
    (result,) = results(redis_client)
    assert (result.status, result.reason) == (
        "abandoned",
        "the worker process running the job died",
    )
    wait_until(lambda: pool.events("worker.restarted"), 10, "the worker to be replaced")
    pool.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    assert pool.wait(30) == 0, pool.log()
