"""The text rooms under gencoach with real processes and the shipped env agent: its seeded
mistakes (wrong rooms and objects, the cursed one included, malformed calls, stalling) are
diagnosed by the adapter's oracle teacher with whole calls as expected decisions,
reinjected, executed from the replayed situation and proven by the env's own success;
the saves pass the audit and every exported chat row replays in the env."""

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

from gencoach.integrations.gymnasium import CampaignOptions, GymEpisode, run_campaign
from gencoach.integrations.textrooms import TextRoomsAdapter
from gencoach.protocol import ToolCall
from tests.support.controller import wait_for
from tests.support.integrations import env_agent, oracle_controller
from tests.support.saves import assert_audit_clean, save_complete

pytest.importorskip("gymnasium")
pytestmark = [pytest.mark.slow, pytest.mark.asyncio, pytest.mark.timeout(240)]
ROOMS = "gencoach.integrations.textrooms:rooms"
TEACHER = "gencoach.integrations.textrooms:teacher"


async def test_text_rooms_mistakes_are_coached_with_whole_calls(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Four runs of the env agent with mistakes: corrections with arguments are proven, the
    audit is clean, the summary counts coached candidates apart, and the rows replay."""
    rates = {"wrong_argument": 0.3, "malformed": 0.1, "no_action": 0.05}
    adapter = TextRoomsAdapter()
    with (
        oracle_controller(tmp_path, redis_url, TEACHER) as controller,
        env_agent(tmp_path, ROOMS, seed=3, **rates) as agent,
    ):
        options = CampaignOptions(
            adapter=adapter,
            agent_url=agent,
            redis_url=redis_url,
            runs=6,
            concurrency=6,
            settle_timeout_s=120.0,
            campaign="rooms",
        )
        report = await run_campaign(options)
        routes: Counter[tuple[str, str]] = Counter()
        async with httpx.AsyncClient(base_url=controller.url) as http:
            for run_id in report.run_ids:
                body = (await http.get(f"/v1/runs/{run_id}/requests")).json()
                for request in body["requests"]:
                    routes[(request["route"], request["state"])] += 1
        saves = [controller.output_dir / run_id for run_id in report.run_ids]
        wait_for(lambda: all(save_complete(folder) for folder in saves), 30, "complete saves")
    assert_audit_clean(*saves)
    print(report.summary(), sorted(routes.items()))
    assert report.total.settle_timeouts == 0
    assert report.total.coached == report.total.orders_executed > 0
    proven = {route for route, state in routes if state == "proven"}
    assert {"failure", "format", "no_action", "suboptimal"} <= proven
    coached = [c for folder in saves for c in _candidates(folder) if c["origin"] == "coaching"]
    from_teacher = [
        c for c in coached if c["coaching_source"]["decision_source"] == "expected_decision"
    ]
    assert from_teacher, coached
    assert all(call["arguments"] for c in from_teacher for call in c["output"]["tool_calls"])

    out = tmp_path / "chat"
    command = [sys.executable, "-m", "gencoach", "export", str(controller.output_dir)]
    await anyio.run_process([*command, "-f", "chat", "--out", str(out)], check=True)
    rows = [json.loads(line) for line in (out / "chat.jsonl").read_text().splitlines()]
    assert any(row["coached"] for row in rows)
    for row in rows:
        assert replay(adapter, row) == [], row["run_id"]


def _candidates(folder: Path) -> list[dict[str, Any]]:
    situations = [json.loads(path.read_text()) for path in folder.glob("[0-9]*.json")]
    return [candidate for situation in situations for candidate in situation["candidates"]]


def replay(adapter: TextRoomsAdapter, row: dict[str, Any]) -> list[str]:
    """Replay a chat row's calls from its run's seed; the observations that differ."""
    episode = GymEpisode.start(adapter, int(row["run_id"].rsplit("-", 1)[1]))
    mismatches = []
    for message in row["messages"]:
        for call in message.get("tool_calls") or []:
            function = call["function"]
            arguments = json.loads(function["arguments"])
            action = adapter.action(
                ToolCall(name=function["name"], arguments=arguments, target_robot_name="agent")
            )
            episode.observation, *_ = episode.env.step(action)
        if message["role"] == "tool" and message["content"] != episode.text():
            mismatches.append(f"{message['content']!r} != {episode.text()!r}")
    return mismatches
