"""The public surface of `gencoach.workers.backends`, and the scripted test server it relies on."""

from __future__ import annotations

import httpx

import gencoach.workers.backends as backends
from tests.support.llm_server import ScriptedLLMServer, reply


def test_all_is_pinned() -> None:
    """`__all__` lists exactly the supported names, sorted, each importable."""
    assert backends.__all__ == [
        "Answer",
        "Backend",
        "ChatMessage",
        "Completion",
        "Exchange",
        "OpenAIBackend",
        "PythonBackend",
        "RedisSemaphore",
        "Usage",
        "make_backend",
        "reask_prompt",
        "response_format",
    ]
    assert all(hasattr(backends, name) for name in backends.__all__)


def test_scripted_server_answers_in_order_then_says_it_ran_out(
    llm_server: ScriptedLLMServer,
) -> None:
    """The test server answers its script in order, records requests, then answers 500."""
    llm_server.script(reply("first", usage=(3, 4)))
    with httpx.Client() as client:
        first = client.post(llm_server.endpoint, json={"messages": [], "model": "m"})
        extra = client.post(llm_server.endpoint, json={"n": 2})
        missing = client.post(f"{llm_server.url}/v1/other", json={})
    assert first.json()["choices"][0]["message"]["content"] == "first"
    assert first.json()["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    assert extra.status_code == 500
    assert "no reply left" in extra.json()["error"]["message"]
    assert missing.status_code == 404
    assert [request.body for request in llm_server.requests] == [
        {"messages": [], "model": "m"},
        {"n": 2},
        {},
    ]
    assert llm_server.pending == 0
