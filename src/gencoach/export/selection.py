"""Which candidates are positive examples, ranked by the outcomes below them.

`select` gives a save's examples (`Example`): `eligible` candidates scored by `score_of`,
those near their situation's best. `SelectionPolicy` holds a format's further limits.
See docs/export.md (selection).
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
    """A selected candidate: where it answered, its score, and the env's reward for its
    execution (`execution.reward`, 0 when absent), which breaks ties between scores."""

    situation_id: int
    candidate_id: int
    score: float
    reward: float = 0.0


@dataclass(frozen=True)
class SelectionPolicy:
    """Limits a format puts on the examples: a minimum score, the best k per task."""

    min_score: float | None = None
    best_of: int | None = None


def eligible(candidate: CandidateRecord) -> bool:
    """Whether a candidate may be a positive example at all: the agent answered it
    (completed), the answer was executed to the end, and no diagnosis blamed it. Origin
    (model or coaching) is never looked at."""
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
    """The discounted success ratio of a descendant score.

    For the stages below a candidate in order (depth d = 1, 2, ...), it adds
    0.4^d * (optimal + 0.5 * non-optimal) / total: the candidate's own stage counts most,
    later stages less, and failed trajectories only dilute.
    """
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


def candidate_reward(candidate: CandidateRecord) -> float:
    """The env's reward for the candidate's execution (`execution.reward`), 0 when absent."""
    reward = candidate.execution.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        return 0.0
    return float(reward)


def after_fallback(graph: SavedGraph, candidate: CandidateRecord) -> bool:
    """Whether the candidate, or a decision on the way to it, is a fallback-made correction."""
    current: CandidateRecord | None = candidate
    while current is not None:
        if current.decision_source == "fallback":
            return True
        parent = current.parent_id
        current = graph.candidates.get(parent) if parent is not None else None
    return False


def select(
    graph: SavedGraph, min_score: float | None = None, *, exclude_fallbacks: bool = False
) -> list[Example]:
    """The positive examples of a save: by situation id, then best score first.

    Where the best of a situation is at most 0.1 nothing there is worth learning;
    otherwise every candidate within 0.1 of the best is kept, ties to the higher env
    reward. Scores compare exactly, as MAGMA-GEN's exporter compares them (0.4 - 0.3 is
    0.10000000000000003, so such a candidate is not within 0.1), so the same saves give
    the same examples in both tools. `exclude_fallbacks` leaves out every candidate at or
    below a correction the agent's coach took from its fallback (`after_fallback`).
    """
    examples: list[Example] = []
    for situation_id in sorted(graph.situations):
        situation = graph.situations[situation_id]
        scored = [
            Example(
                situation_id, candidate.id, candidate_score(candidate), candidate_reward(candidate)
            )
            for candidate in situation.candidates
            if eligible(candidate) and not (exclude_fallbacks and after_fallback(graph, candidate))
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
        examples.extend(sorted(kept, key=lambda e: (-e.score, -e.reward, e.candidate_id)))
    return examples
