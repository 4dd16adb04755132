"""The runs page's rows: one page of the runs index with what each run is and how its
coaching went.

A poll reads the page (from the index, filtered there) and then, in one pipelined round
trip, each listed run's meta, graph sizes and requests: its cost is the page's, however
many runs Redis holds.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.protocol import RunStarted, TaskDescription
from gencoach.service.coaching.lifecycle import ENDED, IN_FLIGHT
from gencoach.service.coaching.requests import REQUESTS, CoachingRequest
from gencoach.service.store.graphstore import CANDIDATES, META, SITUATIONS
from gencoach.service.store.nodes import as_text
from gencoach.service.store.runindex import RunIndex, RunPage, RunQuery


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


def task_text(target: str, task: TaskDescription | str) -> str:
    """What a run asks of its agent, in a line: its stages' goals when the task lists
    them (the target is often the scenario's whole description), else the target."""
    if isinstance(task, TaskDescription):
        goals = [stage.goal_description for stage in task.stages_description]
        if any(goals):
            return " · ".join(goal for goal in goals if goal)
    return target


def page_payload(page: RunPage, rows: list[dict[str, Any]], facets: dict[str, list[str]]) -> Any:
    """What `/console/api/runs` answers: the rows, totals, filter values, next cursor."""
    return {
        "runs": rows,
        "total": page.total,
        "counts": page.counts,
        "facets": facets,
        "next_cursor": page.next_cursor,
    }


async def live_page(client: Redis, index: RunIndex, keys: Keys, query: RunQuery) -> Any:
    """One page of the runs in Redis, as the runs page shows them."""
    page = await index.page(query)
    pipe = client.pipeline(transaction=False)
    for run in page.runs:
        pipe.hgetall(keys.run(run.run_id, META))
        pipe.hlen(keys.run(run.run_id, SITUATIONS))
        pipe.hlen(keys.run(run.run_id, CANDIDATES))
        pipe.hvals(keys.run(run.run_id, REQUESTS))
    replies = await pipe.execute()
    rows = []
    vanished = []
    for position, run in enumerate(page.runs):
        meta, situations, candidates, raw_requests = replies[4 * position : 4 * position + 4]
        if not meta or b"started" not in meta:
            vanished.append(run.run_id)  # its keys expired since the page was read
            continue
        started = RunStarted.model_validate_json(meta[b"started"])
        requests = [CoachingRequest.model_validate_json(value) for value in raw_requests]
        rows.append(
            {
                "run_id": run.run_id,
                "state": run.state,
                "started_at": run.started_ms / 1000,
                "scenario": run.scenario,
                "target": started.target,
                "target_kind": started.target_kind,
                "task": task_text(started.target, started.task_description),
                "agent": run.agent,
                "agent_url": started.agent_url,
                "situations": situations,
                "candidates": candidates,
                "coaching": coaching_counts(requests),
                "routes": dict(Counter(r.route for r in requests if not r.human)),
                "saved_at": _saved_at(meta),
            }
        )
    if vanished:
        await index.repair(vanished)
    return page_payload(page, rows, await index.facets())


def _saved_at(meta: dict[bytes, bytes]) -> float | None:
    value = meta.get(b"saved_at")
    return float(as_text(value)) if value is not None else None
