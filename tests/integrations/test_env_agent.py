"""The shipped agent for any adapter (`gencoach agent serve --env`), on real envs: the
oracle policy on the text rooms, BabyAI and FrozenLake, the LLM policy by tool calls on
FrozenLake and BabyAI and by JSON answers on the text rooms (a real OpenAI-compatible
server on loopback)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
import redis

from gencoach.integrations.gymnasium import (
    CampaignOptions,
    CampaignReport,
    GymEpisode,
    run_campaign,
)
from gencoach.integrations.gymnasium.adapter import GymAdapter
from gencoach.integrations.gymnasium.agent import EnvAgentOptions, env_app
from gencoach.integrations.textrooms import TextRoomsAdapter
from tests.integrations.frozenlake import FrozenLake
from tests.support.agent_server import ThreadedServer
from tests.support.llm_server import json_reply, scripted_llm_servers, tool_calls_reply
from tests.support.streams import reported_events

pytest.importorskip("gymnasium")
pytestmark = [pytest.mark.slow, pytest.mark.asyncio, pytest.mark.timeout(120)]


def _events(client: redis.Redis) -> list[dict[str, Any]]:
    return reported_events(client)


async def _campaign(
    adapter: GymAdapter, options: EnvAgentOptions, redis_url: str, runs: int, name: str
) -> CampaignReport:
    """`runs` runs of the adapter against the env agent served on loopback (no controller)."""
    server = ThreadedServer(env_app(adapter, options))
    await anyio.to_thread.run_sync(server.start)
    try:
        campaign = CampaignOptions(
            adapter=adapter,
            agent_url=server.url,
            redis_url=redis_url,
            runs=runs,
            concurrency=runs,
            settle_timeout_s=0,
            campaign=name,
        )
        return await run_campaign(campaign)
    finally:
        await anyio.to_thread.run_sync(server.stop)


def _oracle_calls(adapter: GymAdapter, seed: int) -> list[dict[str, Any]]:
    """The oracle's calls from the reset to the end, as JSON."""
    episode = GymEpisode.start(adapter, seed)
    calls = []
    while (call := adapter.oracle_call(episode.env, seed, episode.actions)) is not None:
        calls.append(call.model_dump(mode="json"))
        episode.observation, _, terminated, *_ = episode.env.step(adapter.action(call))
        episode.actions.append(adapter.action(call))
        if terminated:
            break
    return calls


async def test_the_oracle_policy_carries_the_object_in_the_text_rooms(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """Three seeds, no mistakes: each run ends in success, by calls with arguments, each
    input carrying its situation under extra_keys.gym_state."""
    report = await _campaign(TextRoomsAdapter(), EnvAgentOptions(), redis_url, 3, "rooms-oracle")
    assert report.total.stage_ends == {"success": 3}, report.summary()
    assert report.failure() is None
    created = [e for e in _events(redis_client) if e["type"] == "candidate.created"]
    assert all(call["arguments"] for e in created for call in e["output"]["tool_calls"])
    situations = [
        e
        for e in _events(redis_client)
        if e["type"] == "situation.created" and e["run_id"] == "rooms-oracle-0"
    ]
    state = situations[0]["input"]["extra_keys"]["gym_state"]
    assert state == {"adapter": {"max_steps": 30}, "seed": 0, "actions": []}


def _babyai() -> GymAdapter:
    from gencoach.integrations.minigrid import BabyAIAdapter

    return BabyAIAdapter("GoToLocal", planner_attributes=False)


@pytest.mark.parametrize("make", [_babyai, FrozenLake], ids=["babyai", "frozenlake"])
async def test_the_oracle_policy_plays_discrete_envs_from_the_situation(
    redis_url: str, make: Any
) -> None:
    """BabyAI without planner attributes, and FrozenLake: the oracle policy replays the
    situation from extra_keys and reaches the env's success in both runs."""
    adapter = make()
    report = await _campaign(adapter, EnvAgentOptions(), redis_url, 2, f"{adapter.name}-oracle")
    assert report.total.stage_ends == {"success": 2}, report.summary()


async def test_the_llm_policy_plays_babyai_by_tool_calls(redis_url: str) -> None:
    """BabyAI's six tools as functions: the model's calls, one a decision, reach the goal."""
    adapter = _babyai()
    path = [call["name"] for call in _oracle_calls(adapter, 0)]
    with scripted_llm_servers() as start:
        llm = start()
        llm.script(*[tool_calls_reply((name, "{}")) for name in path])
        options = EnvAgentOptions(policy="llm", llm_endpoint=llm.endpoint, model="m")
        report = await _campaign(adapter, options, redis_url, 1, "babyai-llm")
        offered = [tool["function"]["name"] for tool in llm.requests[0].body["tools"]]
    assert report.total.stage_ends == {"success": 1}, report.summary()
    assert offered == ["turn_left", "turn_right", "forward", "pickup", "drop", "toggle"]


async def test_the_llm_policy_walks_the_lake_by_tool_calls(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """The model's tool calls are the decisions; the tools it is offered name no robot and
    its prompt shows nothing of the privileged situation."""
    path = [call["name"] for call in _oracle_calls(FrozenLake(), 0)]
    with scripted_llm_servers() as start:
        llm = start()
        llm.script(*[tool_calls_reply((name, "{}")) for name in path])
        options = EnvAgentOptions(policy="llm", llm_endpoint=llm.endpoint, model="m")
        report = await _campaign(FrozenLake(), options, redis_url, 1, "lake-llm")
        requests = [request.body for request in llm.requests]
    assert report.total.stage_ends == {"success": 1}, report.summary()
    assert len(requests) == len(path) == 6
    first = requests[0]
    assert [tool["function"]["name"] for tool in first["tools"]] == ["left", "down", "right", "up"]
    assert all(not tool["function"]["parameters"]["properties"] for tool in first["tools"])
    prompt = json.dumps(first["messages"])
    assert "gym_state" not in prompt
    assert "You are on row 0, column 0." in first["messages"][-1]["content"]
    calls = [e["output"] for e in _events(redis_client) if e["type"] == "candidate.created"]
    assert calls[0] == {
        "say": "",
        "tool_calls": [{"name": "down", "arguments": {}, "target_robot_name": "agent"}],
    }


async def test_the_llm_policy_answers_json_in_the_text_rooms(redis_url: str) -> None:
    """With `answers="json"` the model answers decisions as JSON through the backends'
    structured-output fallback (json_schema first), calls with arguments and no robot."""
    adapter = TextRoomsAdapter()
    calls = _oracle_calls(adapter, 0)
    with scripted_llm_servers() as start:
        llm = start()
        answers = [
            {"say": "", "tool_calls": [{k: c[k] for k in ("name", "arguments")}]} for c in calls
        ]
        llm.script(*[json_reply(answer) for answer in answers])
        options = EnvAgentOptions(
            policy="llm", llm_endpoint=llm.endpoint, model="m", answers="json"
        )
        report = await _campaign(adapter, options, redis_url, 1, "rooms-llm-json")
        requests = [request.body for request in llm.requests]
    assert report.total.stage_ends == {"success": 1}, report.summary()
    assert len(requests) == len(calls)
    assert requests[0]["response_format"]["type"] == "json_schema"
    assert "tools" not in requests[0]
    assert '"name": "go"' in requests[0]["messages"][0]["content"]
