"""Questions the coaching loop asks of a run graph: lineage, trajectory, stage, children."""

from __future__ import annotations

from dataclasses import dataclass

from gencoach.protocol import StageInfo
from gencoach.service.graphstore import (
    RunGraph,
    StoredCandidate,
    StoredExecution,
    StoredSituation,
)


@dataclass(frozen=True)
class Step:
    """One decision of a trajectory: the situation, the answer chosen, what it did."""

    situation: StoredSituation
    candidate: StoredCandidate
    execution: StoredExecution | None

    @property
    def stage_id(self) -> int:
        """The stage this decision belongs to."""
        return self.situation.stage.id


class UnknownNodeError(KeyError):
    """A storage id that the run graph does not hold."""


def _candidate(graph: RunGraph, candidate_id: int) -> StoredCandidate:
    try:
        return graph.candidates[candidate_id]
    except KeyError:
        raise UnknownNodeError(f"run {graph.run_id} has no candidate {candidate_id}") from None


def stage_of(graph: RunGraph, candidate_id: int) -> StageInfo:
    """The stage a candidate belongs to (its situation's)."""
    return graph.situations[_candidate(graph, candidate_id).situation_id].stage


def children(graph: RunGraph, situation_id: int) -> list[StoredCandidate]:
    """The candidates answering a situation, in the order they were reported."""
    if situation_id not in graph.situations:
        raise UnknownNodeError(f"run {graph.run_id} has no situation {situation_id}")
    return [graph.candidates[cid] for cid in graph.members.get(situation_id, [])]


def trajectory(graph: RunGraph, candidate_id: int) -> list[Step]:
    """The decisions that led to a candidate, oldest first, the candidate last.

    It goes back to the last user instruction; when that instruction opens a stage
    linked to the previous one, it goes on into that stage, back to its own.
    """
    steps: list[Step] = []
    current: int | None = candidate_id
    while current is not None:
        candidate = _candidate(graph, current)
        situation = graph.situations[candidate.situation_id]
        steps.append(Step(situation, candidate, graph.executions.get(current)))
        opens_task = situation.input.instruction.type == "user"
        if opens_task and not situation.stage.linked_to_prev:
            break
        current = situation.parent_id
    steps.reverse()
    return steps


def diagnosable(steps: list[Step]) -> list[Step]:
    """The steps a diagnosis may blame: agent decisions of the last step's stage."""
    if not steps:
        return []
    stage = steps[-1].stage_id
    return [step for step in steps if step.stage_id == stage and step.candidate.kind == "agent"]
