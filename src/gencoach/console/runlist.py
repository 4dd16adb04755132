"""The runs page's rows: every run in Redis with what it is and how coaching went.

One pipelined read per page load covers every run (meta, graph sizes, requests), so
polling every few seconds stays cheap for hundreds of runs.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, cast

from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.protocol import RunStarted
from gencoach.service.graphstore import CANDIDATES, META, SITUATIONS
from gencoach.service.nodes import as_text
from gencoach.service.requests import ENDED, IN_FLIGHT, REQUESTS, CoachingRequest

# Runs still taking events come first, then those being saved, then saved ones.
_STATE_ORDER = {"active": 0, "finished": 1, "saved": 2}


def coaching_counts(requests: list[CoachingRequest]) -> dict[str, int]:
    """How a run's requests stand: opened, in flight, corrected, proven, ended without."""
    reached = [({step.state for step in r.history} | {r.state}, r) for r in requests]
    return {
        "requests": len(requests),
        "in_flight": sum(1 for _, r in reached if r.state in IN_FLIGHT),
        "corrected": sum(1 for states, _ in reached if "corrected" in states),
        "proven": sum(1 for _, r in reached if r.state == "proven"),
        "ended": sum(1 for _, r in reached if r.state in ENDED),
        "human": sum(1 for _, r in reached if r.human),
    }


async def run_rows(client: Redis, keys: Keys) -> list[dict[str, Any]]:
    """Every known run, active first, newest first within a state."""
    reply = await client.zrange(keys.runs, 0, -1, withscores=True)
    listed = cast(list[tuple[bytes, float]], reply)
    pipe = client.pipeline(transaction=False)
    for raw_id, _ in listed:
        run_id = as_text(raw_id)
        pipe.hgetall(keys.run(run_id, META))
        pipe.hlen(keys.run(run_id, SITUATIONS))
        pipe.hlen(keys.run(run_id, CANDIDATES))
        pipe.hvals(keys.run(run_id, REQUESTS))
    replies = await pipe.execute()
    rows = []
    for index, (raw_id, score) in enumerate(listed):
        meta, situations, candidates, raw_requests = replies[4 * index : 4 * index + 4]
        if not meta or b"started" not in meta:
            continue  # expired since the index was read
        started = RunStarted.model_validate_json(meta[b"started"])
        requests = [CoachingRequest.model_validate_json(value) for value in raw_requests]
        rows.append(
            {
                "run_id": as_text(raw_id),
                "state": as_text(meta.get(b"state", b"active")),
                "started_at": score,
                "scenario": started.scenario,
                "target": started.target,
                "agent": as_text(meta.get(b"agent_id", b"")) or started.agent_url,
                "agent_url": started.agent_url,
                "situations": situations,
                "candidates": candidates,
                "coaching": coaching_counts(requests),
                "routes": dict(Counter(r.route for r in requests if not r.human)),
            }
        )
    rows.sort(key=lambda row: (_STATE_ORDER.get(row["state"], 3), -row["started_at"]))
    return rows


def filter_rows(
    rows: list[dict[str, Any]], state: str | None, scenario: str | None, agent: str | None
) -> list[dict[str, Any]]:
    """The rows matching every filter given (exact matches; empty means any)."""
    return [
        row
        for row in rows
        if (not state or row["state"] == state)
        and (not scenario or row["scenario"] == scenario)
        and (not agent or row["agent"] == agent)
    ]
