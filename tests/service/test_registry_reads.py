"""What a terminal's routing reads of its run's registration: one read for the wait and
the agent's offer together."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from gencoach.config import load_settings
from gencoach.constants import Keys
from gencoach.protocol.agent import AgentInfo
from gencoach.service.coaching.registry import AgentRegistry
from gencoach.service.store.graphstore import META
from tests.support.agent_server import ScriptedAgent

pytestmark = pytest.mark.asyncio


def _info(*kinds: str) -> str:
    return AgentInfo(
        agent_id="agent", agent_version="1", specialized_coaching=list(kinds), capabilities={}
    ).model_dump_json()


async def test_a_registered_runs_offer_is_read_once_for_its_whole_life(
    async_redis: Redis,
) -> None:
    """The registration wait reads the agent's offer with the flag, once: the run's
    routings after it read nothing (a registration's fields are written once and for all);
    the run's end forgets it."""
    meta = Keys().run("r1", META)
    await async_redis.hset(meta, mapping={"registered": "1", "agent_info": _info("failure")})
    async with httpx.AsyncClient() as http:
        registry = AgentRegistry(async_redis, Keys(), http)
        assert await registry.wait_registered("r1", 5.0)
        await async_redis.hset(meta, "agent_info", _info("format"))  # never done in a run
        before = await _calls(async_redis)
        for _ in range(3):
            assert await registry.wait_registered("r1", 5.0)
            assert (await registry.coaching("r1")).specialized == frozenset({"failure"})
        assert await _calls(async_redis) - before == 1  # the INFO that counts
        await registry.unregister("r1", "http://127.0.0.1:9")
        assert (await registry.coaching("r1")).specialized == frozenset({"format"})


async def _calls(client: Redis) -> int:
    stats = await client.info("commandstats")
    return sum(int(value["calls"]) for value in stats.values())


async def test_an_unregistered_run_keeps_nothing_read(async_redis: Redis) -> None:
    """A run whose registration has not ended is waited for, and nothing is kept of it."""
    async with httpx.AsyncClient() as http:
        registry = AgentRegistry(async_redis, Keys(), http)
        assert not await registry.wait_registered("r2", 0.2)
        assert (await registry.coaching("r2")).unavailable is not None
        await async_redis.hset(
            Keys().run("r2", META), mapping={"registered": "1", "agent_info": _info("failure")}
        )
        assert (await registry.coaching("r2")).specialized == frozenset({"failure"})


async def test_a_registration_writes_what_it_found_with_its_mark_in_one_step(
    async_redis: Redis, scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """The agent's info, its session's outcome and the `registered` mark reach the run in
    one write, with the run filed under the agent's id: nothing is written before the
    registration ends, so a reader never sees the mark without what it stands for."""
    config = tmp_path / "gencoach.yaml"
    config.write_text(
        "coaching:\n  enabled: true\n"
        "backends:\n  llm:\n    type: openai\n    endpoint: http://127.0.0.1:9/v1/chat/completions\n"
        "    default_model: m\n"
    )
    settings = load_settings(config, {})
    keys = Keys()
    meta = keys.run("r3", META)
    async with httpx.AsyncClient() as http:
        registry = AgentRegistry(async_redis, keys, http)
        await registry.index.applied([("r3", "scenario", scripted_agent.url)], [])
        before = await async_redis.info("commandstats")
        info = await registry.register("r3", scripted_agent.url, settings)
    after = await async_redis.info("commandstats")
    assert info is not None
    assert info.agent_id == "scripted-agent"
    stored = await async_redis.hgetall(meta)
    assert stored[b"registered"] == b"1"
    assert stored[b"agent_id"] == b"scripted-agent"
    assert AgentInfo.model_validate_json(stored[b"agent_info"]).agent_id == "scripted-agent"
    assert stored[b"session"] == b"opened"
    assert "r3" in scripted_agent.sessions
    entry = await async_redis.hget(keys.runs_index("entries"), "r3")
    assert entry is not None
    assert json.loads(entry)[2] == "scripted-agent"
    calls = {
        name: stats["calls"] - before.get(name, {"calls": 0})["calls"]
        for name, stats in after.items()
    }
    assert calls["cmdstat_hset"] == 2  # the meta's one write, and the runs index's entry
    assert (await registry.coaching("r3")).specialized == frozenset(
        {"format", "failure", "suboptimal"}
    )


async def test_a_refused_agent_is_noted_with_the_mark(async_redis: Redis, tmp_path: Path) -> None:
    """An agent that cannot be reached leaves its reason beside the `registered` mark."""
    config = tmp_path / "gencoach.yaml"
    config.write_text("controller:\n  registration_give_up_s: 0.3\n")
    settings = load_settings(config, {})
    async with httpx.AsyncClient() as http:
        registry = AgentRegistry(async_redis, Keys(), http)
        assert await registry.register("r4", "http://127.0.0.1:9", settings) is None
    stored = await async_redis.hgetall(Keys().run("r4", META))
    assert stored[b"registered"] == b"1"
    assert b"agent_error" in stored
    assert b"agent_id" not in stored
    assert (await registry.coaching("r4")).unavailable is not None
