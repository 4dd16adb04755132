"""The trajectory behind a candidate: each situation from the root and the answer taken there."""

from __future__ import annotations

from dataclasses import dataclass

from gencoach.export.tool_failures import NO_PREDICATES, ToolFailures, step_failed
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


def is_target(candidate: CandidateRecord, failures: ToolFailures = NO_PREDICATES) -> bool:
    """Whether an assistant turn may be learnt: the agent's own, not blamed, not all failed
    (`failures`: the tools' own failure predicates, see `gencoach.export.tool_failures`)."""
    return (
        candidate.kind == "agent"
        and candidate.output is not None
        and not candidate.coaching.diagnosed_as_faulty
        and not step_failed(candidate, failures)
    )
