"""Descendant scores on graphs too deep for recursion, and alternatives kept apart."""

from __future__ import annotations

from gencoach.graph import Outcome, ScoredCandidate, descendant_scores


def test_deep_chain_is_scored_without_recursion() -> None:
    """A 20,000-step chain ending optimal gives every ancestor one optimal trajectory."""
    depth = 20_000
    members = {situation: [situation] for situation in range(depth)}
    candidates = {
        cid: ScoredCandidate(
            stage_id=0,
            outcome=Outcome.OPTIMAL if cid == depth - 1 else Outcome.ONGOING,
            next_situations=[cid + 1] if cid < depth - 1 else [],
        )
        for cid in range(depth)
    }
    scores = descendant_scores(members, candidates)
    assert scores[0]["stage_0"].optimal == 1
    assert scores[0]["stage_0"].total_child == 1
    assert scores[depth // 2]["stage_0"].optimal == 1


def test_an_ongoing_leaf_counts_in_the_total_only() -> None:
    """A branch that stopped while its stage was ongoing counts as a trajectory, not a success."""
    scores = descendant_scores({0: [0]}, {0: ScoredCandidate(stage_id=3, outcome=Outcome.ONGOING)})
    assert scores[0]["stage_3"].model_dump(by_alias=True) == {
        "optimal": 0,
        "non-optimal": 0,
        "unassessed": 0,
        "total_child": 1,
    }


def test_a_simulation_resume_has_no_score_of_its_own() -> None:
    """A `simulation_resume` leaf counts no trajectory; one with a next situation carries
    only what follows it, as MAGMA-GEN's `compute_node_result` does."""
    members = {0: [0], 1: [1], 2: [2]}
    candidates = {
        0: ScoredCandidate(stage_id=0, outcome=Outcome.ONGOING, next_situations=[1], resume=True),
        1: ScoredCandidate(stage_id=0, outcome=Outcome.OPTIMAL),
        2: ScoredCandidate(stage_id=0, outcome=Outcome.FAILED, resume=True),
    }
    scores = descendant_scores(members, candidates)
    assert scores[0] == scores[1]
    assert scores[0]["stage_0"].optimal == 1
    assert scores[2] == {}
