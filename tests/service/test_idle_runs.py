"""Open runs cost nothing while nothing happens: a reconciliation pass reads the runs that
have an open request, and only a sweep (every 120 s) looks at every active run."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
import redis
from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.protocol import parse_event
from gencoach.service.store.graphstore import GraphStore
from tests.support.agent_server import ScriptedAgent
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import RUN_STARTED
from tests.support.restartable_redis import RestartableRedis

pytestmark = pytest.mark.slow

RUNS = 1_000


async def _open_runs(redis_url: str, agent_url: str) -> None:
    client = Redis.from_url(redis_url)
    store = GraphStore(client, Keys())
    events = [
        parse_event(
            {
                **RUN_STARTED,
                "type": "run.started",
                "run_id": f"idle-{index}",
                "seq": 0,
                "agent_url": agent_url,
            }
        )
        for index in range(RUNS)
    ]
    await store.apply(events)
    await client.aclose()


def _registered(client: redis.Redis) -> bool:
    pipe = client.pipeline(transaction=False)
    for index in range(RUNS):
        pipe.hexists(Keys().run(f"idle-{index}", "meta"), "registered")
    return all(pipe.execute())


def _calls(client: redis.Redis, command: str) -> int:
    stats = client.info("commandstats").get(f"cmdstat_{command}")
    return int(stats["calls"]) if stats else 0


def test_passes_between_sweeps_read_no_idle_run(
    private_redis: RestartableRedis, scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """With 1,000 open runs, no request and no event, the passes of the 8 s after the
    start-up sweep (which registers the runs' agent) read no run's requests (HGETALL)
    and no run's activity (HMGET): a pass costs what there is to do, not what is open.
    Redis counts commands server-wide, so the test has a server of its own."""
    redis_url = private_redis.url
    redis_client = redis.Redis.from_url(redis_url)
    anyio.run(_open_runs, redis_url, scripted_agent.url)
    controller = ControllerProcess(tmp_path, redis_url, settings={"coaching": {"enabled": False}})
    try:
        controller.start()
        _measure(redis_client)
    finally:
        controller.stop()
        redis_client.close()


def _measure(redis_client: redis.Redis) -> None:
    # The start-up sweep finds the runs never registered, and registers them.
    wait_for(lambda: _registered(redis_client), timeout_s=60, what="the runs registered")
    before = {command: _calls(redis_client, command) for command in ("hgetall", "hmget")}
    time.sleep(8)  # about four passes, two seconds apart
    read = {command: _calls(redis_client, command) - before[command] for command in before}
    assert read["hgetall"] < 50, read
    assert read["hmget"] < RUNS, read
