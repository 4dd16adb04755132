"""The agent app factory: routes, status codes, strict validation, answers always valid."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from gencoach.agents import SessionStore, create_agent_app
from gencoach.protocol import AgentRequest, AgentResponse
from tests.agents.fakes import EchoPolicy, FixedCoach, info
from tests.agents.payloads import agent_input, coaching_request, request, session_config
from tests.support.agent_server import Serve
from tests.support.llm_server import ScriptedLLMServer
from tests.support.processes import free_port


def _fields(response: httpx.Response) -> list[str]:
    return [item["field"] for item in response.json()["detail"]]


def test_health_and_info(serve: Serve) -> None:
    """`/health` answers ready and `/v1/info` the announcement as given, with the
    toolkit's own capability: it reads `decision_source` in gencoach's payloads (an
    author may say otherwise)."""
    announced = info(agent_version="3.1")
    url = serve(create_agent_app(announced, EchoPolicy()))
    assert httpx.get(f"{url}/health").json() == {"status": "ready"}
    body = announced.model_dump(mode="json")
    body["capabilities"] = {"decision_source": True, **announced.capabilities}
    assert httpx.get(f"{url}/v1/info").json() == body
    refusing = info(capabilities={"decision_source": False})
    url = serve(create_agent_app(refusing, EchoPolicy()))
    assert httpx.get(f"{url}/v1/info").json()["capabilities"]["decision_source"] is False


def test_answers_every_input_in_order_with_its_memory(serve: Serve) -> None:
    """Candidates come in input order then candidate order, each with its rebuilt history."""
    url = serve(create_agent_app(info(), EchoPolicy()))
    body = request(agent_input(5, "first", num_outputs=2), agent_input(2, "second", num_outputs=3))
    response = httpx.post(f"{url}/v1/responses", json=body)
    assert response.status_code == 200
    answer = AgentResponse.parse(response.json())
    answer.validate_request(AgentRequest.parse(body))
    assert [(c.source_id, c.candidate_index) for c in answer.root] == [
        (5, 0), (5, 1), (2, 0), (2, 1), (2, 2),
    ]  # fmt: skip
    last = answer.root[-1]
    assert last.output is not None
    assert last.output.say == "second #2"
    assert last.memory["history"] == [
        {"author": "USER", "content": "second"},
        {"author": "MODEL", "content": '{"say": "second #2", "tool_calls": []}'},
    ]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda item: [item, item], "inputs.1.id"),
        (lambda item: [{**item, "id": "1"}], "inputs.0.id"),
        (lambda item: [{**item, "num_outputs": 0}], "inputs.0.num_outputs"),
        (lambda item: [{**item, "memory": {"history": [{"author": "BOT", "content": ""}]}}],
         "inputs.0.memory.history.0.author"),
        (lambda item: [{**item, "extra_keys": {"coaching": {"kind": "rewrite"}}}],
         "inputs.0.extra_keys.coaching.kind"),
    ],
)  # fmt: skip
def test_invalid_requests_are_refused_naming_the_field(
    serve: Serve, change: Callable[[dict[str, Any]], list[dict[str, Any]]], field: str
) -> None:
    """A request breaking the contract gets 422 whose detail names the refused field."""
    policy = EchoPolicy()
    url = serve(create_agent_app(info(), policy))
    body = request(*change(agent_input(1, "go")))
    response = httpx.post(f"{url}/v1/responses", json=body)
    assert response.status_code == 422
    assert field in _fields(response)
    assert policy.calls == []


def test_unknown_top_level_field_is_refused(serve: Serve) -> None:
    """An unknown field in the body is refused with 422 naming it."""
    url = serve(create_agent_app(info(), EchoPolicy()))
    response = httpx.post(f"{url}/v1/responses", json={**request(), "stream": True})
    assert response.status_code == 422
    assert _fields(response) == ["stream"]


@pytest.mark.parametrize(
    ("mode", "code"),
    [("refuse", "unknown_task"), ("crash", "policy_crashed"), ("short", "policy_error")],
)
def test_policy_failures_become_error_candidates(serve: Serve, mode: str, code: str) -> None:
    """A policy that refuses, crashes or miscounts yields well-formed error candidates."""
    url = serve(create_agent_app(info(), EchoPolicy(mode=mode)))
    memory = {"history": [{"author": "USER", "content": "before"}], "memory_list": ["r"]}
    body = request(agent_input(1, "go", memory=memory, num_outputs=2))
    response = httpx.post(f"{url}/v1/responses", json=body)
    assert response.status_code == 200
    answer = AgentResponse.parse(response.json())
    answer.validate_request(AgentRequest.parse(body))
    for candidate in answer.root:
        assert candidate.status == "error"
        assert candidate.error is not None
        assert candidate.error.code == code
        assert candidate.error.message
        assert candidate.memory == memory


def test_coaching_needs_a_coach_exactly_when_announced() -> None:
    """Announcing coaching without a coach, or a coach without kinds, is refused at creation."""
    with pytest.raises(ValueError, match="coach"):
        create_agent_app(info("failure"), EchoPolicy())
    with pytest.raises(ValueError, match="coach"):
        create_agent_app(info(), EchoPolicy(), FixedCoach())


def test_without_coaching_there_are_no_coaching_routes(serve: Serve) -> None:
    """An agent that announces no coaching answers 404 on the coaching routes."""
    url = serve(create_agent_app(info(), EchoPolicy()))
    assert httpx.put(f"{url}/v1/coaching/sessions/r", json={}).status_code == 404


def test_session_put_is_idempotent_and_a_different_config_conflicts(
    serve: Serve, llm: ScriptedLLMServer
) -> None:
    """PUT answers 204, 204 again for the same config, 409 for another; probes send no chat."""
    url = serve(create_agent_app(info("failure"), EchoPolicy(), FixedCoach()))
    path = f"{url}/v1/coaching/sessions/run-1"
    assert httpx.put(path, json=session_config(llm.endpoint)).status_code == 204
    assert httpx.put(path, json=session_config(llm.endpoint)).status_code == 204
    other = httpx.put(path, json=session_config(llm.endpoint, model="other"))
    assert other.status_code == 409
    assert "different config" in other.json()["detail"]
    assert llm.requests == []  # the probe is a GET, which costs no completion


def test_session_with_an_unreachable_backend_is_503_naming_it(serve: Serve) -> None:
    """A backend on a closed port refuses the session with 503 naming that backend."""
    url = serve(create_agent_app(info("failure"), EchoPolicy(), FixedCoach()))
    closed = f"http://127.0.0.1:{free_port()}/v1/chat/completions"
    response = httpx.put(f"{url}/v1/coaching/sessions/run-1", json=session_config(closed))
    assert response.status_code == 503
    assert response.json()["detail"].startswith("backend checker unreachable at http://127.0.0.1")
    # Nothing was opened: the same PUT with a reachable backend is not a conflict.
    assert httpx.delete(f"{url}/v1/coaching/sessions/run-1").status_code == 404


def test_session_probe_times_out_as_503(serve: Serve) -> None:
    """A backend that accepts connections but never answers within the probe timeout is 503."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}/v1/chat/completions"
        store = SessionStore(probe_timeout_s=0.3)
        url = serve(create_agent_app(info("failure"), EchoPolicy(), FixedCoach(), sessions=store))
        response = httpx.put(f"{url}/v1/coaching/sessions/r", json=session_config(endpoint))
    assert response.status_code == 503
    assert "backend checker unreachable" in response.json()["detail"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda c: {**c, "backends": {}}, "backends"),
        (lambda c: {**c, "extra": 1}, "extra"),
        (lambda c: {"backends": {"checker": {**c["backends"]["checker"], "type": "openai"}}},
         "backends.checker.type"),
        (lambda c: {"backends": {"checker": {**c["backends"]["checker"], "endpoint": "ftp://x"}}},
         "backends.checker.endpoint"),
    ],
)  # fmt: skip
def test_invalid_session_configs_are_422_naming_the_field(
    serve: Serve, llm: ScriptedLLMServer, change: Callable[[Any], Any], field: str
) -> None:
    """An invalid or unsupported session config is refused with 422 naming the field."""
    url = serve(create_agent_app(info("failure"), EchoPolicy(), FixedCoach()))
    body = change(session_config(llm.endpoint))
    response = httpx.put(f"{url}/v1/coaching/sessions/run-1", json=body)
    assert response.status_code == 422
    assert field in _fields(response)


def test_delete_closes_a_session_and_an_unknown_run_is_404(
    serve: Serve, llm: ScriptedLLMServer
) -> None:
    """DELETE answers 204 for an open session, then 404 once it is gone."""
    url = serve(create_agent_app(info("failure"), EchoPolicy(), FixedCoach()))
    path = f"{url}/v1/coaching/sessions/run-1"
    assert httpx.put(path, json=session_config(llm.endpoint)).status_code == 204
    assert httpx.delete(path).status_code == 204
    assert httpx.delete(path).status_code == 404
    assert httpx.delete(f"{url}/v1/coaching/sessions/never").status_code == 404


def test_a_run_id_holding_a_slash_reaches_its_session(serve: Serve, llm: ScriptedLLMServer) -> None:
    """`team%2Frun-1` (as gencoach encodes `team/run-1`) opens and closes that run's session."""
    url = serve(create_agent_app(info("failure"), EchoPolicy(), FixedCoach()))
    path = f"{url}/v1/coaching/sessions/team%2Frun-1"
    assert httpx.put(path, json=session_config(llm.endpoint)).status_code == 204
    assert httpx.delete(f"{url}/v1/coaching/sessions/team/run-1").status_code == 204
    assert httpx.delete(path).status_code == 404


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=b"],
)
def test_a_body_not_sent_as_json_is_415_on_every_body_route(
    serve: Serve, content_type: str | None
) -> None:
    """The answer a browser's form or simple cross-origin post gets, on each route that
    takes a body: 415 naming the Content-Type, and nothing is done with the body."""
    policy, coach = EchoPolicy(), FixedCoach()
    url = serve(create_agent_app(info("failure"), policy, coach))
    bodies = {
        ("POST", "/v1/responses"): request(agent_input(1, "go")),
        ("PUT", "/v1/coaching/sessions/run-1"): session_config("http://127.0.0.1:9/v1/chat"),
        ("POST", "/v1/coaching"): coaching_request("failure", "run-1", "req-1", {}),
    }
    headers = {} if content_type is None else {"Content-Type": content_type}
    shown = repr(content_type) if content_type else "none"
    for (method, path), body in bodies.items():
        content = json.dumps(body).encode()
        response = httpx.request(method, url + path, content=content, headers=headers)
        assert response.status_code == 415, (path, response.text)
        assert response.json() == {
            "detail": f"the body must be JSON: send Content-Type: application/json (got {shown})"
        }
    assert (policy.calls, coach.sessions) == ([], [])
    assert httpx.delete(f"{url}/v1/coaching/sessions/run-1").status_code == 404  # none opened


def test_json_with_a_charset_or_a_json_suffix_is_taken(serve: Serve) -> None:
    """`application/json; charset=utf-8` and `application/…+json` bodies are read as JSON."""
    url = serve(create_agent_app(info(), EchoPolicy()))
    for content_type in ("application/json; charset=utf-8", "application/vnd.magma+json"):
        content = json.dumps(request(agent_input(1, "go"))).encode()
        answer = httpx.post(
            f"{url}/v1/responses", content=content, headers={"Content-Type": content_type}
        )
        assert answer.status_code == 200, answer.text
