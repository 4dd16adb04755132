"""The LLM policy against a scripted OpenAI-compatible server: function tools in, tool_calls out."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gencoach.agents.reference import ReferenceOptions, reference_app
from gencoach.sim import Episode
from tests.agents.payloads import request
from tests.agents.play import ask, situation_input
from tests.support.agent_server import Serve
from tests.support.llm_server import (
    ScriptedLLMServer,
    error,
    json_reply,
    reply,
    tool_calls_reply,
)
from tests.support.processes import free_port


def _agent(serve: Serve, endpoint: str) -> str:
    options = ReferenceOptions(policy="llm", llm_endpoint=endpoint, model="qwen-test")
    return serve(reference_app(options))


def _input(memory: Any = None, num_outputs: int = 1) -> dict[str, Any]:
    episode = Episode.start("buttons", 0)
    item = situation_input(
        episode, {"type": "user", "content": episode.instruction()}, memory or {}
    )
    return {**item, "num_outputs": num_outputs}


@pytest.mark.asyncio
async def test_tools_are_offered_as_functions_and_tool_calls_become_the_decision(
    serve: Serve, llm: ScriptedLLMServer
) -> None:
    """The request offers each tool as a function with target_robot_name; calls are parsed."""
    llm.script(tool_calls_reply(("press_button", '{"id": "sw3", "target_robot_name": "ur5"}')))
    output = await ask(_agent(serve, llm.endpoint), _input())
    assert output.status == "completed"
    assert output.output is not None
    assert output.output.model_dump(mode="json") == {
        "say": "",
        "tool_calls": [
            {"name": "press_button", "arguments": {"id": "sw3"}, "target_robot_name": "ur5"}
        ],
    }
    [sent] = llm.requests
    body = sent.body
    assert body["model"] == "qwen-test"
    functions = {tool["function"]["name"]: tool["function"] for tool in body["tools"]}
    assert set(functions) == {"press_button", "take_obj", "depose", "cancel_current_action"}
    assert all(tool["type"] == "function" for tool in body["tools"])
    assert body["tool_choice"] == "auto", "servers such as llama.cpp need an explicit choice"
    press = functions["press_button"]["parameters"]
    assert press["properties"]["id"]["type"] == "string"
    assert press["properties"]["target_robot_name"]["enum"] == ["panda", "ur5"]
    assert press["required"] == ["id", "target_robot_name"]
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][-1] == {"role": "user", "content": _input()["instruction"]["content"]}


@pytest.mark.asyncio
async def test_the_history_and_rules_are_in_the_prompt(
    serve: Serve, llm: ScriptedLLMServer
) -> None:
    """USER, MODEL and SYSTEM entries become user, assistant and feedback messages."""
    take = {"name": "take_obj", "arguments": {"obj": "cube"}, "target_robot_name": "panda"}
    memory = {
        "history": [
            {"author": "USER", "content": "Take the red cube."},
            {"author": "MODEL", "content": json.dumps({"say": "", "tool_calls": [take]})},
            {"author": "SYSTEM", "content": '{"infos": "panda: take_obj succeed"}'},
        ],
        "memory_list": ["answer briefly"],
    }
    llm.script(reply("Done."))
    output = await ask(_agent(serve, llm.endpoint), _input(memory))
    assert output.output is not None
    assert output.output.say == "Done."
    messages = llm.requests[0].body["messages"]
    assert "- answer briefly" in messages[0]["content"]
    assert messages[1:4] == [
        {"role": "user", "content": "Take the red cube."},
        {"role": "assistant", "content": 'panda.take_obj(obj="cube")'},
        {"role": "user", "content": 'Environment feedback: {"infos": "panda: take_obj succeed"}'},
    ]


@pytest.mark.asyncio
async def test_each_candidate_is_one_request(serve: Serve, llm: ScriptedLLMServer) -> None:
    """Two candidates send two requests and keep their own answers."""
    llm.script(json_reply("first"), json_reply("second"))
    url = _agent(serve, llm.endpoint)
    item = _input(num_outputs=2)
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{url}/v1/responses", json=request(item))
    says = sorted(candidate["output"]["say"] for candidate in response.json())
    assert says == ['"first"', '"second"']
    assert len(llm.requests) == 2


@pytest.mark.asyncio
async def test_unreadable_arguments_become_an_error_candidate(
    serve: Serve, llm: ScriptedLLMServer
) -> None:
    """Arguments that are not JSON give a `malformed_output` error with the raw answer kept."""
    llm.script(tool_calls_reply(("press_button", "{id: sw3")))
    output = await ask(_agent(serve, llm.endpoint), _input())
    assert output.status == "error"
    assert output.error is not None
    assert output.error.code == "malformed_output"
    raw = output.internal_steps[0]["output_raw"]
    assert isinstance(raw, str)
    assert "{id: sw3" in raw


@pytest.mark.asyncio
async def test_an_unreachable_server_becomes_an_error_candidate(serve: Serve) -> None:
    """A closed port gives a `backend_unavailable` error candidate, not a failed request."""
    output = await ask(
        _agent(serve, f"http://127.0.0.1:{free_port()}/v1/chat/completions"), _input()
    )
    assert output.status == "error"
    assert output.error is not None
    assert output.error.code == "backend_unavailable"


def test_the_llm_policy_needs_a_model() -> None:
    """Choosing the llm policy without a model fails at start-up, naming the option."""
    with pytest.raises(ValueError, match="--model"):
        ReferenceOptions(policy="llm")


PRESS = {"name": "press_button", "arguments": {"id": "sw3"}, "target_robot_name": "ur5"}


@pytest.mark.asyncio
async def test_json_answers_fall_back_as_the_backends_do(
    serve: Serve, llm: ScriptedLLMServer
) -> None:
    """With `answers="json"`, a server refusing json_schema is asked again with json_object
    and the schema (the backends' fallback): the JSON answer is the decision."""
    llm.script(
        error(400, "response_format json_schema unsupported"),
        json_reply({"say": "", "tool_calls": [PRESS]}),
    )
    options = ReferenceOptions(policy="llm", llm_endpoint=llm.endpoint, model="m", answers="json")
    output = await ask(serve(reference_app(options)), _input())
    assert output.status == "completed", output.error
    assert output.output is not None
    assert output.output.model_dump(mode="json") == {"say": "", "tool_calls": [PRESS]}
    formats = [sent.body["response_format"]["type"] for sent in llm.requests]
    assert formats == ["json_schema", "json_object"]
    assert all("tools" not in sent.body for sent in llm.requests)
    assert output.internal_steps[0]["input_elements"] == {"model": "m", "answers": "json"}


@pytest.mark.asyncio
async def test_an_answer_refused_twice_is_a_malformed_output(
    serve: Serve, llm: ScriptedLLMServer
) -> None:
    """JSON that is no decision is re-asked once naming why, then becomes `malformed_output`."""
    llm.script(json_reply({"do": "it"}), json_reply({"do": "it"}))
    options = ReferenceOptions(
        policy="llm", llm_endpoint=llm.endpoint, model="m", answers="json",
        structured_output="json_schema",
    )  # fmt: skip
    output = await ask(serve(reference_app(options)), _input())
    assert output.status == "error"
    assert output.error is not None
    assert output.error.code == "malformed_output"
    assert "Your answer was refused" in llm.requests[1].body["messages"][-1]["content"]
