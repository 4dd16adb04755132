"""Descendant scores: per stage, how the terminal trajectories below a candidate ended.

`descendant_scores` scores every candidate of a graph (`ScoredCandidate`), by MAGMA-GEN's
rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from gencoach.protocol import StageScore


class Outcome(Enum):
    """How a candidate's stage stood after its execution."""

    OPTIMAL = "optimal"
    NON_OPTIMAL = "non-optimal"
    UNASSESSED = "unassessed"
    FAILED = "failed"
    ONGOING = "ongoing"


_STATUS_OUTCOMES = {
    "optimal": Outcome.OPTIMAL,
    "suboptimal": Outcome.NON_OPTIMAL,
    "unassessed": Outcome.UNASSESSED,
    "error": Outcome.FAILED,
}


def outcome_of(status: str) -> Outcome:
    """The outcome a saved candidate status stands for (`invalid`, `finished`: ongoing)."""
    return _STATUS_OUTCOMES.get(status, Outcome.ONGOING)


@dataclass(frozen=True)
class ScoredCandidate:
    """What scoring needs of a candidate: its stage, its outcome, what follows it."""

    stage_id: int
    outcome: Outcome
    next_situations: Sequence[int] = ()
    resume: bool = False  # a simulation_resume: no terminal trajectory of its own


@dataclass
class _Counts:
    optimal: int = 0
    non_optimal: int = 0
    unassessed: int = 0
    total: int = 0

    def add(self, other: _Counts) -> None:
        self.optimal += other.optimal
        self.non_optimal += other.non_optimal
        self.unassessed += other.unassessed
        self.total += other.total


@dataclass
class _Result:
    stages: dict[int, _Counts] = field(default_factory=dict)

    def add(self, other: _Result) -> None:
        for stage, counts in other.stages.items():
            self.stages.setdefault(stage, _Counts()).add(counts)

    def score(self) -> dict[str, StageScore]:
        return {
            f"stage_{stage}": StageScore.from_counts(
                counts.optimal, counts.non_optimal, counts.unassessed, counts.total
            )
            for stage, counts in sorted(self.stages.items())
        }


def _terminal(candidate: ScoredCandidate) -> _Counts:
    return _Counts(
        optimal=int(candidate.outcome is Outcome.OPTIMAL),
        non_optimal=int(candidate.outcome is Outcome.NON_OPTIMAL),
        unassessed=int(candidate.outcome is Outcome.UNASSESSED),
        total=1,
    )


def descendant_scores(
    members: Mapping[int, Iterable[int]],
    candidates: Mapping[int, ScoredCandidate],
) -> dict[int, dict[str, StageScore]]:
    """Score every candidate, given each situation's candidates (`members`).

    The rule is MAGMA-GEN's: a candidate counts one terminal trajectory for its stage when
    it ends the stage or ends its branch, classed optimal, non-optimal (suboptimal) or
    unassessed, and otherwise only in the total (failed, exceeded, or stopped while still
    ongoing). Its score adds the scores of the situations that follow it (`next` links);
    alternatives are scored on their own and never counted in the candidate they replace.
    A `simulation_resume` candidate (the simulator continuing on its own) counts no
    trajectory of its own: its score is only what follows it.

    Works without recursion, so trajectories of any depth are fine: a situation is
    scored once every situation that follows its candidates has been.
    """
    situation_results: dict[int, _Result] = {}
    candidate_results: dict[int, _Result] = {}
    visiting: set[int] = set()  # a situation met again before it is scored is a cycle: skip
    for root in members:
        stack: list[tuple[int, bool]] = [(root, False)]
        while stack:
            situation, expanded = stack.pop()
            if situation in situation_results or (not expanded and situation in visiting):
                continue
            visiting.add(situation)
            below = [
                child
                for candidate in members.get(situation, ())
                for child in candidates[candidate].next_situations
            ]
            if not expanded:
                stack.append((situation, True))
                stack.extend((child, False) for child in below if child not in situation_results)
                continue
            total = _Result()
            for candidate_id in members.get(situation, ()):
                candidate = candidates[candidate_id]
                result = _Result()
                ends = not candidate.next_situations or candidate.outcome is not Outcome.ONGOING
                if ends and not candidate.resume:
                    result.stages[candidate.stage_id] = _terminal(candidate)
                for child in candidate.next_situations:
                    result.add(situation_results.get(child, _Result()))
                candidate_results[candidate_id] = result
                total.add(result)
            situation_results[situation] = total
    return {candidate: result.score() for candidate, result in candidate_results.items()}
