"""What a terminal's routing reads of its run's registration: one read for the wait and
the agent's offer together."""

from __future__ import annotations

import httpx
import pytest
from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.protocol.agent import AgentInfo
from gencoach.service.coaching.registry import AgentRegistry
from gencoach.service.store.graphstore import META

pytestmark = pytest.mark.asyncio


def _info(*kinds: str) -> str:
    return AgentInfo(
        agent_id="agent", agent_version="1", specialized_coaching=list(kinds), capabilities={}
    ).model_dump_json()


async def test_the_wait_reads_the_offer_its_routing_then_uses_once(async_redis: Redis) -> None:
    """The registration wait reads the agent's offer with the flag; the routing that follows
    uses that read; a later call reads again."""
    meta = Keys().run("r1", META)
    await async_redis.hset(meta, mapping={"registered": "1", "agent_info": _info("failure")})
    async with httpx.AsyncClient() as http:
        registry = AgentRegistry(async_redis, Keys(), http)
        assert await registry.wait_registered("r1", 5.0)
        await async_redis.hset(meta, "agent_info", _info("format"))
        assert (await registry.coaching("r1")).specialized == frozenset({"failure"})
        assert (await registry.coaching("r1")).specialized == frozenset({"format"})


async def test_an_unregistered_run_keeps_nothing_read(async_redis: Redis) -> None:
    """A run whose registration has not ended is waited for, and nothing is kept of it."""
    async with httpx.AsyncClient() as http:
        registry = AgentRegistry(async_redis, Keys(), http)
        assert not await registry.wait_registered("r2", 0.2)
        assert (await registry.coaching("r2")).unavailable is not None
