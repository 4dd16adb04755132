"""Which candidates are positive examples, ranked by the outcomes below them.

A candidate is eligible when the agent answered it (completed), the answer was executed
to the end, and no diagnosis blamed it. Its score adds, for the stages below it in order
(depth d = 1, 2, …), 0.4^d * (optimal + 0.5 * non-optimal) / total: the candidate's own
stage counts most, later stages less, and failed trajectories only dilute. Where the
best of a situation is at most 0.1 nothing there is worth learning; otherwise every
candidate within 0.1 of the best is kept. Origin (model or coaching) is never looked at.
Scores compare exactly, as MAGMA-GEN's exporter compares them (0.4 - 0.3 is
0.10000000000000003, so such a candidate is not within 0.1), so the same saves give
the same examples in both tools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gencoach.graph import SavedGraph
from gencoach.protocol import CandidateRecord, StageScore

STAGE_DECAY: Final = 0.4
NON_OPTIMAL_WEIGHT: Final = 0.5
MIN_BEST_SCORE: Final = 0.1
KEEP_WITHIN: Final = 0.1


@dataclass(frozen=True)
class Example:
    """A selected candidate: where it answered, and its score."""

    situation_id: int
    candidate_id: int
    score: float


@dataclass(frozen=True)
class SelectionPolicy:
    """Limits a format puts on the examples: a minimum score, the best k per task."""

    min_score: float | None = None
    best_of: int | None = None


def eligible(candidate: CandidateRecord) -> bool:
    """Whether a candidate may be a positive example at all."""
    return (
        candidate.kind == "agent"
        and candidate.response_status == "completed"
        and candidate.execution_finished
        and not candidate.coaching.diagnosed_as_faulty
    )


def stage_order(key: str) -> int:
    """The stage number of a `stage_<k>` score key."""
    return int(key.removeprefix("stage_"))


def score_of(score: dict[str, StageScore]) -> float:
    """The discounted success ratio of a descendant score."""
    total = 0.0
    ordered = sorted(score.items(), key=lambda item: stage_order(item[0]))
    for depth, (_, stage) in enumerate(ordered, start=1):
        if stage.total_child:
            success = stage.optimal + NON_OPTIMAL_WEIGHT * stage.non_optimal
            total += STAGE_DECAY**depth * success / stage.total_child
    return total


def candidate_score(candidate: CandidateRecord) -> float:
    """A candidate's score, whatever its origin."""
    return score_of(candidate.score)


def select(graph: SavedGraph, min_score: float | None = None) -> list[Example]:
    """The positive examples of a save: by situation id, then best score first."""
    examples: list[Example] = []
    for situation_id in sorted(graph.situations):
        situation = graph.situations[situation_id]
        scored = [
            Example(situation_id, candidate.id, candidate_score(candidate))
            for candidate in situation.candidates
            if eligible(candidate)
        ]
        if not scored:
            continue
        best = max(example.score for example in scored)
        if best <= MIN_BEST_SCORE:
            continue
        kept = [
            example
            for example in scored
            if best - example.score <= KEEP_WITHIN
            and (min_score is None or example.score >= min_score)
        ]
        examples.extend(sorted(kept, key=lambda example: (-example.score, example.candidate_id)))
    return examples
