"""The async worker against a real Redis and RQ: concurrency, RQ's registries and results,
timeouts, retries, queue priority, warm stop within its grace, SIGKILL with jobs in flight."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis
from rq import Retry, Worker
from rq.command import send_stop_job_command
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, FinishedJobRegistry, StartedJobRegistry
from rq.results import Result

from gencoach.constants import QUEUE_DIAGNOSIS, QUEUE_REPAIR
from gencoach.rq_adapter import RESULT_TTL_S, enqueue
from tests.support.jobs import put
from tests.support.llm_server import ScriptedLLMServer, delayed, json_reply
from tests.workers.builders import FAILURE_ANSWER, admit, counts, diagnosis_job, settings_data
from tests.workers.pools import PoolProcess, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

GATE = "test:gate"


@pytest.fixture
def start_pool(
    tmp_path: Path, redis_url: str, llm_server: ScriptedLLMServer
) -> Iterator[Callable[..., PoolProcess]]:
    """Start pools with the scripted LLM as backend and extra `workers` settings; all stopped."""
    made: list[PoolProcess] = []

    def start(*queues: str, workers: dict[str, Any] | None = None, **options: Any) -> PoolProcess:
        folder = tmp_path / f"pool{len(made)}"
        folder.mkdir()
        data = settings_data(llm_server.endpoint, workers=workers or {})
        pool = PoolProcess(folder, data, redis_url)
        made.append(pool)
        pool.start(*(queues or (QUEUE_REPAIR, QUEUE_DIAGNOSIS)), **options)
        return pool

    yield start
    for pool in made:
        pool.stop()


def status(client: redis.Redis, job: Job) -> JobStatus | None:
    """The job's status as RQ has it now."""
    return Job.fetch(job.id, connection=client).get_status(refresh=True)


def test_many_jobs_run_at_once_and_rq_tracks_each(
    start_pool: Callable[..., PoolProcess], redis_client: redis.Redis, redis_url: str
) -> None:
    """Four blocked jobs run at once in one process: all four are in the started registry and
    the worker's executions, `rq info` shows it busy; released, they finish with RQ results
    (the outcome; gencoach's job functions return nothing)."""
    pool = start_pool(processes=1, concurrency=4)
    jobs = [put(redis_client, "wait_for_gate", redis_url, GATE, f"v{i}") for i in range(4)]
    started = StartedJobRegistry(QUEUE_DIAGNOSIS, connection=redis_client)
    wait_until(lambda: len(started) == 4, 30, "four jobs started at once")
    (worker,) = Worker.all(connection=redis_client)
    assert {e.job_id for e in worker.get_current_executions(refresh=True)} == {j.id for j in jobs}
    assert worker.get_state() == "busy"
    rq = Path(sys.executable).parent / "rq"
    shown = subprocess.run(
        [str(rq), "info", "--url", redis_url], capture_output=True, text=True, check=True
    ).stdout
    assert worker.name in shown, shown
    assert "busy" in shown, shown

    redis_client.rpush(GATE, *["go"] * 4)
    finished = FinishedJobRegistry(QUEUE_DIAGNOSIS, connection=redis_client)
    wait_until(lambda: len(finished) == 4, 30, "four finished jobs")
    assert len(started) == 0
    for job in jobs:
        fetched = Job.fetch(job.id, connection=redis_client)
        assert fetched.get_status() == JobStatus.FINISHED
        result = fetched.latest_result()
        assert result is not None
        assert result.type == Result.Type.SUCCESSFUL
        # gencoach's job functions publish their results on the results stream; RQ keeps
        # the outcome, not a return value (RQ has no public way to give it one).
        assert result.return_value is None
        assert 0 < redis_client.ttl(fetched.key) <= RESULT_TTL_S
    (worker,) = Worker.all(connection=redis_client)
    assert worker.successful_job_count == 4
    wait_until(lambda: Worker.all(connection=redis_client)[0].get_state() == "idle", 10, "idle")
    pool.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    assert pool.wait(30) == 0, pool.log()
    assert Worker.count(connection=redis_client) == 0


def test_a_job_past_its_timeout_is_cancelled_and_the_worker_goes_on(
    start_pool: Callable[..., PoolProcess], redis_client: redis.Redis, redis_url: str
) -> None:
    """A job blocked past its RQ timeout is cancelled and failed with JobTimeoutException;
    a plain function then runs (in a thread) and finishes."""
    start_pool(processes=1, concurrency=2)
    stuck = put(redis_client, "wait_for_gate", redis_url, GATE, "never", job_timeout=1)
    failed = FailedJobRegistry(QUEUE_DIAGNOSIS, connection=redis_client)
    wait_until(lambda: stuck.id in failed, 30, "the stuck job in the failed registry")
    result = Job.fetch(stuck.id, connection=redis_client).latest_result()
    assert result is not None
    assert "JobTimeoutException" in (result.exc_string or "")
    summed = put(redis_client, "blocking_sum", 2, 3)
    wait_until(lambda: status(redis_client, summed) == JobStatus.FINISHED, 30, "the sum")


def test_rqs_stop_job_command_cancels_that_job_only(
    start_pool: Callable[..., PoolProcess], redis_client: redis.Redis, redis_url: str
) -> None:
    """`send_stop_job_command` stops one of two running jobs (RQ marks it stopped); the other
    goes on and finishes."""
    start_pool(processes=1, concurrency=2)
    stopped = put(redis_client, "wait_for_gate", redis_url, "test:never", "never")
    going = put(redis_client, "wait_for_gate", redis_url, GATE, "done")
    started = StartedJobRegistry(QUEUE_DIAGNOSIS, connection=redis_client)
    wait_until(lambda: len(started) == 2, 30, "both jobs started")
    send_stop_job_command(redis_client, stopped.id)
    wait_until(lambda: status(redis_client, stopped) == JobStatus.STOPPED, 30, "stopped")
    assert status(redis_client, going) == JobStatus.STARTED
    redis_client.rpush(GATE, "go")
    wait_until(lambda: status(redis_client, going) == JobStatus.FINISHED, 30, "the other job")


def test_failures_are_retried_as_rq_retry_says_then_recorded(
    start_pool: Callable[..., PoolProcess], redis_client: redis.Redis, redis_url: str
) -> None:
    """A job failing once with Retry(max=1) runs again and finishes; one failing without
    retries lands in the failed registry with its exception."""
    start_pool(processes=1, concurrency=2)
    retried = put(redis_client, "flaky", redis_url, "test:flaky", 1, retry=Retry(max=1))
    plain = put(redis_client, "flaky", redis_url, "test:plain", 5)
    wait_until(lambda: status(redis_client, retried) == JobStatus.FINISHED, 30, "the retry")
    assert redis_client.get("test:flaky") == b"2"  # it ran twice
    failed = FailedJobRegistry(QUEUE_DIAGNOSIS, connection=redis_client)
    wait_until(lambda: plain.id in failed, 30, "the failed job")
    result = Job.fetch(plain.id, connection=redis_client).latest_result()
    assert result is not None
    assert "call 1 fails on purpose" in (result.exc_string or "")


def test_repair_jobs_are_taken_before_diagnosis_jobs(
    start_pool: Callable[..., PoolProcess], redis_client: redis.Redis, redis_url: str
) -> None:
    """With both queues full, one job at a time, every repair job runs before any diagnosis."""
    for index in range(2):
        put(redis_client, "record", redis_url, "test:order", f"diagnosis-{index}")
    for index in range(2):
        put(redis_client, "record", redis_url, "test:order", f"repair-{index}", queue=QUEUE_REPAIR)
    pool = start_pool(processes=1, concurrency=1, burst=True)
    assert pool.wait(60) == 0, pool.log()
    order = [
        entry.decode() for entry in cast(list[bytes], redis_client.lrange("test:order", 0, -1))
    ]
    assert order == ["repair-0", "repair-1", "diagnosis-0", "diagnosis-1"]


def test_a_warm_stop_lets_jobs_finish_within_the_grace_then_cancels_the_rest(
    start_pool: Callable[..., PoolProcess], redis_client: redis.Redis, redis_url: str
) -> None:
    """SIGTERM: nothing new is taken, a job that can finish does, one that cannot is cancelled
    after shutdown_grace_s and failed with the reason; the pool exits 0."""
    pool = start_pool(processes=1, concurrency=4, workers={"shutdown_grace_s": 2})
    finishing = put(redis_client, "wait_for_gate", redis_url, GATE, "done")
    stuck = put(redis_client, "wait_for_gate", redis_url, "test:never", "never")
    started = StartedJobRegistry(QUEUE_DIAGNOSIS, connection=redis_client)
    wait_until(lambda: len(started) == 2, 30, "both jobs started")
    pool.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    wait_until(lambda: pool.events("worker.draining"), 30, "the worker to drain")
    late = put(redis_client, "record", redis_url, "test:late", "taken")
    redis_client.rpush(GATE, "go")
    assert pool.wait(30) == 0, pool.log()
    assert status(redis_client, finishing) == JobStatus.FINISHED
    assert status(redis_client, stuck) == JobStatus.FAILED
    result = Job.fetch(stuck.id, connection=redis_client).latest_result()
    assert result is not None
    assert "WorkerStoppedError" in (result.exc_string or "")
    assert status(redis_client, late) == JobStatus.QUEUED
    assert redis_client.llen("test:late") == 0


def test_sigkill_with_several_jobs_in_flight_frees_every_slot_within_the_lease(
    start_pool: Callable[..., PoolProcess],
    llm_server: ScriptedLLMServer,
    redis_client: redis.Redis,
    redis_url: str,
) -> None:
    """Three coaching jobs in flight in one process, SIGKILL: every pending slot lapses within
    lease_s (the controller then retries them) and the pool starts a new worker."""
    lease_s = 2.0
    pool = start_pool(processes=1, concurrency=8)
    pool.wait_workers(redis_client, QUEUE_DIAGNOSIS)
    jobs = [diagnosis_job(request_id=f"req-{i}", lease_s=lease_s) for i in range(3)]
    llm_server.script(*[delayed(60.0, json_reply(FAILURE_ANSWER))] * 3)
    for job in jobs:
        admit(redis_url, job.lease)
        enqueue(redis_client, job, job_timeout_s=120)
    wait_until(lambda: len(llm_server.requests) == 3, 30, "three jobs calling the LLM at once")
    pool.workers()
    (registered,) = Worker.all(connection=redis_client)
    worker = registered.pid
    assert worker is not None
    time.sleep(lease_s)  # the jobs outlive their first lease: they renew it
    stage = jobs[0].lease  # the three requests share one stage: its pending count is 3
    assert counts(redis_url, stage).pending == 3
    os.kill(worker, signal.SIGKILL)
    wait_until(lambda: counts(redis_url, stage).pending == 0, lease_s + 3, "every slot to lapse")
    wait_until(lambda: pool.events("worker.restarted"), 10, "the worker to be replaced")
    pool.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    assert pool.wait(30) == 0, pool.log()
