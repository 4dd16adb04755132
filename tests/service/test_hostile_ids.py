"""Ids and agent URLs a generator gets wrong are refused, never crash the controller,
and never reach another run's agent session."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import redis

from gencoach.constants import EVENT_FIELD, Keys
from gencoach.reporting.client import Reporter
from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import coaching_settings
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import known_run_events
from tests.support.llm_server import ScriptedLLMServer
from tests.support.streams import entries

pytestmark = pytest.mark.slow


def _started(run_id: str, agent_url: str = "http://127.0.0.1:8751") -> dict[str, Any]:
    fields = dict(known_run_events()[0][1])
    return {"type": "run.started", "run_id": run_id, "seq": 0, **fields, "agent_url": agent_url}


def test_control_characters_are_refused_with_422_naming_the_field(
    controller: ControllerProcess,
) -> None:
    """A run id with a control character, or an agent URL with one, is a 422 naming the field."""
    cases = [
        (_started("x\u0001"), "run_id"),
        (_started("x\u0000"), "run_id"),
        (_started("ok", agent_url=f"http://127.0.0.1:{controller.port}/\u007f"), "agent_url"),
    ]
    for event, field in cases:
        response = httpx.post(f"{controller.url}/v1/events", json=[event])
        assert response.status_code == 422, response.text
        (error,) = response.json()["errors"]
        assert [f["field"] for f in error["fields"]] == [field]
        assert "is not allowed" in error["fields"][0]["reason"]
    assert httpx.get(f"{controller.url}/v1/runs").json()["runs"] == []


def test_bad_ids_on_the_stream_are_dead_lettered_and_the_controller_stays_up(
    controller: ControllerProcess, redis_client: redis.Redis, redis_url: str
) -> None:
    """The same events written straight to the stream go to the dead letters; intake goes on."""
    keys = Keys()
    bad = [
        _started("x\u0001"),
        _started("x\u0000"),
        _started("ok", agent_url=f"http://127.0.0.1:{controller.port}/\u007f"),
    ]
    for event in bad:
        redis_client.xadd(keys.events, {EVENT_FIELD: json.dumps(event)})
    dead = wait_for(
        lambda: len(dead := entries(redis_client, keys.dead_events)) == 3 and dead,
        what="three dead letters",
    )
    reasons = [fields[b"reason"].decode() for _, fields in dead]
    assert reasons[0].startswith("invalid RunStarted: run_id: character '\\x01' (U+0001)")
    assert "U+0000" in reasons[1], reasons
    assert reasons[2].startswith("invalid RunStarted: agent_url:"), reasons
    assert "U+007F" in reasons[2], reasons
    with Reporter("after", redis_url=redis_url) as report:
        kind, fields = known_run_events()[0]
        report.emit(kind, **fields)
    wait_for(
        lambda: httpx.get(f"{controller.url}/v1/runs/after").status_code == 200,
        what="a later run applied",
    )
    assert controller.process is not None
    assert controller.process.poll() is None, controller.log_text()[-3000:]


def test_a_run_id_with_a_fragment_cannot_close_another_runs_session(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """Run `victim-T#evil` ending closes its own session, not the one of run `victim-T`."""
    controller = controller_factory(settings=coaching_settings(llm))
    controller.start()
    kind, fields = known_run_events()[0]
    for run_id in ("victim-T", "victim-T#evil"):
        with Reporter(run_id, redis_url=redis_url) as report:
            report.emit(kind, **{**fields, "agent_url": scripted_agent.url})
    wait_for(
        lambda: {"victim-T", "victim-T#evil"} <= set(scripted_agent.sessions),
        what="both sessions opened under their exact ids",
    )
    with Reporter("victim-T#evil", redis_url=redis_url, start_seq=1) as report:
        report.emit("run.finished")
    wait_for(lambda: "victim-T#evil" not in scripted_agent.sessions, what="the session closed")
    assert "victim-T" in scripted_agent.sessions
