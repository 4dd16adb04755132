"""The reference coach: the diagnosis's decision, a re-decision, a backend, or abandon, each
labelled by who made the decision."""

from __future__ import annotations

from typing import Any, Literal

import httpx
import pytest

from gencoach.agents.reference import (
    MistakeRates,
    ReferenceOptions,
    reference_app,
    reference_policy,
)
from gencoach.protocol import SpecializedCoachingRequest, SpecializedCoachingResponse
from tests.agents.payloads import agent_input, coaching_request, request, session_config
from tests.support.agent_server import Serve
from tests.support.llm_server import (
    ScriptedLLMServer,
    error,
    json_reply,
    reply,
    tool_calls_reply,
)

PRESS_SW1: dict[str, Any] = {
    "say": "",
    "tool_calls": [
        {"name": "press_button", "arguments": {"id": "sw1"}, "target_robot_name": "panda"}
    ],
}
PRESS_SW2 = {
    "say": "",
    "tool_calls": [
        {"name": "press_button", "arguments": {"id": "sw2"}, "target_robot_name": "ur5"}
    ],
}


def _agent(
    serve: Serve,
    llm: ScriptedLLMServer | None = None,
    run_id: str = "run-1",
    structured_output: Any = "auto",
) -> str:
    options = ReferenceOptions(
        rates=MistakeRates(malformed=1.0), structured_output=structured_output
    )
    url = serve(reference_app(options))
    if llm is not None:
        config = session_config(llm.endpoint)
        config["backends"]["checker"]["max_retry"] = 0
        response = httpx.put(f"{url}/v1/coaching/sessions/{run_id}", json=config)
        assert response.status_code == 204
    return url


def _memory_after_first(url: str) -> dict[str, Any]:
    body = request(agent_input(1, "Press sw1 twice, then sw2."))
    memory: dict[str, Any] = httpx.post(f"{url}/v1/responses", json=body).json()[0]["memory"]
    return memory


def _coach(url: str, body: dict[str, Any]) -> SpecializedCoachingResponse:
    response = httpx.post(f"{url}/v1/coaching", json=body, timeout=30)
    assert response.status_code == 200, response.text
    answer = SpecializedCoachingResponse.parse(response.json())
    answer.validate_request(SpecializedCoachingRequest.parse(body))
    return answer


def _decisions(answer: SpecializedCoachingResponse) -> dict[str, Any]:
    return {p.reinjection_point_id: p.extra_keys["decision"] for p in answer.proposals}


def _sources(answer: SpecializedCoachingResponse) -> set[Any]:
    return {p.extra_keys["decision_source"] for p in answer.proposals}


def test_a_parsed_expected_decision_is_proposed_at_both_offered_points(
    serve: Serve, llm: ScriptedLLMServer
) -> None:
    """A failure whose diagnosis expects `panda.press_button(id="sw1")` gets it at both points."""
    url = _agent(serve, llm)
    answer = _coach(url, coaching_request("failure", "run-1", "r1", {}))
    assert answer.status == "corrected"
    assert _decisions(answer) == {"replacement": PRESS_SW1, "recovery": PRESS_SW1}
    assert answer.proposals[0].extra_keys["kind"] == "replace_decision"
    assert _sources(answer) == {"expected_decision"}
    assert "took the diagnosis's expected decision" in answer.logs[0].content
    assert answer.logs[0].coaching_type == "failure_repair"
    assert llm.requests == []


def test_suboptimal_uses_the_expected_decision_at_the_replacement(serve: Serve) -> None:
    """A suboptimal step is replaced by the expected decision, without any session."""
    answer = _coach(_agent(serve), coaching_request("suboptimal", "run-1", "r1", {}))
    assert _decisions(answer) == {"replacement": PRESS_SW1}


def test_an_unparseable_expected_decision_asks_the_session_backend(
    serve: Serve, llm: ScriptedLLMServer
) -> None:
    """When the expected decision is prose, the session's backend gives the decision as JSON."""
    url = _agent(serve, llm)
    llm.script(json_reply(PRESS_SW2))
    body = coaching_request("failure", "run-1", "r1", {})
    body["diagnosis"]["expected_decision"] = "press the second button with the other robot"
    answer = _coach(url, body)
    assert _decisions(answer) == {"replacement": PRESS_SW2, "recovery": PRESS_SW2}
    assert _sources(answer) == {"repair_model"}
    [sent] = llm.requests
    prompt = sent.body["messages"][-1]["content"]
    assert "Expected decision: press the second button with the other robot" in prompt
    assert sent.body["response_format"]["type"] == "json_schema", "auto tries json_schema first"
    assert sent.headers["content-type"] == "application/json"


def test_session_repairs_honour_the_agents_structured_output_setting(
    serve: Serve, llm: ScriptedLLMServer
) -> None:
    """An agent set to json_object asks its session's backend that way, and a server
    refusing it ends the backend step with the setting to change, not a retry."""
    url = _agent(serve, llm, structured_output="json_object")
    llm.script(json_reply(PRESS_SW2), error(400, "response_format json_object unsupported"))
    body = coaching_request("failure", "run-1", "r1", {})
    body["diagnosis"]["expected_decision"] = "press the second button with the other robot"
    answer = _coach(url, body)
    assert _decisions(answer) == {"replacement": PRESS_SW2, "recovery": PRESS_SW2}
    assert llm.requests[0].body["response_format"]["type"] == "json_object"
    assert llm.requests[0].body["response_format"]["schema"]["title"] == "AgentDecision"
    refused = _coach(url, {**body, "request_id": "r2"})
    assert len(llm.requests) == 2, "a refused format is not retried"
    assert "set structured_output: none (or auto)" in refused.logs[0].content


def test_format_repaired_by_the_mistake_free_policy_is_labelled_a_fallback(
    serve: Serve, llm: ScriptedLLMServer
) -> None:
    """A malformed answer is replaced by the scripted policy's clean decision, no backend
    asked, and the proposal says `fallback`: no model made it."""
    url = _agent(serve, llm)
    memory = _memory_after_first(url)
    answer = _coach(url, coaching_request("format", "run-1", "r1", memory))
    assert _decisions(answer) == {"replacement": PRESS_SW1}
    assert _sources(answer) == {"fallback"}
    assert "decided again without mistakes (the fallback)" in answer.logs[0].content
    assert llm.requests == []


def test_the_mistake_free_policy_as_last_resort_is_labelled_a_fallback(
    serve: Serve, llm: ScriptedLLMServer
) -> None:
    """A failure whose diagnosis and backend give no decision is repaired by the policy
    without its mistakes, and the proposals say `fallback`, not the coach's work."""
    url = _agent(serve, llm)
    llm.script(reply("not json"), reply("still not json"))
    body = coaching_request("failure", "run-1", "r1", _memory_after_first(url))
    body["diagnosis"]["expected_decision"] = "do the right thing"
    answer = _coach(url, body)
    assert answer.status == "corrected"
    assert _sources(answer) == {"fallback"}
    assert "(fallback)" in answer.logs[0].content


def _llm_agent(serve: Serve, llm: ScriptedLLMServer) -> str:
    return serve(
        reference_app(ReferenceOptions(policy="llm", llm_endpoint=llm.endpoint, model="m"))
    )


@pytest.mark.parametrize("kind", ["format", "failure"])
def test_the_llm_policy_asked_again_is_labelled_its_repair_model(
    serve: Serve, llm: ScriptedLLMServer, kind: Literal["format", "failure"]
) -> None:
    """With the LLM policy, a format repair and a failure's last resort (no session, prose
    expected decision) ask the agent's model again, and the proposals say `repair_model`."""
    url = _llm_agent(serve, llm)
    llm.script(tool_calls_reply(("press_button", '{"id": "sw1", "target_robot_name": "panda"}')))
    body = coaching_request(kind, "run-7", "r1", {})
    if body.get("diagnosis"):
        body["diagnosis"]["expected_decision"] = "do the right thing"
    answer = _coach(url, body)
    assert answer.status == "corrected", answer.reason
    assert all(decision == PRESS_SW1 for decision in _decisions(answer).values())
    assert _sources(answer) == {"repair_model"}
    assert "decided again with the agent's model (repair_model)" in answer.logs[0].content
    assert len(llm.requests) == 1


@pytest.mark.parametrize(
    ("options", "source"),
    [
        (ReferenceOptions(), "fallback"),
        (ReferenceOptions(world="babyai"), "fallback"),
        (ReferenceOptions(policy="llm", model="m"), "repair_model"),
    ],
)
def test_each_policy_s_coach_says_who_decides_again(options: ReferenceOptions, source: str) -> None:
    """The scripted and BabyAI policies' coaches decide again without mistakes (`fallback`);
    the LLM policy's asks the model again (`repair_model`)."""
    _, coach = reference_policy(options)
    assert coach.repair_source == source


def test_without_a_session_or_a_decision_the_coach_abandons_with_the_reasons(
    serve: Serve,
) -> None:
    """Nothing parses, the policy cannot decide and no backend is shared: abandoned, saying why."""
    answer = _coach(_agent(serve), coaching_request("format", "run-9", "r1", {}))
    assert answer.status == "abandoned"
    assert answer.reason is not None
    assert "deciding again failed" in answer.reason
    assert "no coaching session for run run-9" in answer.reason


@pytest.mark.parametrize(
    ("replies", "why"),
    [
        ((reply("not json"), reply("still not json")), "backend checker failed"),
        ((json_reply({"say": "", "tool_calls": [{**PRESS_SW1["tool_calls"][0], "name": "push"}]}),),
         "malformed decision: it calls unknown tools ['push']"),
    ],
)  # fmt: skip
def test_a_backend_without_a_usable_decision_means_abandon(
    serve: Serve, llm: ScriptedLLMServer, replies: tuple[Any, ...], why: str
) -> None:
    """Answers that do not parse, or name unknown tools, leave the request abandoned."""
    url = _agent(serve, llm)
    llm.script(*replies)
    body = coaching_request("failure", "run-1", "r1", {})
    body["diagnosis"]["expected_decision"] = "do the right thing"
    answer = _coach(url, body)
    assert answer.status == "abandoned"
    assert answer.reason is not None
    assert why in answer.reason
