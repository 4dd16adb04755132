"""Structured output against imperfect servers: `auto` falls back and remembers, explicit
modes are strict, answers are bounded by max_tokens and a truncated one is its own error."""

from __future__ import annotations

import json

import pytest
import redis.asyncio
from structlog.testing import capture_logs

from gencoach.constants import Keys
from gencoach.errors import BackendRequestError, BackendTruncatedError
from gencoach.protocol.llm import FailureDiagnosisAnswer
from gencoach.workers.backends import ChatMessage, make_backend
from gencoach.workers.backends.modes import forget_learnt
from tests.support.backends import events, openai_settings
from tests.support.llm_server import ScriptedLLMServer, error, json_reply, raw, reply

PROMPT = [ChatMessage.system("You diagnose."), ChatMessage.user("Which decision failed?")]
ANSWER = {"decision_index": 1, "reason": "r", "expected_decision": None}
# What llama.cpp's bundled server answers to response_format json_schema.
LLAMA_REFUSAL = (
    "1 validation error: ('body', 'response_format', 'type'): Input should be 'text' or "
    "'json_object', input: json_schema"
)


@pytest.fixture(autouse=True)
def _forget_modes() -> None:
    forget_learnt()


def _kinds(server: ScriptedLLMServer) -> list[str | None]:
    return [(r.body.get("response_format") or {}).get("type") for r in server.requests]


@pytest.mark.asyncio
async def test_auto_falls_back_to_json_object_once_and_remembers_it(
    llm_server: ScriptedLLMServer, redis_url: str
) -> None:
    """A 500 naming json_schema is not retried: auto sends json_object with the schema,
    logs what worked once, and the next backend (a new job) starts from json_object."""
    llm_server.script(error(500, LLAMA_REFUSAL), json_reply(ANSWER), json_reply(ANSWER))
    settings = openai_settings(llm_server.endpoint, max_retries=3)
    client = redis.asyncio.Redis.from_url(redis_url)
    keys = Keys("gc-test-modes")
    try:
        with capture_logs() as logs:
            async with make_backend("llm", settings, client, keys=keys) as backend:
                answer = await backend.ask(PROMPT, FailureDiagnosisAnswer)
            forget_learnt()  # a new worker process: only Redis remembers
            async with make_backend("llm", settings, client, keys=keys) as backend:
                await backend.ask(PROMPT, FailureDiagnosisAnswer)
        stored = await client.hgetall(keys.backend_structured_output("llm"))
    finally:
        await client.delete(keys.backend_structured_output("llm"))
        await client.aclose()
    assert answer.value.decision_index == 1
    assert _kinds(llm_server) == ["json_schema", "json_object", "json_object"]
    assert llm_server.requests[1].body["response_format"]["schema"]["title"] == (
        "FailureDiagnosisAnswer"
    )
    assert list(stored.values()) == [b"json_object"]
    assert events(logs, "backend.retry") == [], "a refused format is no transient fault"
    learnt = events(logs, "backend.structured_output")
    assert [entry["mode"] for entry in learnt] == ["json_object"], "logged once"


@pytest.mark.asyncio
async def test_auto_ends_with_the_schema_in_the_prompt_and_one_reask(
    llm_server: ScriptedLLMServer,
) -> None:
    """A server refusing both formats gets no response_format and the schema in the prompt;
    a reply that does not parse is asked again once."""
    llm_server.script(
        error(400, "response_format is not supported"),
        error(400, "response_format is not supported"),
        reply("I think decision one."),
        json_reply(ANSWER),
    )
    async with make_backend("plain", openai_settings(llm_server.endpoint)) as backend:
        answer = await backend.ask(PROMPT, FailureDiagnosisAnswer)
    assert answer.value.decision_index == 1
    assert _kinds(llm_server) == ["json_schema", "json_object", None, None]
    shown = llm_server.requests[2].body["messages"][-1]["content"]
    assert shown.startswith("ANSWER FORMAT\nAnswer with one JSON value valid against")
    assert json.loads(shown.splitlines()[-1])["title"] == "FailureDiagnosisAnswer"
    assert "Your answer was refused" in llm_server.requests[3].body["messages"][-2]["content"]


@pytest.mark.asyncio
async def test_an_explicit_mode_is_strict_and_names_the_setting(
    llm_server: ScriptedLLMServer,
) -> None:
    """json_schema set explicitly: llama.cpp's 500 ends the call at once, saying what to set."""
    llm_server.script(error(500, LLAMA_REFUSAL))
    settings = openai_settings(llm_server.endpoint, structured_output="json_schema")
    async with make_backend("llm", settings) as backend:
        with pytest.raises(BackendRequestError) as caught:
            await backend.complete(PROMPT, schema=FailureDiagnosisAnswer)
    assert len(llm_server.requests) == 1
    assert "it refuses structured_output json_schema: set structured_output: json_object" in str(
        caught.value
    )


@pytest.mark.asyncio
async def test_max_tokens_and_temperature_go_with_every_call(
    llm_server: ScriptedLLMServer,
) -> None:
    """The backend's max_tokens (1024 by default) and temperature are sent on each call."""
    llm_server.script(reply("free text"), reply("free text"))
    async with make_backend("llm", openai_settings(llm_server.endpoint)) as backend:
        await backend.complete(PROMPT, schema=None)
    settings = openai_settings(llm_server.endpoint, max_tokens=64, temperature=0.7)
    async with make_backend("llm", settings) as backend:
        await backend.complete(PROMPT, schema=None)
    first, second = (request.body for request in llm_server.requests)
    assert (first["max_tokens"], first["temperature"]) == (1024, 0.0)
    assert (second["max_tokens"], second["temperature"]) == (64, 0.7)


@pytest.mark.asyncio
async def test_an_answer_cut_by_the_token_limit_is_its_own_error(
    llm_server: ScriptedLLMServer,
) -> None:
    """finish_reason length raises BackendTruncatedError naming max_tokens, with no re-ask."""
    cut = {
        "choices": [
            {"message": {"role": "assistant", "content": '{"decision_'}, "finish_reason": "length"}
        ],
        "model": "m",
    }
    llm_server.script(raw(json.dumps(cut)))
    settings = openai_settings(llm_server.endpoint, max_tokens=8)
    async with make_backend("llm", settings) as backend:
        with pytest.raises(BackendTruncatedError) as caught:
            await backend.ask(PROMPT, FailureDiagnosisAnswer)
    assert len(llm_server.requests) == 1
    assert "cut by the token limit (max_tokens 8)" in str(caught.value)


@pytest.mark.asyncio
async def test_a_format_whose_answer_was_cut_is_remembered_all_the_same(
    llm_server: ScriptedLLMServer, redis_url: str
) -> None:
    """auto falls back from json_schema to json_object and the answer is cut by the token
    limit: the server took json_object, so that mode is remembered (and logged) and the
    next job starts from it, although this job ends with the truncation."""
    cut = {
        "choices": [
            {"message": {"role": "assistant", "content": '{"decision_'}, "finish_reason": "length"}
        ],
        "model": "m",
    }
    llm_server.script(error(500, LLAMA_REFUSAL), raw(json.dumps(cut)))
    settings = openai_settings(llm_server.endpoint, max_tokens=8)
    client = redis.asyncio.Redis.from_url(redis_url)
    keys = Keys("gc-test-modes-cut")
    try:
        with capture_logs() as logs:
            async with make_backend("llm", settings, client, keys=keys) as backend:
                with pytest.raises(BackendTruncatedError):
                    await backend.ask(PROMPT, FailureDiagnosisAnswer)
        stored = await client.hgetall(keys.backend_structured_output("llm"))
    finally:
        await client.delete(keys.backend_structured_output("llm"))
        await client.aclose()
    assert _kinds(llm_server) == ["json_schema", "json_object"]
    assert list(stored.values()) == [b"json_object"]
    assert [e["mode"] for e in events(logs, "backend.structured_output")] == ["json_object"]
