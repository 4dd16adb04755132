"""A controller killed in the middle of a reinjection, then restarted, makes one branch."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import cast

import httpx
import pytest
import redis

from gencoach.constants import Keys
from gencoach.reporting.client import Reporter
from gencoach.service.coaching.requests import deadline_member
from tests.support.agent_server import ScriptedAgent, ThreadedServer
from tests.support.coaching import (
    coaching_settings,
    report_known,
    request_in_state,
    request_reached,
)
from tests.support.controller import ControllerProcess, wait_for
from tests.support.llm_server import ScriptedLLMServer, json_reply

pytestmark = pytest.mark.slow

KEYS = Keys()
DIAGNOSIS = {"decision_index": 2, "reason": "sw9 is wrong", "expected_decision": None}


def _alternatives(client: redis.Redis, run_id: str) -> int:
    """How many coached situations gencoach recorded in the run."""
    ids = cast(list[bytes], client.hkeys(KEYS.run(run_id, "situation_ids")))
    return sum(1 for situation_id in ids if situation_id.startswith(b"coach:"))


def _start(
    controller_factory: Callable[..., ControllerProcess], llm: ScriptedLLMServer
) -> ControllerProcess:
    llm.script(json_reply(DIAGNOSIS))
    controller = controller_factory(settings=coaching_settings(llm, format=False, suboptimal=False))
    controller.start()
    controller.start_workers()
    return controller


def test_killed_while_the_agent_answers(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_client: redis.Redis,
    redis_url: str,
) -> None:
    """SIGKILL while the agent is producing the reinjected answer; after a restart the
    request is reinjected once, with one branch and one order."""
    scripted_agent.responses_gate = answer = threading.Event()
    controller = _start(controller_factory, llm)
    report_known(redis_url, "crash", scripted_agent.url)
    wait_for(lambda: scripted_agent.response_requests, timeout_s=60, what="the reinjection call")
    controller.signal(signal.SIGKILL)
    controller.wait()
    answer.set()  # the killed call's connection is gone: only the retried call is answered
    controller.start()
    wait_for(
        request_reached(controller, "crash", "failure", "reinjected"),
        timeout_s=30,
        what="reinjection",
    )
    assert redis_client.xlen(KEYS.branches("crash")) == 1
    assert _alternatives(redis_client, "crash") == 1


def test_killed_between_the_answer_and_the_order(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_client: redis.Redis,
    redis_url: str,
) -> None:
    """With the answer recorded but no order published (the state a kill in between
    leaves), a restarted controller publishes exactly one order for the recorded answer,
    without asking the agent again; a second kill and restart changes nothing."""
    controller = _start(controller_factory, llm)
    report_known(redis_url, "window", scripted_agent.url)
    request = wait_for(
        request_in_state(controller, "window", "failure", "reinjected"), timeout_s=60
    )
    controller.signal(signal.SIGKILL)
    controller.wait()
    # Rewind to the moment after the nodes were recorded and before the order went out.
    redis_client.delete(KEYS.branches("window"), KEYS.run("window", "orders"))
    stored = cast(
        bytes | None, redis_client.hget(KEYS.run("window", "requests"), request["request_id"])
    )
    assert stored is not None
    redis_client.hset(
        KEYS.run("window", "requests"),
        request["request_id"],
        stored.replace(b'"state":"reinjected"', b'"state":"corrected"'),
    )
    # A request still `corrected` is watched (its move to `reinjected` ended the watch).
    member = deadline_member("window", request["request_id"])
    redis_client.zadd(KEYS.request_deadlines, {member: 0})
    asked = len(scripted_agent.response_requests)
    controller.start()
    wait_for(lambda: redis_client.xlen(KEYS.branches("window")) == 1, what="the order")
    wait_for(request_in_state(controller, "window", "failure", "reinjected"), what="reinjection")
    assert len(scripted_agent.response_requests) == asked, "the recorded answer was reused"
    assert _alternatives(redis_client, "window") == 1
    controller.signal(signal.SIGKILL)
    controller.wait()
    controller.start()
    assert httpx.get(f"{controller.url}/health").status_code == 200
    assert redis_client.xlen(KEYS.branches("window")) == 1
    assert _alternatives(redis_client, "window") == 1


def test_unreachable_agent_is_retried_then_the_request_abandoned(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_client: redis.Redis,
    redis_url: str,
) -> None:
    """An agent that keeps answering 503 at reinjection is asked three times, then the
    request is abandoned with the reason and its pending slot given back."""
    scripted_agent.response_status = 503
    controller = _start(controller_factory, llm)
    report_known(redis_url, "down", scripted_agent.url)
    request = wait_for(request_in_state(controller, "down", "failure", "abandoned"), timeout_s=60)
    assert request["reason"] == (
        "the agent's reinjected answer: /v1/responses answered 503: scripted outage"
    )
    assert len(scripted_agent.response_requests) == 3
    stages = httpx.get(f"{controller.url}/v1/runs/down/stages").json()["stages"]
    assert all(stage["pending"] == 0 for stage in stages)
    assert redis_client.xlen(KEYS.branches("down")) == 0


def test_stranded_corrections_are_reinjected_beside_a_slow_agent(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_client: redis.Redis,
    redis_url: str,
) -> None:
    """Two runs' corrections stranded by a controller killed while both agents were
    answering: after the restart, the run whose agent answers is reinjected at once,
    while the other run's agent still holds its call (the pass that found both does not
    wait for it), and its pending slot is kept meanwhile."""
    llm.script(json_reply(DIAGNOSIS))  # the second run's diagnosis; `_start` scripts one
    slow = ScriptedAgent()
    server = ThreadedServer(slow.app())
    server.start()
    slow.url = server.url
    try:
        slow.responses_gate = gate = threading.Event()  # never opened: a call that hangs
        scripted_agent.responses_gate = fast_gate = threading.Event()
        controller = _start(controller_factory, llm)
        # "a-slow" sorts first: a pass visiting runs in turn would wait on it.
        report_known(redis_url, "a-slow", slow.url)
        report_known(redis_url, "b-fast", scripted_agent.url)
        wait_for(
            lambda: slow.response_requests and scripted_agent.response_requests,
            timeout_s=90,
            what="both reinjection calls",
        )
        controller.signal(signal.SIGKILL)
        controller.wait()
        fast_gate.set()
        asked = len(slow.response_requests)
        controller.start()
        # The slow agent's call waits for its 30 s timeout, three times over: a recovery
        # done in turn would take about 90 s before reaching the other run.
        wait_for(request_reached(controller, "b-fast", "failure", "reinjected"), timeout_s=60)
        wait_for(lambda: len(slow.response_requests) > asked, what="the slow run's new call")
        request = request_in_state(controller, "a-slow", "failure", "corrected")()
        assert request is not None, "the slow run's request still waits on its agent"
        stages = httpx.get(f"{controller.url}/v1/runs/a-slow/stages").json()["stages"]
        assert sum(stage["pending"] for stage in stages) == 1
    finally:
        gate.set()
        server.stop()


def test_a_run_finishing_while_its_agent_answers_ends_the_request_quietly(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_client: redis.Redis,
    redis_url: str,
) -> None:
    """The run finishes while the agent is producing a reinjected answer: the branch is
    not recorded, the request ends abandoned with why, no alternative is left behind,
    and nothing is logged as a failure (the race is part of a run's life)."""
    scripted_agent.responses_gate = answer = threading.Event()
    controller = _start(controller_factory, llm)
    report_known(redis_url, "late", scripted_agent.url)
    wait_for(lambda: scripted_agent.response_requests, timeout_s=60, what="the reinjection call")
    with Reporter("late", redis_url=redis_url, start_seq=500) as generator:
        generator.emit("run.finished")
    wait_for(
        lambda: httpx.get(f"{controller.url}/v1/runs/late").json().get("state") != "active",
        timeout_s=30,
        what="the run finished",
    )
    answer.set()
    request = wait_for(request_in_state(controller, "late", "failure", "abandoned"), timeout_s=60)
    assert "finished" in request["reason"], request["reason"]
    assert redis_client.xlen(KEYS.branches("late")) == 0
    assert _alternatives(redis_client, "late") == 0
    failures = [e for e in controller.log_events() if e.get("level") in ("error", "critical")]
    assert failures == [], failures
