"""`POST /v1/coaching` in the toolkit: sessions handed to the coach, strictness, safe answers."""

from __future__ import annotations

from typing import Any

import httpx

from gencoach.agents import create_agent_app
from gencoach.protocol import SpecializedCoachingRequest, SpecializedCoachingResponse
from tests.agents.fakes import EchoPolicy, FixedCoach, info
from tests.agents.payloads import coaching_request, session_config
from tests.support.agent_server import Serve
from tests.support.llm_server import ScriptedLLMServer


def _post(url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}/v1/coaching", json=body)


def test_coach_without_backends_answers_without_a_session(serve: Serve) -> None:
    """A coach that needs no session is called with none and its proposal is sent."""
    coach = FixedCoach()
    url = serve(create_agent_app(info("failure"), EchoPolicy(), coach))
    body = coaching_request("failure", "run-1", "req-1", {})
    response = _post(url, body)
    assert response.status_code == 200
    answer = SpecializedCoachingResponse.parse(response.json())
    answer.validate_request(SpecializedCoachingRequest.parse(body))
    assert answer.status == "corrected"
    assert coach.sessions == [None]


def test_unknown_run_is_404_when_the_coach_needs_a_session(serve: Serve) -> None:
    """A coach that requires a session refuses a run without one with 404."""
    coach = FixedCoach(requires_session=True)
    url = serve(create_agent_app(info("failure"), EchoPolicy(), coach))
    response = _post(url, coaching_request("failure", "run-1", "req-1", {}))
    assert response.status_code == 404
    assert "no coaching session for run run-1" in response.json()["detail"]
    assert coach.sessions == []


def test_the_coach_gets_the_runs_session(serve: Serve, llm: ScriptedLLMServer) -> None:
    """After PUT, the coach receives the session with its backends; without logs if asked."""
    coach = FixedCoach(requires_session=True)
    url = serve(create_agent_app(info("failure"), EchoPolicy(), coach))
    config = {**session_config(llm.endpoint), "capture_logs": False}
    assert httpx.put(f"{url}/v1/coaching/sessions/run-1", json=config).status_code == 204
    response = _post(url, coaching_request("failure", "run-1", "req-1", {}))
    assert response.status_code == 200
    [session] = coach.sessions
    assert session is not None
    assert session.run_id == "run-1"
    assert session.backend_names == ["checker"]


def test_a_kind_the_agent_does_not_announce_is_422(serve: Serve) -> None:
    """A request of a kind missing from `specialized_coaching` is refused naming `kind`."""
    url = serve(create_agent_app(info("failure"), EchoPolicy(), FixedCoach()))
    response = _post(url, coaching_request("format", "run-1", "req-1", {}))
    assert response.status_code == 422
    [problem] = response.json()["detail"]
    assert problem["field"] == "kind"
    assert "does not coach 'format'" in problem["reason"]


def test_an_invalid_request_is_422_naming_the_field(serve: Serve) -> None:
    """A target step missing from the trajectory is refused with 422 naming it."""
    url = serve(create_agent_app(info("failure"), EchoPolicy(), FixedCoach()))
    body = {**coaching_request("failure", "run-1", "req-1", {}), "target_step_id": 9}
    response = _post(url, body)
    assert response.status_code == 422
    assert [item["field"] for item in response.json()["detail"]] == ["target_step_id"]


def test_a_proposal_at_an_unoffered_point_becomes_an_error_answer(serve: Serve) -> None:
    """The toolkit never sends a proposal at a point the request did not offer."""
    url = serve(create_agent_app(info("suboptimal"), EchoPolicy(), FixedCoach(point="recovery")))
    body = coaching_request("suboptimal", "run-1", "req-1", {})
    response = _post(url, body)
    assert response.status_code == 200
    answer = SpecializedCoachingResponse.parse(response.json())
    assert answer.status == "error"
    assert answer.proposals == []
    assert answer.reason is not None
    assert "unknown reinjection point 'recovery'" in answer.reason
