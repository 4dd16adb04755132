"""Judging a decision against the optimal plans from the world state it was taken in.

`judge` says whether a decision departs from every optimal plan (its docstring says
when), as a `Judgement` carrying the expected decision and why.
"""

from __future__ import annotations

from dataclasses import dataclass

from gencoach.errors import ContractError
from gencoach.protocol import AgentDecision
from gencoach.protocol.decision_text import format_decision
from gencoach.sim.episode import Episode, EpisodeOverError, EpisodeState
from gencoach.sim.plans import Plan


@dataclass(frozen=True)
class Judgement:
    """How one decision relates to the optimal plans from its state."""

    departs: bool
    # The first decision of the stage's optimal plan from the state (None: nothing to plan).
    expected: AgentDecision | None
    # What went wrong, when the decision departs.
    why: str = ""

    @property
    def expected_text(self) -> str | None:
        """The expected decision as one line of text (`format_decision`)."""
        return format_decision(self.expected) if self.expected is not None else None


def _cost(plan: Plan) -> int:
    return len(plan.tool_calls)


def _first_decision(plan: Plan) -> AgentDecision | None:
    decisions = plan.decisions()
    return AgentDecision.model_validate(decisions[0]) if decisions else None


def judge(state: EpisodeState, decision: AgentDecision | None) -> Judgement | None:
    """Judge a decision taken in `state`; None when the state has no plan left to follow.

    A decision stays on an optimal plan when it brings the stage exactly as much closer to
    its goal as it spends: the optimal plan from the state after it is shorter by the
    number of calls it counted against the budget (calls failed by injection count for
    nothing and change nothing, so they never depart). A decision that ends the stage
    without success, fails a call, or spends calls for less progress departs. Any robot
    and any order that an optimal plan could take is accepted, not only the one plan the
    stage writes out.
    """
    episode = Episode.restore(state)
    plan = episode.optimal_plan()
    if plan is None:
        return None
    expected = _first_decision(plan)
    if decision is None:
        return Judgement(True, expected, "the agent gave no decision")
    try:
        step = episode.step(decision.model_dump(mode="json"))
    except (ContractError, EpisodeOverError) as error:
        return Judgement(True, expected, f"the decision cannot be executed: {error}")
    counted = [r for r in step.results if r.error_flag != "injection_error"]
    failed = [f"{r.robot}.{r.tool} failed: {r.message}" for r in counted if not r.result]
    spent = len(counted)
    end = step.outcome.stage_end
    if end is not None and end.event != "success":
        return Judgement(True, expected, step.outcome.reason or f"the stage ended: {end.event}")
    if failed:
        return Judgement(True, expected, "; ".join(failed))
    if end is not None:
        if spent == _cost(plan):
            return Judgement(False, expected)
        why = f"it completed the stage with {spent} calls where {_cost(plan)} were enough"
        return Judgement(True, expected, why)
    after = episode.optimal_plan()
    progress = _cost(plan) - _cost(after) if after is not None else 0
    if progress >= spent:
        return Judgement(False, expected)
    if progress <= 0:
        why = f"its {spent} call(s) brought the stage no closer to its goal"
    else:
        why = f"its {spent} calls brought the stage only {progress} step(s) closer to its goal"
    return Judgement(True, expected, why)
