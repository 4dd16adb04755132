"""Two live controllers on one Redis share the coaching work without doing any of it twice."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gencoach.constants import Keys
from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import (
    coaching_settings,
    report_known,
    request_reached,
)
from tests.support.controller import ControllerProcess, wait_for
from tests.support.llm_server import ScriptedLLMServer, json_reply

pytestmark = pytest.mark.slow

KEYS = Keys()
DIAGNOSIS = {"decision_index": 2, "reason": "sw9 is wrong", "expected_decision": None}


@pytest.fixture
def two_controllers(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis, llm: ScriptedLLMServer
) -> Iterator[list[ControllerProcess]]:
    """Two controllers (each in its own folder, under its own consumer name) and workers."""
    settings = coaching_settings(llm, format=False, suboptimal=False)
    made = []
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        made.append(ControllerProcess(tmp_path / name, redis_url, settings=settings, consumer=name))
    for controller in made:
        controller.start()
    made[0].start_workers()
    yield made
    for controller in made:
        controller.stop()


def test_a_slow_reinjection_is_not_started_again_by_the_other_controller(
    two_controllers: list[ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_client: redis.Redis,
    redis_url: str,
) -> None:
    """While one controller waits on the agent's reinjected answer longer than a
    reconciliation lets a corrected request sit, the other controller, which sees it
    sitting, leaves it alone: the agent is asked once and one branch order goes out."""
    llm.script(json_reply(DIAGNOSIS))
    answer = threading.Event()
    scripted_agent.responses_gate = answer
    report_known(redis_url, "slow", scripted_agent.url)
    first, _ = two_controllers
    wait_for(lambda: scripted_agent.response_requests, timeout_s=60, what="the reinjection")
    time.sleep(8.0)  # the agent answers later than the reconciler's 5 s staleness
    answer.set()
    wait_for(
        request_reached(first, "slow", "failure", "reinjected"), timeout_s=90, what="reinjection"
    )
    assert len(scripted_agent.response_requests) == 1
    assert redis_client.xlen(KEYS.branches("slow")) == 1
    assert redis_client.keys(KEYS.run("slow", "reinjecting:*")) == []
