"""FrozenLake runs in tests: the walker agent that falls into a hole, and a branch order as
gencoach writes one for the lake."""

from __future__ import annotations

from typing import Any

from gencoach.integrations.gymnasium import GymEpisode, OracleTeacher
from tests.integrations.frozenlake import FrozenLake, shortest_path

RUN = "lake-0"


def walker(item: dict[str, Any], index: int) -> dict[str, Any]:
    """The agent: right from the start, then into the hole below (0, 1); else the shortest
    walk."""
    text = item["instruction"]["content"]
    row, col = (int(part.split()[-1]) for part in text.rsplit("You are on ", 1)[1][:-1].split(","))
    episode = GymEpisode.start(FrozenLake(), 0)
    episode.env.unwrapped.s = row * 4 + col
    path = shortest_path(episode.env) or [0]
    action = {(0, 0): 2, (0, 1): 1}.get((row, col), path[0])
    name = FrozenLake.tools[action].name
    return {"output": {"say": "", "tool_calls": [{"name": name, "target_robot_name": "agent"}]}}


def lake_order(
    anchor: str, number: int, tool: str, situation: dict[str, Any], run_id: str = RUN
) -> dict[str, Any]:
    """A branch order executing `tool` at the anchor, as gencoach writes it."""
    agent_input = situation["input"]
    return {
        "type": "branch.order",
        "branch_id": f"b{number}",
        "run_id": run_id,
        "anchor": {"kind": "replacement", "situation_id": anchor},
        "situation_id": f"coach:{run_id}:{number}:failure:replacement:s",
        "candidate_id": f"coach:{run_id}:{number}:failure:replacement:c",
        "input": agent_input,
        "candidate": {
            "request_id": "r",
            "source_id": agent_input["id"],
            "candidate_index": 0,
            "status": "completed",
            "memory": {},
            "output": {"tool_calls": [{"name": tool, "target_robot_name": "agent"}]},
        },
        "coaching": {},
        "attempt_id": number,
    }


teacher = OracleTeacher(FrozenLake)
"""A `type: python` backend diagnosing FrozenLake runs with the adapter's oracle."""
