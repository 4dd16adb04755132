"""The env agent's LLM policy against a real llama.cpp server (SmolLM2-135M-Instruct, the
`chatml-function-calling` format, which passes tools to the model): a decision by tool
call in the text rooms, and a coached correction of its run through the whole loop (the
adapter's oracle teacher, the agent's coach, the integration executing the order)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import redis

from gencoach.integrations.gymnasium import CampaignOptions, GymEpisode, run_campaign
from gencoach.integrations.gymnasium.agent import EnvAgentOptions, env_app
from gencoach.integrations.gymnasium.episode import GYM_STATE_KEY
from gencoach.integrations.textrooms import TextRoomsAdapter
from gencoach.protocol import AgentResponse
from tests.support.agent_server import ThreadedServer
from tests.support.controller import wait_for
from tests.support.integrations import oracle_controller
from tests.support.llama_server import MODEL_ALIAS, LlamaServer, missing_extra, start_server
from tests.support.saves import assert_audit_clean, save_complete

pytest.importorskip("gymnasium")
pytestmark = pytest.mark.timeout(900)
TEACHER = "gencoach.integrations.textrooms:teacher"


@pytest.fixture(scope="module")
def llama_tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The real server in a function-calling chat format, for this module's tests."""
    reason = missing_extra()
    if reason is not None:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("llama-tools")
    server = start_server(folder / "server.log", chat_format="chatml-function-calling")
    yield server
    server.stop()


@pytest.fixture
def env_agent_url(llama_tools: LlamaServer) -> Iterator[str]:
    """The env agent for the text rooms, its LLM policy answering by tool calls."""
    options = EnvAgentOptions(policy="llm", llm_endpoint=llama_tools.endpoint, model=MODEL_ALIAS)
    server = ThreadedServer(env_app(TextRoomsAdapter(), options))
    server.start()
    yield server.url
    server.stop()


def _first_input(adapter: TextRoomsAdapter) -> dict[str, Any]:
    """The input of seed 0's first situation, as `sim gym` sends it."""
    episode = GymEpisode.start(adapter, 0)
    mission = adapter.instruction(episode.env, episode.observation)
    return {
        "id": 0,
        "instruction": {"type": "user", "content": f"{mission}\n\n{episode.text()}"},
        "tools": [tool.to_magma() for tool in adapter.tools],
        "extra_keys": {GYM_STATE_KEY: {"adapter": adapter.options(), "seed": 0, "actions": []}},
    }


def test_the_model_decides_by_a_tool_call(env_agent_url: str) -> None:
    """The first situation of seed 0: the model's answer is a call of an offered tool with
    the argument it takes, addressed to the env's one robot."""
    adapter = TextRoomsAdapter()
    body = {"request_id": "tool-call", "inputs": [_first_input(adapter)]}
    answer = AgentResponse.parse(
        httpx.post(f"{env_agent_url}/v1/responses", json=body, timeout=300).json()
    )
    [output] = answer.root
    assert output.status == "completed", output.error
    assert output.output is not None
    [call] = output.output.tool_calls
    expected = {tool.name: [param for param, _ in tool.arguments] for tool in adapter.tools}
    assert call.name in expected
    assert sorted(call.arguments) == expected[call.name]
    assert call.target_robot_name == "agent"
    assert output.internal_steps[0]["component"] == "llm"


def test_a_run_of_the_model_is_coached_and_the_correction_executed(
    env_agent_url: str, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Short runs of the model (6 steps) end unsolved; the oracle teacher diagnoses them, the
    agent's coach takes the expected call, and the integration executes the correction:
    coached candidates are counted apart and the saves pass the audit."""
    adapter = TextRoomsAdapter(max_steps=6)
    with oracle_controller(tmp_path, redis_url, TEACHER) as controller:
        options = CampaignOptions(
            adapter=adapter,
            agent_url=env_agent_url,
            redis_url=redis_url,
            runs=1,
            settle_timeout_s=600.0,
            timeout_s=300.0,
            campaign="rooms-smollm2",
        )
        report = anyio.run(run_campaign, options)
        saves = [controller.output_dir / run_id for run_id in report.run_ids]
        wait_for(lambda: all(save_complete(folder) for folder in saves), 60, "complete saves")
        requests = httpx.get(f"{controller.url}/v1/runs/{report.run_ids[0]}/requests").json()
    print(report.summary(), [(r["route"], r["state"]) for r in requests["requests"]])
    assert report.total.asked > 0
    assert report.total.coached >= 1, report.summary()
    assert report.total.settle_timeouts == 0
    assert_audit_clean(*saves)


def test_the_model_answers_json_through_the_structured_output_fallback(llama: LlamaServer) -> None:
    """With `answers="json"` on the plain chatml server, which refuses json_schema with a
    500, the policy falls back to json_object with the schema, as the backends do: the
    answer is a decision addressed to the env's robot."""
    options = EnvAgentOptions(
        policy="llm", llm_endpoint=llama.endpoint, model=MODEL_ALIAS, answers="json"
    )
    server = ThreadedServer(env_app(TextRoomsAdapter(), options))
    server.start()
    try:
        body = {"request_id": "json", "inputs": [_first_input(TextRoomsAdapter())]}
        raw = httpx.post(f"{server.url}/v1/responses", json=body, timeout=300).json()
    finally:
        server.stop()
    [output] = AgentResponse.parse(raw).root
    assert output.status == "completed", output.error
    assert output.output is not None
    assert all(call.target_robot_name == "agent" for call in output.output.tool_calls)
    assert output.internal_steps[0]["input_elements"] == {"model": MODEL_ALIAS, "answers": "json"}
