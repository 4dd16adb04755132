"""The OpenAI-compatible client: request shape per structured-output mode, headers, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from structlog.testing import capture_logs

from gencoach.config.loading import load_settings
from gencoach.errors import BackendError, BackendRequestError
from gencoach.protocol.llm import CaseSelectionAnswer, FailureDiagnosisAnswer
from gencoach.workers.backends import ChatMessage, Usage, make_backend
from tests.support.backends import events, fast_retry, openai_settings
from tests.support.llm_server import ScriptedLLMServer, error, json_reply, raw, reply
from tests.support.processes import free_port

PROMPT = [ChatMessage.system("You diagnose."), ChatMessage.user("Which decision failed?")]
DIAGNOSIS = {"decision_index": 2, "reason": "wrong tool", "expected_decision": None}


@pytest.mark.asyncio
async def test_json_schema_mode_sends_the_contract_schema(llm_server: ScriptedLLMServer) -> None:
    """json_schema mode sends the contract's schema (strict false: the public contract's
    decision has optional fields; narrowed contracts go strict), the prompt; returns usage."""
    llm_server.script(json_reply(DIAGNOSIS, usage=(120, 30)))
    settings = openai_settings(llm_server.endpoint, structured_output="json_schema")
    async with make_backend("coach", settings) as backend:
        answer = await backend.ask(PROMPT, FailureDiagnosisAnswer)
    assert answer.value == FailureDiagnosisAnswer.parse(DIAGNOSIS)
    assert answer.usage == Usage(120, 30, 150)
    body = llm_server.requests[0].body
    assert body["model"] == "coach-model"
    assert body["temperature"] == 0
    assert body["messages"] == [
        {"role": "system", "content": "You diagnose."},
        {"role": "user", "content": "Which decision failed?"},
    ]
    schema = FailureDiagnosisAnswer.model_json_schema()
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "FailureDiagnosisAnswer", "schema": schema, "strict": False},
    }
    assert schema["additionalProperties"] is False
    assert schema["properties"]["decision_index"]["minimum"] == 1


@pytest.mark.asyncio
async def test_array_contract_is_sent_without_strict(llm_server: ScriptedLLMServer) -> None:
    """A JSON-array contract, which strict mode cannot express, is sent with strict false."""
    llm_server.script(reply("[2, 3]"))
    async with make_backend("coach", openai_settings(llm_server.endpoint)) as backend:
        answer = await backend.ask(PROMPT, CaseSelectionAnswer)
    assert answer.value.root == [2, 3]
    assert llm_server.requests[0].body["response_format"]["json_schema"]["strict"] is False


@pytest.mark.asyncio
async def test_json_object_mode_sends_the_schema_llama_cpp_style(
    llm_server: ScriptedLLMServer,
) -> None:
    """json_object mode sends `{"type": "json_object", "schema": ...}`, as llama.cpp takes it."""
    llm_server.script(json_reply(DIAGNOSIS, usage=(7, 3)))
    settings = openai_settings(llm_server.endpoint, structured_output="json_object")
    async with make_backend("coach", settings) as backend:
        completion = await backend.complete(PROMPT, schema=FailureDiagnosisAnswer)
    assert completion.usage == Usage(7, 3, 10)
    assert completion.attempts == 1
    assert llm_server.requests[0].body["response_format"] == {
        "type": "json_object",
        "schema": FailureDiagnosisAnswer.model_json_schema(),
    }


@pytest.mark.asyncio
async def test_none_mode_sends_no_response_format(llm_server: ScriptedLLMServer) -> None:
    """Mode none sends no response_format, and a model and max_tokens when asked for."""
    llm_server.script(json_reply(DIAGNOSIS, usage=None, model="served-model"))
    settings = openai_settings(llm_server.endpoint, structured_output="none")
    async with make_backend("coach", settings) as backend:
        completion = await backend.complete(
            PROMPT, schema=FailureDiagnosisAnswer, model="other-model", max_tokens=256
        )
    body = llm_server.requests[0].body
    assert "response_format" not in body
    assert (body["model"], body["max_tokens"]) == ("other-model", 256)
    assert completion.model == "served-model"
    assert completion.usage == Usage(0, 0, 0)  # the server reported none


@pytest.mark.asyncio
async def test_headers_carry_config_and_api_key(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """Configured headers and the API key (as a bearer token) reach the server, once each."""
    config = tmp_path / "gencoach.yaml"
    backend_config = {
        "type": "ollama",
        "endpoint": llm_server.endpoint,
        "default_model": "m",
        "headers": {"X-Team": "coaching", "Content-type": "application/json"},
        "api_key_env": "COACH_KEY",
    }
    config.write_text(yaml.safe_dump({"backends": {"coach": backend_config}}))
    settings = load_settings(config, {"COACH_KEY": "sk-test-123"}).backends["coach"]
    llm_server.script(json_reply(DIAGNOSIS))
    async with make_backend("coach", settings) as backend:
        await backend.complete(PROMPT, schema=None)
    headers = llm_server.requests[0].headers
    assert headers["x-team"] == "coaching"
    assert headers["authorization"] == "Bearer sk-test-123"
    assert headers["content-type"] == "application/json"


@pytest.mark.asyncio
async def test_a_400_fails_at_once_with_the_server_message(
    llm_server: ScriptedLLMServer,
) -> None:
    """With an explicit mode, a 400 is not retried: BackendRequestError names the server's
    message and the setting to change after one try."""
    llm_server.script(error(400, "response_format json_schema is not supported"))
    settings = openai_settings(llm_server.endpoint, max_retries=3, structured_output="json_schema")
    with capture_logs() as logs:
        async with make_backend("coach", settings, retry=fast_retry()) as backend:
            with pytest.raises(BackendRequestError) as caught:
                await backend.complete(PROMPT, schema=FailureDiagnosisAnswer)
    assert len(llm_server.requests) == 1
    assert caught.value.status == 400
    assert caught.value.attempts == 1
    assert "json_schema is not supported" in str(caught.value)
    assert "set structured_output: json_object (or auto)" in str(caught.value)
    assert events(logs, "backend.retry") == []
    assert events(logs, "backend.refused")[0]["attempt"] == 1


@pytest.mark.asyncio
async def test_a_reply_that_is_no_completion_fails_with_its_text(
    llm_server: ScriptedLLMServer,
) -> None:
    """A 200 whose body is not a chat completion raises BackendError quoting the body."""
    llm_server.script(raw("<html>proxy login</html>"))
    async with make_backend("coach", openai_settings(llm_server.endpoint)) as backend:
        with pytest.raises(BackendError, match="proxy login"):
            await backend.complete(PROMPT, schema=None)


@pytest.mark.asyncio
async def test_endpoint_credentials_stay_out_of_errors() -> None:
    """The endpoint in errors has no password or query string."""
    port = free_port()
    settings = openai_settings(
        f"http://user:hunter2@127.0.0.1:{port}/v1/chat/completions?key=sk-q",
        max_retries=0,
        timeout_s=0.5,
    )
    async with make_backend("coach", settings, retry=fast_retry()) as backend:
        with pytest.raises(BackendError) as caught:
            await backend.complete(PROMPT, schema=None)
    assert "hunter2" not in str(caught.value)
    assert "sk-q" not in str(caught.value)
    assert f"http://127.0.0.1:{port}/v1/chat/completions" in str(caught.value)


@pytest.mark.asyncio
async def test_a_backend_opens_once() -> None:
    """A backend cannot be used outside `async with`, nor reopened after it closed."""
    backend = make_backend("coach", openai_settings("http://127.0.0.1:9/v1/chat/completions"))
    with pytest.raises(RuntimeError, match="async with"):
        await backend.complete(PROMPT, schema=None)
    async with backend:
        pass
    with pytest.raises(RuntimeError, match="opened before"):
        await backend.__aenter__()
