"""`gencoach worker` when its Redis goes away: one line naming that Redis, no traceback, no
restarts; once an empty Redis is back, the worker registers again and takes jobs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis
import redis.asyncio
import yaml
from rq import Worker
from structlog.testing import capture_logs

from gencoach.constants import QUEUE_DOORBELL
from gencoach.workers.outage import RedisOutage
from tests.support.controller import wait_for
from tests.support.jobs import put
from tests.support.processes import kill_tree, wait_started
from tests.support.restartable_redis import RestartableRedis

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture
def server(private_redis: RestartableRedis) -> RestartableRedis:
    """A private Redis the test kills and starts again."""
    return private_redis


def events(log: Path, name: str) -> list[dict[str, Any]]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{") and json.loads(line).get("event") == name:
            found.append(json.loads(line))
    return found


@pytest.mark.asyncio
async def test_the_failure_that_starts_an_outage_is_its_first_try(
    aredis: redis.asyncio.Redis, redis_client: redis.Redis
) -> None:
    """The failed call that reports an outage counts as the first try: the doorbell is rung
    once, after the policy's first wait (0.5 s), not at once; a second caller joins the
    wait, and the outage is logged once as it starts and once as it ends."""
    outage = RedisOutage("redis://test")
    whose: list[bool] = []

    async def wait() -> None:
        whose.append(await outage.wait_until_back(aredis, redis.ConnectionError("gone")))

    started = anyio.current_time()
    with capture_logs() as logs:
        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            await anyio.sleep(0.1)
            group.start_soon(wait)
    assert anyio.current_time() - started >= 0.5
    assert whose == [True, False]
    assert redis_client.llen(QUEUE_DOORBELL) == 1
    assert [e["event"] for e in logs if e["event"].startswith("worker.redis")] == [
        "worker.redis_unreachable",
        "worker.redis_back",
    ]


def test_a_worker_waits_out_a_redis_restart(server: RestartableRedis, tmp_path: Path) -> None:
    config = tmp_path / "gencoach.yaml"
    config.write_text(yaml.safe_dump({"redis": {"url": server.url}, "log": {"format": "json"}}))
    log = tmp_path / "worker.log"
    with log.open("wb") as sink:
        worker = subprocess.Popen(
            [sys.executable, "-m", "gencoach", "worker", "-c", str(config)],
            stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
    client = redis.Redis.from_url(server.url)
    try:
        wait_started(lambda: Worker.count(connection=client), worker, log, "the worker")
        put(client, "record", server.url, "test:before", "taken")
        wait_for(lambda: client.llen("test:before"), 30, "the worker to take jobs")
        started = events(log, "worker.started")
        server.kill()
        (away,) = wait_for(lambda: events(log, "worker.redis_unreachable"), 15, "the warning")
        assert away["redis"] == server.url
        assert away["message"] == (
            f"Redis at {server.url} does not take writes; this worker takes jobs again once it does"
        )

        server.start()
        wait_for(lambda: events(log, "worker.registered_again"), 30, "it to register again")
        job = put(client, "record", server.url, "test:after", "taken")
        wait_for(lambda: client.lrange("test:after", 0, -1) == [b"taken"], 15, "a job taken")
        # RQ records the job finished after its function returned: on a loaded machine,
        # a moment after the list above is written.
        wait_for(lambda: job.get_status(refresh=True) == "finished", 15, "the job finished")
        text = log.read_text(errors="replace")
        assert "Traceback" not in text
        assert len(events(log, "worker.redis_unreachable")) == 1
        assert events(log, "worker.restarted") == []  # the same process all along
        assert events(log, "worker.started") == started
        (back,) = events(log, "worker.redis_back")
        assert back["away_s"] > 0
    finally:
        kill_tree(worker.pid)
        worker.wait(10)


def test_a_job_ending_as_redis_goes_leaves_the_worker_waiting(
    server: RestartableRedis,
) -> None:
    """The worker tells RQ it is idle after its last job; with Redis gone at that moment
    the write fails and the worker goes on (it waits in its take loop), instead of dying
    with the error (seen under load, when the last job ended as Redis was killed)."""
    from gencoach.workers.async_worker import AsyncWorker

    client = redis.Redis.from_url(server.url)
    worker = AsyncWorker(["q"], concurrency=1, shutdown_grace_s=1.0, connection=client)
    server.kill()
    anyio.run(worker._show_idle)  # returns: nothing raised
