"""A second env, FrozenLake, from a 63-line adapter: events, a branch order restored by
replay, an order anchored on the situation gencoach made for an earlier order, and a
campaign coached by a real controller whose saves pass the audit."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import anyio
import httpx
import pytest
import redis

from gencoach.constants import ORDER_FIELD, Keys
from gencoach.integrations.gymnasium import CampaignOptions, run_campaign
from tests.integrations.frozenlake import FrozenLake
from tests.support.agent_server import ScriptedAgent
from tests.support.controller import wait_for
from tests.support.integrations import env_agent, oracle_controller
from tests.support.lake import RUN, lake_order, walker
from tests.support.saves import assert_audit_clean, save_complete
from tests.support.streams import reported_events

pytest.importorskip("gymnasium")
pytestmark = [pytest.mark.slow, pytest.mark.asyncio]
LAKE = "tests.integrations.frozenlake:FrozenLake"
TEACHER = "tests.support.lake:teacher"


async def ended(client: redis.Redis) -> None:
    """Return once a stage end is on the stream."""
    for _ in range(1000):
        if any(event.get("stage_end") for event in reported_events(client)):
            return
        await anyio.sleep(0.05)


@pytest.mark.timeout(60)
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


@pytest.mark.timeout(240)
async def test_a_frozenlake_campaign_is_coached_into_proven_branches_the_audit_accepts(
    redis_url: str, tmp_path: Path
) -> None:
    """The env agent walks the lake with mistakes (another move: into a hole, or the long
    way round; words instead of a move); a real controller has the adapter's oracle teacher
    diagnose them, the agent repair them, the integration execute the branches from the
    replayed situations, and the lake's own goal prove them. Every run ends on gencoach's
    settled answer, and its save passes the seed's audit."""
    rates = {"wrong_argument": 0.3, "no_action": 0.05}
    with (
        oracle_controller(tmp_path, redis_url, TEACHER) as controller,
        env_agent(tmp_path, LAKE, seed=2, **rates) as agent,
    ):
        options = CampaignOptions(
            adapter=FrozenLake(),
            agent_url=agent,
            redis_url=redis_url,
            runs=6,
            concurrency=6,
            settle_timeout_s=120.0,
            campaign="lake-coached",
        )
        report = await run_campaign(options)
        states: Counter[str] = Counter()
        async with httpx.AsyncClient(base_url=controller.url) as http:
            for run_id in report.run_ids:
                body = (await http.get(f"/v1/runs/{run_id}/requests")).json()
                states.update(request["state"] for request in body["requests"])
        saves = [controller.output_dir / run_id for run_id in report.run_ids]
        wait_for(lambda: all(save_complete(folder) for folder in saves), 30, "complete saves")
    assert_audit_clean(*saves)
    print(report.summary(), sorted(states.items()))
    assert report.total.settle_timeouts == 0
    assert report.total.orders_skipped == 0
    assert report.total.coached == report.total.orders_executed > 0
    assert states["proven"] > 0, states
