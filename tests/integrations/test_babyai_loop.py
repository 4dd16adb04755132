"""BabyAI under gencoach with real processes: the reference agent's seeded mistakes are
diagnosed by the BabyAI oracle teacher in real workers, repaired, reinjected, executed by
the integration from the replayed situation, proven by the env's own success, and the
exported chat rows replay exactly in the env. Every run ends on gencoach's settled
answer, never on a wait."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import redis

from gencoach.integrations.gymnasium import (
    CampaignOptions,
    CampaignReport,
    GymEpisode,
    run_campaign,
)
from gencoach.integrations.minigrid import BabyAIAdapter
from tests.support.controller import wait_for
from tests.support.integrations import babyai_agent, oracle_controller
from tests.support.saves import assert_audit_clean, save_complete

pytest.importorskip("minigrid")
pytestmark = [pytest.mark.slow, pytest.mark.asyncio, pytest.mark.timeout(240)]


async def _campaign(adapter: BabyAIAdapter, agent: str, redis_url: str) -> CampaignReport:
    options = CampaignOptions(
        adapter=adapter,
        agent_url=agent,
        redis_url=redis_url,
        runs=5,
        concurrency=5,
        settle_timeout_s=120.0,
        campaign=adapter.name,
    )
    return await run_campaign(options)


async def test_babyai_mistakes_are_coached_into_proven_branches(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Wrong pickups (PickupDist, strict), wrong moves, malformed calls and stalling
    (PutNextLocal) are corrected on the failure, format, no_action and suboptimal routes,
    and the coached branches reach the env's own success."""
    rates = {
        "wrong_argument": 0.1,
        "skipped_prerequisite": 0.25,
        "malformed": 0.05,
        "no_action": 0.05,
    }
    adapters = [BabyAIAdapter("PickupDist", strict=True), BabyAIAdapter("PutNextLocal")]
    reports: list[CampaignReport] = []
    with (
        oracle_controller(tmp_path, redis_url) as controller,
        babyai_agent(tmp_path, 0, **rates) as agent,
    ):
        async with anyio.create_task_group() as tg:
            for adapter in adapters:

                async def play(adapter: BabyAIAdapter = adapter) -> None:
                    reports.append(await _campaign(adapter, agent, redis_url))

                tg.start_soon(play)
        routes: Counter[tuple[str, str]] = Counter()
        async with httpx.AsyncClient(base_url=controller.url) as http:
            for report in reports:
                for run_id in report.run_ids:
                    body = (await http.get(f"/v1/runs/{run_id}/requests")).json()
                    for request in body["requests"]:
                        routes[(request["route"], request["state"])] += 1
        saves = [controller.output_dir / run for r in reports for run in r.run_ids]
        wait_for(lambda: all(save_complete(folder) for folder in saves), 30, "complete saves")
    assert_audit_clean(*saves)
    print([report.summary() for report in reports], sorted(routes.items()))
    assert all(report.total.orders_skipped == 0 for report in reports)
    # No run ended on the bound: each one's last wait was answered settled.
    assert [report.total.settle_timeouts for report in reports] == [0, 0]
    proven = {route for route, state in routes if state == "proven"}
    assert {"failure", "format", "no_action", "suboptimal"} <= proven

    out = tmp_path / "chat"
    command = [sys.executable, "-m", "gencoach", "export", str(controller.output_dir)]
    await anyio.run_process([*command, "-f", "chat", "--out", str(out)], check=True)
    rows = [json.loads(line) for line in (out / "chat.jsonl").read_text().splitlines()]
    by_name = {adapter.name: adapter for adapter in adapters}
    assert rows
    assert any(row["coached"] for row in rows)
    for row in rows:
        assert replay(by_name[row["scenario"]], row) == [], row["run_id"]
        assert robots_named(row) == [], row["run_id"]


def robots_named(row: dict[str, Any]) -> list[str]:
    """Where a single-agent run's chat row names a robot: in a call, a tool or the prompt."""
    found = []
    for message in row["messages"]:
        for call in message.get("tool_calls") or []:
            if "target_robot_name" in json.loads(call["function"]["arguments"]):
                found.append(f"call {call['id']}")
        content = message["content"]
        text = content if isinstance(content, str) else json.dumps(content)
        if message["role"] == "system" and "robot" in text.lower():
            found.append("the system message")
    found += [
        f"tool {tool['function']['name']}"
        for tool in row["tools"]
        if "target_robot_name" in json.dumps(tool["function"]["parameters"])
    ]
    return found


def replay(adapter: BabyAIAdapter, row: dict[str, Any]) -> list[str]:
    """Replay a chat row's calls in the env from its run's seed; the observations that differ."""
    seed = int(row["run_id"].rsplit("-", 1)[1])
    episode = GymEpisode.start(adapter, seed)
    mismatches = []
    for message in row["messages"]:
        for call in message.get("tool_calls") or []:
            action = adapter.tool(call["function"]["name"]).action
            episode.observation, *_ = episode.env.step(action)
        if message["role"] == "tool" and message["content"] != episode.text():
            mismatches.append(f"{message['content']!r} != {episode.text()!r}")
    return mismatches
