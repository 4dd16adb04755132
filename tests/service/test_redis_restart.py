"""A Redis restarted empty under a running controller: it reports 503 while Redis is
away, recreates its consumer groups when Redis is back, names the runs it lost, and
never exits on its own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from gencoach.constants import EVENT_FIELD, Keys
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import RUN_STARTED
from tests.support.restartable_redis import RestartableRedis

pytestmark = pytest.mark.slow


@pytest.fixture
def server(private_redis: RestartableRedis) -> RestartableRedis:
    """A private redis-server the test may restart."""
    return private_redis


@pytest.fixture
def controller_on(server: RestartableRedis, tmp_path: Path) -> Iterator[ControllerProcess]:
    """A controller on that server (claims quickly, so a restart is noticed quickly)."""
    folder = tmp_path / "controller"
    folder.mkdir()
    process = ControllerProcess(folder, server.url, claim_idle_s=1)
    process.start()
    yield process
    process.stop()


def _started(run_id: str) -> dict[str, Any]:
    return {"type": "run.started", "run_id": run_id, "seq": 0, **RUN_STARTED}


def _health(controller: ControllerProcess) -> int:
    try:
        return httpx.get(f"{controller.url}/health", timeout=2).status_code
    except httpx.HTTPError:
        return 0


def _known(controller: ControllerProcess, run_id: str) -> bool:
    return httpx.get(f"{controller.url}/v1/runs/{run_id}", timeout=2).status_code == 200


def _publish(url: str, events: list[dict[str, Any]]) -> None:
    client = redis.Redis.from_url(url)
    pipe = client.pipeline(transaction=False)
    for event in events:
        pipe.xadd(Keys().events, {EVENT_FIELD: json.dumps(event)})
    pipe.execute()
    client.close()


def _alive(controller: ControllerProcess) -> bool:
    return controller.process is not None and controller.process.poll() is None


def test_an_idle_controller_outlives_a_redis_restart(
    server: RestartableRedis, controller_on: ControllerProcess
) -> None:
    """503 while Redis is down, ready again after, intake works, and the lost run is named."""
    controller = controller_on
    _publish(server.url, [_started("before")])
    wait_for(lambda: _known(controller, "before"), what="run 'before' applied")
    wait_for(
        lambda: any(e["event"] == "controller.ready" for e in controller.log_events()),
        what="the controller ready",
    )
    server.kill()
    wait_for(lambda: _health(controller) == 503, what="/health answering 503 without Redis")
    server.start()
    wait_for(lambda: _health(controller) == 200, timeout_s=30, what="/health ready again")
    _publish(server.url, [_started("after")])
    wait_for(lambda: _known(controller, "after"), timeout_s=30, what="intake reading again")
    lost = wait_for(
        lambda: [e for e in controller.log_events() if e["event"] == "runs.state_lost"],
        timeout_s=30,
        what="the lost run named in the log",
    )
    assert lost[0]["run_ids"] == ["before"]
    assert _alive(controller), controller.log_text()[-3000:]


def test_a_loaded_controller_outlives_a_redis_restart(
    server: RestartableRedis, controller_on: ControllerProcess
) -> None:
    """Runs being registered and saved when Redis dies do not take the controller down."""
    controller = controller_on
    finished = [
        {"type": "run.finished", "run_id": f"load-{index}", "seq": 1} for index in range(150)
    ]
    _publish(server.url, [_started(f"load-{index}") for index in range(150)] + finished)
    server.kill()
    server.start()
    _publish(server.url, [_started("after")])
    wait_for(lambda: _known(controller, "after"), timeout_s=40, what="intake reading again")
    assert _alive(controller), controller.log_text()[-3000:]
    assert _health(controller) == 200
