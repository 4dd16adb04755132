"""The coaching loop end to end up to the agent's correction: a real controller, real RQ
workers, a scripted OpenAI-compatible server and a scripted agent, all on loopback."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import redis

from gencoach.constants import Keys
from gencoach.service.coaching.requests import deadline_member
from gencoach.service.store.trajectory import RECOVERY_INPUT_BASE
from tests.support.agent_server import ScriptedAgent, default_info
from tests.support.coaching import (
    REINJECTED_IN_KNOWN_RUN,
    coaching_settings,
    reinjection_states,
    report_known,
    settled,
)
from tests.support.controller import ControllerProcess, wait_for
from tests.support.llm_server import ScriptedLLMServer, json_reply
from tests.support.metrics import scrape

pytestmark = pytest.mark.slow

SW4 = {
    "say": "",
    "tool_calls": [
        {"name": "press_button", "arguments": {"id": "sw4"}, "target_robot_name": "panda"}
    ],
}
SW4_TEXT = 'panda.press_button(id="sw4")'


def test_each_route_reaches_the_agent_with_the_right_request(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """An invalid answer, a failed stage and a suboptimal finish each end as a correction,
    with the LLM asked only where two decisions could be blamed."""
    llm.script(
        json_reply(
            {
                "decision_index": 2,
                "reason": "sw9 is not in the task",
                "expected_decision": SW4,
            }
        )
    )
    controller = controller_factory(settings=coaching_settings(llm))
    controller.start()
    controller.start_workers()
    report_known(redis_url, "flow", scripted_agent.url)
    found = wait_for(settled(controller, "flow", 3), timeout_s=60, what="three settled requests")
    assert reinjection_states(found) == {
        "format": "reinjected",
        "failure": "reinjected",
        "suboptimal": "reinjected",
    }, found

    session = scripted_agent.sessions["flow"]
    backend = session["backends"]["llm"]
    assert (backend["type"], backend["endpoint"]) == ("ollama", llm.endpoint)
    assert backend["headers"] == {
        "Authorization": "Bearer llm-secret",
        "Content-type": "application/json",
    }

    (diagnosis_call,) = llm.requests  # only the failure had two diagnosable decisions
    prompt = json.dumps(diagnosis_call.body["messages"])
    assert "press sw0 then sw4" in prompt
    assert "sw9" in prompt

    by_kind = {request["kind"]: request for request in scripted_agent.coaching_requests}
    assert set(by_kind) == {"format", "failure", "suboptimal"}
    failure = by_kind["failure"]
    assert failure["target_step_id"] == 3
    assert failure["diagnosis"] == {
        "explanation": "sw9 is not in the task",
        "expected_decision": SW4_TEXT,
    }
    # The blamed sw9, a single bad call, ended the stage: as MAGMA-GEN, recovery is also
    # offered, after its terminal status.
    replacement, recovery = failure["reinjection_points"]
    assert replacement == {"id": "replacement", "input_step_id": 3, "input": None}
    assert recovery["id"] == "recovery"
    assert recovery["input"]["id"] == RECOVERY_INPUT_BASE + 3
    assert "wrong button sw9" in recovery["input"]["instruction"]["content"]
    assert [step["id"] for step in failure["trajectory"]] == [0, 3]
    assert by_kind["format"]["target_step_id"] == 1
    assert by_kind["format"]["additional_info"]["invalid_reason"].startswith("an answer must not")
    assert by_kind["suboptimal"]["target_step_id"] == 4
    assert found["suboptimal"]["diagnosis"]["rule"] == "single_step"
    assert "llm-secret" not in controller.log_text()


def test_skip_rules_are_recorded_with_their_reasons(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
    redis_client: redis.Redis,
) -> None:
    """A route switched off and a kind the agent does not offer end as skipped, with why;
    a kind gencoach does not route (MAGMA's `text_only`) is accepted and logged as ignored."""
    scripted_agent.info = default_info(specialized_coaching=["format", "text_only", "failure"])
    controller = controller_factory(settings=coaching_settings(llm, failure=False))
    controller.start()
    controller.start_workers()
    report_known(redis_url, "skips", scripted_agent.url)
    found = wait_for(settled(controller, "skips", 3), timeout_s=60, what="three settled requests")
    assert found["failure"]["state"] == "skipped"
    assert (
        found["failure"]["reason"] == "the failure route is switched off (coaching.routes.failure)"
    )
    assert found["suboptimal"]["state"] == "skipped"
    assert found["suboptimal"]["reason"] == "the agent does not offer suboptimal coaching"
    assert found["format"]["state"] in REINJECTED_IN_KNOWN_RUN
    assert llm.requests == []
    skips = scrape(controller.url).by("gencoach_opportunities_total", "reason", outcome="skipped")
    assert skips == {"route_off": 1, "kind_not_offered": 1}
    # Each skip is stored skipped in its one write, never watched by reconciliation.
    for route in ("failure", "suboptimal"):
        assert [step["state"] for step in found[route]["history"]] == ["opportunity", "skipped"]
        member = deadline_member("skips", found[route]["request_id"])
        assert redis_client.zscore(Keys().request_deadlines, member) is None
    ignored = [
        json.loads(line)
        for line in controller.log_text().splitlines()
        if "agent.coaching_kinds_ignored" in line
    ]
    assert [entry["kinds"] for entry in ignored] == [["text_only"]]
