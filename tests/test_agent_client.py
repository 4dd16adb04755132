"""The bodies `AgentClient` sends: the JSON pydantic writes, which an agent reads as the
same document httpx's `json=` would have sent."""

from __future__ import annotations

import json

import httpx
import pytest

from gencoach.agent_client import AgentClient, json_body
from gencoach.protocol import SpecializedCoachingRequest
from tests.protocol.examples import coaching_request
from tests.support.agent_server import ScriptedAgent


def _request() -> SpecializedCoachingRequest:
    body = coaching_request()
    body["stage"]["goal"] = "Déplacer la tasse ☕ à gauche"
    return SpecializedCoachingRequest.model_validate(body)


def test_a_body_is_the_models_json_document_with_its_content_type() -> None:
    request = _request()
    content, headers = json_body(request)
    assert headers == {"Content-Type": "application/json"}
    assert json.loads(content) == request.model_dump(mode="json")
    assert "☕" in content  # written as UTF-8, as httpx's `json=` does


@pytest.mark.asyncio
async def test_a_real_agent_reads_the_coaching_request_as_sent(
    scripted_agent: ScriptedAgent,
) -> None:
    request = _request()
    async with httpx.AsyncClient() as http:
        answer = await AgentClient(scripted_agent.url, http).coach(request)
    assert answer.request_id == request.request_id
    assert scripted_agent.coaching_requests == [request.model_dump(mode="json")]
