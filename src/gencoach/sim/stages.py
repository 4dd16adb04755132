"""Stages: an instruction, its goals and budget, and how a stage can end.

`Stage` judges progress against its goals; `Outcome` is what one decision did to its
stage (its docstring tables each end and the status it gives), `StageEnd` how it ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from gencoach.sim.goals import Goal, Progress, Verdict, combine
from gencoach.sim.plans import Plan
from gencoach.sim.world import StateModel

StageEvent = Literal["success", "failure", "no_action", "exceeded"]
StageState = Literal["optimal", "acceptable", "exceeded"]
Status = Literal["ongoing", "optimal", "suboptimal", "finished"]


@dataclass(frozen=True)
class Stage:
    """One instruction of a scenario, with the goals that judge it and its tool-call budget."""

    id: int
    instruction: str
    goal: str
    hint: str
    goals: tuple[Goal, ...]
    target_tool_calls: int
    max_tool_calls: int
    text_only: bool = False
    linked_to_prev: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.target_tool_calls <= self.max_tool_calls:
            raise ValueError(
                f"stage {self.id}: need 0 <= target_tool_calls ({self.target_tool_calls})"
                f" <= max_tool_calls ({self.max_tool_calls})"
            )
        if self.text_only and self.max_tool_calls != 0:
            raise ValueError(f"stage {self.id}: a text-only stage has no tool-call budget")

    def evaluate(self, progress: Progress) -> Verdict:
        """All the stage's goals together."""
        return combine([goal.evaluate(progress) for goal in self.goals])

    def optimal_plan(self, progress: Progress) -> Plan | None:
        """The shortest way to complete the stage from here; None once it has failed."""
        if self.evaluate(progress).value == -1:
            return None
        plan = Plan()
        for goal in self.goals:
            if goal.evaluate(progress).value == 1:
                continue
            part = goal.plan(progress)
            if part is None:
                return None
            plan += part
        return plan

    def describe(self) -> dict[str, Any]:
        """The stage as reported in events: `{id, goal, hint, text_only, …, linked_to_prev}`."""
        return {
            "id": self.id,
            "goal": self.goal,
            "hint": self.hint,
            "text_only": self.text_only,
            "target_tool_calls": self.target_tool_calls,
            "max_tool_calls": self.max_tool_calls,
            "linked_to_prev": self.linked_to_prev,
        }


class StageEnd(StateModel):
    """How a stage ended, in the shape of the `stage_end` event field."""

    event: StageEvent
    state: StageState

    @property
    def status(self) -> Status:
        """The candidate status this end gives the decision that caused it."""
        if self.event != "success":
            return "finished"
        return "optimal" if self.state == "optimal" else "suboptimal"


class Outcome(StateModel):
    """What one decision did to its stage: still ongoing, or how it ended and why.

    | how the stage ends                             | event / state                  | status     |
    | ---------------------------------------------- | ------------------------------ | ---------- |
    | goals met within `target_tool_calls`           | success / optimal              | optimal    |
    | goals met beyond the target, within the budget | success / acceptable           | suboptimal |
    | a goal at -1 (wrong button, wrong bin, answer) | failure / optimal|acceptable   | finished   |
    | a decision without calls on an action stage    | no_action / optimal|acceptable | finished   |
    | `max_tool_calls` spent with a goal still at 0  | exceeded / exceeded            | finished   |
    | otherwise                                      | none                           | ongoing    |

    The state of a failure or no_action says how much budget had been used (within the
    target or not). `finished` marks a candidate that ended its stage without success;
    `invalid`, `error` and `unassessed` are for the generator, which sees answers the
    simulator never executes.
    """

    status: Status = "ongoing"
    stage_end: StageEnd | None = None
    reason: str = ""

    @classmethod
    def ended(cls, event: StageEvent, state: StageState, reason: str = "") -> Outcome:
        """An outcome that ends the stage."""
        end = StageEnd(event=event, state=state)
        return cls(status=end.status, stage_end=end, reason=reason)
