"""A second env, FrozenLake, from a 63-line adapter: events, a branch order restored by
replay, and an order anchored on the situation gencoach made for an earlier order."""

from __future__ import annotations

import json

import anyio
import pytest
import redis

from gencoach.constants import ORDER_FIELD, Keys
from gencoach.integrations.gymnasium import CampaignOptions, run_campaign
from tests.integrations.frozenlake import FrozenLake
from tests.support.agent_server import ScriptedAgent
from tests.support.lake import RUN, lake_order, walker
from tests.support.streams import reported_events

pytest.importorskip("gymnasium")
pytestmark = [pytest.mark.slow, pytest.mark.asyncio, pytest.mark.timeout(60)]


async def ended(client: redis.Redis) -> None:
    """Return once a stage end is on the stream."""
    for _ in range(1000):
        if any(event.get("stage_end") for event in reported_events(client)):
            return
        await anyio.sleep(0.05)


async def test_frozenlake_runs_and_executes_orders_from_replayed_situations(
    redis_url: str, redis_client: redis.Redis, scripted_agent: ScriptedAgent
) -> None:
    """The walker falls into the hole; an order re-executes `right` at that situation, and
    a second order anchored on the first order's coached situation walks from there."""
    scripted_agent.answer = walker
    options = CampaignOptions(
        adapter=FrozenLake(),
        agent_url=scripted_agent.url,
        redis_url=redis_url,
        settle_timeout_s=3.0,
        campaign="lake",
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_campaign, options)
        with anyio.fail_after(20):
            await ended(redis_client)
        situations = {e["situation_id"]: e for e in reported_events(redis_client) if "input" in e}
        first = lake_order("s1", 1, "right", situations["s1"])
        redis_client.xadd(Keys().branches(RUN), {ORDER_FIELD: json.dumps(first)})
        second = lake_order(first["situation_id"], 2, "right", situations["s1"])
        redis_client.xadd(Keys().branches(RUN), {ORDER_FIELD: json.dumps(second)})
    seen = reported_events(redis_client)
    executed = {e["candidate_id"]: e for e in seen if e["type"] == "candidate.executed"}
    assert executed["c1"]["stage_end"] == {"event": "failure", "state": "optimal"}
    assert executed["c1"]["execution"]["reward"] == 0.0
    for coached in (first, second):
        assert executed[coached["candidate_id"]]["status"] == "ongoing"
    # The branch after each order starts from (0, 2): the anchor's env replayed, then `right`.
    after = [e for e in seen if e.get("parent_candidate_id") == first["candidate_id"]]
    assert after[0]["input"]["instruction"]["content"] == "You are on row 0, column 2."
    assert after[0]["coaching_attempt_ids"] == [1]
    below_second = [e for e in seen if e.get("parent_candidate_id") == second["candidate_id"]]
    assert below_second[0]["coaching_attempt_ids"] == [1, 2]
    ends = [e["stage_end"] for e in seen if e.get("stage_end")]
    assert ends.count({"event": "success", "state": "optimal"}) == 2
    assert seen[-1]["type"] == "run.finished"
