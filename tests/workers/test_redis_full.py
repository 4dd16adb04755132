"""A worker pool whose Redis refuses writes at its maxmemory waits for it, never gives up,
and takes jobs again once Redis has memory: at start-up and while running."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import redis
from rq import Queue, Worker

from gencoach.constants import QUEUE_DIAGNOSIS
from gencoach.workers.pool import MAX_RESTARTS
from tests.support.jobs import put
from tests.support.llm_server import ScriptedLLMServer
from tests.support.processes import STARTUP_S
from tests.support.restartable_redis import RestartableRedis
from tests.workers.builders import settings_data
from tests.workers.pools import PoolProcess, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _pool(tmp_path: Path, server: RestartableRedis, llm_server: ScriptedLLMServer) -> PoolProcess:
    return PoolProcess(tmp_path, settings_data(llm_server.endpoint), server.url)


def _waiting(pool: PoolProcess) -> list[dict[str, object]]:
    """The workers' "Redis does not take writes" warnings; fails if the pool exited."""
    assert pool.process is not None
    assert pool.process.poll() is None, f"the pool exited:\n{pool.log()}"
    return pool.events("worker.redis_unreachable")


def _takes_a_job(pool: PoolProcess, client: redis.Redis, server: RestartableRedis) -> None:
    """A job enqueued now is run (the pool serves the queue again)."""
    listening = Queue(QUEUE_DIAGNOSIS, connection=client)
    wait_until(lambda: Worker.count(queue=listening) >= 1, STARTUP_S, "a registered worker")
    put(client, "record", server.url, "test:after", "taken")
    wait_until(lambda: client.lrange("test:after", 0, -1) == [b"taken"], STARTUP_S, "a job")


def test_a_pool_started_while_redis_is_full_waits_and_then_serves(
    tmp_path: Path, private_redis: RestartableRedis, llm_server: ScriptedLLMServer
) -> None:
    """Started at maxmemory, the workers say Redis takes no writes and wait (no restarts,
    no giving up); once Redis has memory they register and take jobs."""
    client = redis.Redis.from_url(private_redis.url)
    private_redis.refuse_writes()
    pool = _pool(tmp_path, private_redis, llm_server)
    try:
        pool.start(QUEUE_DIAGNOSIS, processes=2)
        wait_until(lambda: len(_waiting(pool)) >= 2, STARTUP_S, "both workers waiting")
        warning = _waiting(pool)[0]
        assert "Redis refuses writes: it is at its maxmemory" in str(warning["error"])
        private_redis.refuse_writes(False)
        _takes_a_job(pool, client, private_redis)
        assert pool.events("pool.gave_up") == []
        assert pool.events("worker.restarted") == []
    finally:
        pool.stop()
        client.close()


def test_running_workers_wait_out_maxmemory_without_restarting(
    tmp_path: Path, private_redis: RestartableRedis, llm_server: ScriptedLLMServer
) -> None:
    """A running pool whose Redis reaches maxmemory (heartbeats and takes refused) keeps its
    worker process, waits, and takes jobs once memory is freed."""
    client = redis.Redis.from_url(private_redis.url)
    pool = _pool(tmp_path, private_redis, llm_server)
    try:
        pool.start(QUEUE_DIAGNOSIS, processes=1)
        pool.wait_workers(client, QUEUE_DIAGNOSIS)
        # Running: past its start-up (registered, subscribed), in the loop that takes jobs.
        # A worker refused a write during start-up exits 75 and starts again: not this case.
        wait_until(lambda: "Listening on" in pool.log(), STARTUP_S, "the worker to listen")
        started = pool.events("worker.started")
        private_redis.refuse_writes()
        wait_until(lambda: _waiting(pool), STARTUP_S, "the worker to wait for Redis")
        private_redis.refuse_writes(False)
        wait_until(lambda: pool.events("worker.redis_back"), STARTUP_S, "Redis back")
        _takes_a_job(pool, client, private_redis)
        assert pool.events("worker.started") == started  # the same process all along
        assert pool.events("worker.restarted") == []
        assert "Traceback" not in pool.log()
    finally:
        pool.stop()
        client.close()


def test_a_forking_pool_waits_out_maxmemory_and_serves_again(
    tmp_path: Path, private_redis: RestartableRedis, llm_server: ScriptedLLMServer
) -> None:
    """In fork mode (RQ's own worker loop) a heartbeat refused at maxmemory ends the worker
    process: the pool starts it again later without counting it as a death, the new one
    waits for Redis to take writes, and jobs are taken once memory is freed."""
    client = redis.Redis.from_url(private_redis.url)
    pool = _pool(tmp_path, private_redis, llm_server)
    try:
        pool.start(QUEUE_DIAGNOSIS, processes=1, mode="fork")
        pool.wait_workers(client, QUEUE_DIAGNOSIS)
        private_redis.refuse_writes()
        wait_until(lambda: _waiting(pool), STARTUP_S, "a worker waiting for Redis")
        private_redis.refuse_writes(False)
        _takes_a_job(pool, client, private_redis)
        assert pool.events("pool.gave_up") == []
        assert pool.events("worker.restarted") == []
    finally:
        pool.stop()
        client.close()


def test_a_pool_whose_workers_keep_dying_gives_up_while_redis_takes_writes(
    tmp_path: Path, private_redis: RestartableRedis, llm_server: ScriptedLLMServer
) -> None:
    """Workers killed as they start, with Redis taking writes: five restarts, then exit 1
    (a pool gives up on its workers, never on its Redis)."""
    pool = _pool(tmp_path, private_redis, llm_server)
    try:
        pool.start(QUEUE_DIAGNOSIS, processes=1)
        assert pool.process is not None
        killed: set[int] = set()

        def new_workers() -> list[int]:
            return [
                int(str(e["pid"])) for e in pool.events("worker.started") if e["pid"] not in killed
            ]

        while pool.process.poll() is None:
            for pid in new_workers():
                killed.add(pid)
                os.kill(pid, signal.SIGKILL)
            wait_until(
                lambda: (
                    pool.process is not None
                    and (pool.process.poll() is not None or bool(new_workers()))
                ),
                STARTUP_S,
                "a worker to kill or the pool to end",
            )
        assert pool.wait(10) == 1, pool.log()
    finally:
        pool.stop()
    assert len(pool.events("worker.restarted")) == MAX_RESTARTS
    (gave_up,) = pool.events("pool.gave_up")
    assert gave_up["exitcode"] == -signal.SIGKILL
