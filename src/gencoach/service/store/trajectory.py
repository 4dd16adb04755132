"""Questions the coaching loop asks of a run graph: trajectory, diagnosable steps, stage."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from gencoach.protocol import AgentInstruction, CoachingMarker, StageInfo, without_coaching
from gencoach.service.store.nodes import (
    RunGraph,
    StoredCandidate,
    StoredExecution,
    StoredSituation,
)

NO_MARKER = CoachingMarker()


@dataclass(frozen=True)
class Step:
    """One decision of a trajectory: the situation, the answer chosen, what it did."""

    situation: StoredSituation
    candidate: StoredCandidate
    execution: StoredExecution | None
    marker: CoachingMarker = field(default_factory=CoachingMarker)
    in_current_stage: bool = True
    diagnosable: bool = True

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


def trajectory(
    graph: RunGraph,
    candidate_id: int,
    markers: Mapping[int, CoachingMarker] | None = None,
) -> list[Step]:
    """The decisions that led to a candidate, oldest first, the candidate last.

    Going up from the candidate, the trajectory stops where an earlier decision ended
    its stage (a recovery from that decision goes on in its stage: not a stage end
    here), unless the later stage is linked to the previous one: then it goes on
    through that stage too, whose steps are marked as not of the current stage. Only
    current-stage steps after the last applied trajectory diagnosis are diagnosable
    (the decision that replaced a diagnosed one stays diagnosable itself).
    """
    markers = markers or {}
    steps: list[Step] = []
    current_stage = diagnosable = True
    current: int | None = candidate_id
    while current is not None:
        candidate = _candidate(graph, current)
        situation = graph.situations[candidate.situation_id]
        marker = markers.get(current, NO_MARKER)
        steps.append(
            Step(
                situation,
                candidate,
                graph.executions.get(current),
                marker,
                in_current_stage=current_stage,
                diagnosable=diagnosable,
            )
        )
        if marker.trajectory_diagnostic_applied:
            diagnosable = False
        parent = situation.parent_id
        if parent is None:
            break
        if _stage_ended_before(graph, parent, situation):
            if not situation.stage.linked_to_prev:
                break
            current_stage = diagnosable = False
        current = parent
    steps.reverse()
    return steps


def _stage_ended_before(graph: RunGraph, parent: int, situation: StoredSituation) -> bool:
    """Whether `situation` begins a stage: its parent candidate's execution ended the
    parent's stage, and the situation is not a recovery from it in that same stage."""
    execution = graph.executions.get(parent)
    if execution is None or execution.stage_end is None:
        return False
    return graph.situations[_candidate(graph, parent).situation_id].stage.id != situation.stage.id


def diagnosable(steps: list[Step]) -> list[Step]:
    """The steps a diagnosis may blame: agent decisions of the current stage."""
    return [step for step in steps if step.diagnosable and step.candidate.kind == "agent"]


def path_attempts(graph: RunGraph, candidate_id: int) -> list[int]:
    """Every coaching attempt on the path from the root to a candidate, oldest first.

    As MAGMA-GEN's `FinishedTrajectory.get_coaching_attempt_ids`: a trajectory that ends
    its stage in success proves every attempt it went through, a correction nested in
    a coached branch and the corrections around it alike, whatever ids the generator
    copied onto the nodes below a coached one.
    """
    found: list[int] = []
    current: int | None = candidate_id
    while current is not None:
        candidate = _candidate(graph, current)
        situation = graph.situations[candidate.situation_id]
        for attempt in (*candidate.coaching_attempt_ids, *situation.coaching_attempt_ids):
            if attempt not in found:
                found.append(attempt)
        current = situation.parent_id
    found.reverse()
    return found


AFTER_PREFIX = "after:"
"""The id of a recovery situation gencoach builds is this prefix and its candidate's."""
RECOVERY_INPUT_BASE = 1 << 40
"""Input ids of the situations gencoach builds (`recovery_situation`) start here: far above
any generator's, so a generator keeping states by input id never confuses the two."""


def recovery_situation(graph: RunGraph, candidate_id: int) -> StoredSituation | None:
    """Where a recovery after a candidate restarts, as MAGMA-GEN has it.

    The situation that followed the candidate's execution (its `next` link), when the graph
    holds it. After an execution that ended its stage without success, none follows: the
    situation is built from the terminal status, never stored, named `after:<candidate>`
    (`built_after` gives the candidate back). Its input is the candidate's own with the
    agent's memory after it and, as its instruction, the feedback the generator reported
    with the execution (MAGMA-GEN's status return), or the execution itself, as JSON, from
    a generator that reports none."""
    for situation_id, kind in graph.links.get(candidate_id, []):
        if kind == "next" and situation_id in graph.situations:
            return graph.situations[situation_id]
    execution = graph.executions.get(candidate_id)
    if execution is None or execution.stage_end is None or execution.stage_end.event == "success":
        return None
    candidate = _candidate(graph, candidate_id)
    before = graph.situations[candidate.situation_id]
    feedback = execution.feedback or AgentInstruction(
        type="env", content=json.dumps(execution.execution)
    )
    # Copies share the input's parts, as every reader of a graph leaves them unchanged.
    built = without_coaching(before.input).model_copy(
        update={
            "id": RECOVERY_INPUT_BASE + candidate_id,
            "instruction": feedback,
            "memory": candidate.memory,
        }
    )
    return StoredSituation.model_construct(
        id=built.id,
        parent_id=candidate_id,
        situation_id=f"{AFTER_PREFIX}{candidate.candidate_id}",
        parent_candidate_id=candidate.candidate_id,
        link="next",
        stage=before.stage,
        input=built,
        active_errors=before.active_errors,
        # Every field given: a default pydantic builds here costs more than the rest.
        coaching_attempt_ids=[],
    )


def built_after(situation: StoredSituation) -> str | None:
    """The candidate a built recovery situation follows (`recovery_situation`); None for a
    situation the generator reported."""
    if situation.id < RECOVERY_INPUT_BASE:
        return None
    return situation.parent_candidate_id
