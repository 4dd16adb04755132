"""Coaching controls: the agent allow-list, agent announcements and sessions, the stage
limits refusing requests, and budgets changed over HTTP or by SIGHUP."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import cast

import httpx
import pytest
import redis
import yaml

from gencoach.constants import Keys
from gencoach.reporting.client import Reporter
from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import coaching_settings, report_known, requests_of, settled
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import RUN_STARTED
from tests.support.llm_server import ScriptedLLMServer, json_reply
from tests.support.metrics import scrape

pytestmark = pytest.mark.slow

KEYS = Keys()


def _meta(client: redis.Redis, run_id: str) -> dict[str, str]:
    raw = cast(dict[bytes, bytes], client.hgetall(KEYS.run(run_id, "meta")))
    return {key.decode(): value.decode() for key, value in raw.items()}


def test_agent_outside_the_allow_list_is_refused(
    controller_factory: Callable[..., ControllerProcess], redis_client: redis.Redis, redis_url: str
) -> None:
    """A run naming an agent the config does not allow is dead-lettered with the fix to make."""
    controller = controller_factory(settings={"agents": ["http://127.0.0.1:1"]})
    controller.start()
    with Reporter("stranger", redis_url=redis_url) as reporter:
        reporter.emit("run.started", **{**RUN_STARTED, "agent_url": "http://127.0.0.1:9/"})
    dead = wait_for(lambda: redis_client.xrange(KEYS.dead_events), what="a dead letter")
    reason = dead[0][1][b"reason"].decode()
    assert reason == (
        "run.started of run stranger: agent_url http://127.0.0.1:9/ is not allowed: add it "
        "(or a prefix of it) to the `agents` list of the controller's config"
    )
    assert httpx.get(f"{controller.url}/v1/runs/stranger").status_code == 404


@pytest.mark.parametrize(("status", "state"), [(409, "conflict"), (503, "unavailable")])
def test_refused_session_leaves_the_run_without_specialized_coaching(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_client: redis.Redis,
    redis_url: str,
    status: int,
    state: str,
) -> None:
    """A 409 or 503 on the session is logged with its reason and specialized coaching is
    skipped for the run, which goes on; each request names the refusal as the cause."""
    scripted_agent.session_status = status
    controller = controller_factory(settings=coaching_settings(llm))
    controller.start()
    controller.start_workers()
    report_known(redis_url, "nosession", scripted_agent.url)
    found = wait_for(settled(controller, "nosession", 3), timeout_s=60, what="settled requests")
    assert {r["state"] for r in found.values()} == {"skipped"}
    assert found["failure"]["reason"] == (
        "the agent's failure coaching is unavailable: "
        f"its coaching session was refused ({state}: scripted refusal)"
    )
    meta = _meta(redis_client, "nosession")
    assert (meta["session"], meta["session_reason"]) == (state, "scripted refusal")
    refused = [e for e in controller.log_events() if e["event"] == "agent.session_refused"]
    assert refused[0]["reason"] == "scripted refusal"
    assert scripted_agent.coaching_requests == []


def test_invalid_agent_info_is_reported_with_the_field(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_client: redis.Redis,
    redis_url: str,
) -> None:
    """An agent whose info breaks the contract is reported with its URL and the field."""
    scripted_agent.info = {**scripted_agent.info, "protocol_version": "2.0", "agent_id": 7}
    controller = controller_factory(settings=coaching_settings(llm))
    controller.start()
    report_known(redis_url, "badinfo", scripted_agent.url)
    meta = wait_for(
        lambda: _meta(redis_client, "badinfo").get("agent_error") and _meta(redis_client, "badinfo")
    )
    assert meta["agent_error"].startswith(
        "/v1/info: invalid AgentInfo: agent_id: Input should be a valid string"
    )
    refused = [e for e in controller.log_events() if e["event"] == "agent.refused"]
    assert refused[0]["agent_url"] == scripted_agent.url


def test_limits_refusals_are_recorded_and_budgets_change_live(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """With one pending slot per stage, the second stage-0 request is skipped by the limits;
    the stages route shows the counts; PUT /v1/budgets and SIGHUP change the limits."""
    llm.script(json_reply({"decision_index": 1, "reason": "r", "expected_decision": None}))
    settings = coaching_settings(llm)
    settings["coaching"].update(max_pending_per_stage=1, max_unproven_per_stage=1)
    controller = controller_factory(settings=settings)
    controller.start()  # no workers: admitted requests stay queued, holding their slots
    report_known(redis_url, "tight", scripted_agent.url)
    found = wait_for(
        lambda: len(requests_of(controller, "tight")) == 3 and requests_of(controller, "tight")
    )
    stage0 = [found["format"], found["failure"]]
    assert sorted(r["state"] for r in stage0) == ["queued", "skipped"]
    assert next(r for r in stage0 if r["state"] == "queued")["job"] in ("repair", "diagnosis")
    skipped = next(r for r in stage0 if r["state"] == "skipped")
    assert skipped["reason"] == "refused by the stage limits: pending 1 of 1"
    samples = scrape(controller.url)
    assert samples.by("gencoach_opportunities_total", "outcome") == {"admitted": 2, "refused": 1}
    assert samples.value(
        "gencoach_opportunities_total", route=skipped["route"], outcome="refused", reason="pending"
    )
    assert samples.total("gencoach_queue_jobs") == 2  # no worker: both wait
    stages = httpx.get(f"{controller.url}/v1/runs/tight/stages").json()["stages"]
    assert {(s["stage_id"], s["pending"], s["max_pending"]) for s in stages} == {
        (0, 1, 1),
        (1, 1, 1),
    }

    changed = httpx.put(f"{controller.url}/v1/budgets", json={"max_pending_per_stage": 4})
    assert changed.status_code == 200
    assert changed.json()["effective"]["max_pending_per_stage"] == 4
    bad = httpx.put(f"{controller.url}/v1/budgets", json={"max_pending_per_stage": 0})
    assert bad.status_code == 422
    assert "max_pending_per_stage" in bad.json()["errors"]
    stages = httpx.get(f"{controller.url}/v1/runs/tight/stages").json()["stages"]
    assert {s["max_pending"] for s in stages} == {4}

    assert (
        httpx.delete(f"{controller.url}/v1/budgets").json()["effective"]["max_pending_per_stage"]
        == 1
    )
    config = yaml.safe_load(controller.config_path.read_text())
    config["coaching"]["max_pending_per_stage"] = 3
    controller.config_path.write_text(yaml.safe_dump(config))
    controller.signal(signal.SIGHUP)
    wait_for(
        lambda: (
            httpx.get(f"{controller.url}/v1/budgets").json()["effective"]["max_pending_per_stage"]
            == 3
        ),
        what="the reloaded budget",
    )
