"""Redis at its maxmemory: /health says so, writes are 503, a gauge shows it, nothing lost."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import redis

from gencoach.constants import Keys
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import RUN_STARTED
from tests.support.metrics import scrape
from tests.support.restartable_redis import RestartableRedis

pytestmark = pytest.mark.slow

KEYS = Keys()
OOM = "Redis refuses writes: it is at its maxmemory"


def test_a_controller_on_a_full_redis_is_unavailable_and_says_why(
    tmp_path: Path, private_redis: RestartableRedis
) -> None:
    """While Redis refuses writes: /health 503 naming maxmemory, POST 503, the gauge at 1."""
    server = private_redis
    controller = ControllerProcess(tmp_path, server.url)
    try:
        controller.start()
        event = {"type": "run.started", "run_id": "full", "seq": 0, **RUN_STARTED}
        assert httpx.post(f"{controller.url}/v1/events", json=[event]).status_code == 202
        server.refuse_writes()

        health = httpx.get(f"{controller.url}/health")
        assert health.status_code == 503
        assert health.json()["detail"].startswith(OOM)
        refused = httpx.post(f"{controller.url}/v1/events", json=[{**event, "seq": 1}])
        assert refused.status_code == 503
        assert refused.json()["detail"].startswith(OOM)
        assert scrape(controller.url).value("gencoach_redis_writes_refused") == 1

        server.refuse_writes(False)
        assert httpx.get(f"{controller.url}/health").status_code == 200
        assert scrape(controller.url).value("gencoach_redis_writes_refused") == 0
        client = redis.Redis.from_url(server.url)
        assert client.xlen(KEYS.events) == 1  # what was accepted is still there
        client.close()
    finally:
        controller.stop()


def test_events_accepted_before_redis_fills_are_all_applied_once_it_has_room(
    tmp_path: Path, private_redis: RestartableRedis
) -> None:
    """Redis fills while intake applies a big batch: the controller stays up, and once Redis
    takes writes again every accepted run is known (none dropped or dead-lettered)."""
    server = private_redis
    controller = ControllerProcess(tmp_path, server.url)
    try:
        controller.start()
        events = [
            {"type": "run.started", "run_id": f"full-{n}", "seq": 0, **RUN_STARTED}
            for n in range(2000)
        ]
        assert httpx.post(f"{controller.url}/v1/events", json=events).status_code == 202
        server.refuse_writes()  # while intake is still applying the batch
        health = wait_for(
            lambda: httpx.get(f"{controller.url}/health", timeout=10),
            what="the controller answering while Redis is full",
        )
        assert controller.process is not None
        assert controller.process.poll() is None  # still running
        assert health.status_code in (200, 503)
        server.refuse_writes(False)
        wait_for(
            lambda: httpx.get(f"{controller.url}/v1/runs", timeout=10).json()["total"] == 2000,
            timeout_s=120,
            what="all 2000 accepted runs applied",
        )
        client = redis.Redis.from_url(server.url)
        assert client.xlen(KEYS.dead_events) == 0
        client.close()
    finally:
        controller.stop()
