"""The trajectory behind a candidate: each situation from the root and the answer taken there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import JsonValue

from gencoach.graph import SavedGraph
from gencoach.protocol import CandidateRecord, SituationRecord


@dataclass(frozen=True)
class Step:
    """One decision on the way: the situation the agent faced and the answer that was kept."""

    situation: SituationRecord
    candidate: CandidateRecord


def trajectory(graph: SavedGraph, candidate_id: int) -> list[Step]:
    """The steps from the root down to `candidate_id`, which is the last one.

    A candidate's `parent_id` is the answer that led to its situation, so following it
    walks back along the answers actually taken, through coached alternatives too.
    """
    steps: list[Step] = []
    current: int | None = candidate_id
    while current is not None:
        candidate = graph.candidates[current]
        situation = graph.situations[graph.candidate_situation[current]]
        steps.append(Step(situation, candidate))
        current = situation.parent_id
    steps.reverse()
    return steps


def robot_results(execution: Mapping[str, JsonValue]) -> dict[str, Mapping[str, JsonValue]]:
    """Each robot's execution result, from either shape a save may hold.

    MAGMA-GEN's step summary lists them under `per_robot_status` (`robot_name`,
    `error_flag`, ...); saves written by earlier gencoach versions keyed them by robot.
    """
    listed = execution.get("per_robot_status")
    if isinstance(listed, list):
        return {
            str(entry["robot_name"]): entry
            for entry in listed
            if isinstance(entry, dict) and isinstance(entry.get("robot_name"), str)
        }
    return {robot: result for robot, result in execution.items() if isinstance(result, dict)}


def calls_all_failed(candidate: CandidateRecord) -> bool:
    """Whether the answer called tools and every robot it addressed reported an error.

    Each robot's result carries an `error_flag` (`none` when the call ran); a robot
    without a result counts as not failed, so doubt keeps the turn.
    """
    if candidate.output is None or not candidate.output.tool_calls:
        return False
    results = robot_results(candidate.execution)
    for call in candidate.output.tool_calls:
        result = results.get(call.target_robot_name)
        if result is None:
            return False
        flag = result.get("error_flag")
        if flag is None or flag == "none":
            return False
    return True


def is_target(candidate: CandidateRecord) -> bool:
    """Whether an assistant turn may be learnt: the agent's own, not blamed, not all failed."""
    return (
        candidate.kind == "agent"
        and candidate.output is not None
        and not candidate.coaching.diagnosed_as_faulty
        and not calls_all_failed(candidate)
    )
