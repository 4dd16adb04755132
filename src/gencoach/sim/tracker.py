"""The stage tracker: budget accounting and stage ends, decision by decision.

Budget rule: every executed call counts against the stage's budget, failed ones
included, except a call that failed by injection: the agent did nothing wrong there.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from gencoach.sim.goals import Progress
from gencoach.sim.injection import ActiveError, injection_error
from gencoach.sim.stages import Outcome, Stage, StageState
from gencoach.sim.tools import ToolResult
from gencoach.sim.world import StateModel, World


class TrackerState(StateModel):
    """Where the episode stands: current stage, budget used, the stage's active errors."""

    stage_index: int = Field(default=0, ge=0)
    used_tool_calls: int = Field(default=0, ge=0)
    decisions: int = Field(default=0, ge=0)
    # Length of the world's press log when the stage began: later presses are the stage's.
    press_start: int = Field(default=0, ge=0)
    active_errors: list[ActiveError] = Field(default_factory=list)
    finished: bool = False
    last_outcome: Outcome | None = None


class StageTracker:
    """Judges decisions against the current stage and moves on to the next stage."""

    def __init__(self, stages: Sequence[Stage], state: TrackerState | None = None) -> None:
        if not stages:
            raise ValueError("a scenario needs at least one stage")
        self.stages = tuple(stages)
        self.state = state if state is not None else TrackerState()
        if self.state.stage_index >= len(self.stages):
            raise ValueError(f"no stage at index {self.state.stage_index}")

    @property
    def stage(self) -> Stage:
        """The stage being played."""
        return self.stages[self.state.stage_index]

    def begin(self, world: World) -> None:
        """Start the current stage on this world: fresh budget, errors and injection shots."""
        self.state.used_tool_calls = 0
        self.state.decisions = 0
        self.state.press_start = len(world.press_log)
        self.state.active_errors = []
        world.injection.rearm()

    def progress(self, world: World, say: str = "") -> Progress:
        """The stage's view of the world, for goals and plans."""
        return Progress(world, tuple(world.press_log[self.state.press_start :]), say)

    def _budget_state(self) -> StageState:
        used = self.state.used_tool_calls
        return "optimal" if used <= self.stage.target_tool_calls else "acceptable"

    def on_call(self, world: World, result: ToolResult) -> Outcome:
        """Account one executed call and judge the stage right after it."""
        if result.error_flag == "injection_error":
            self.state.active_errors.append(
                injection_error(result.robot, result.tool, result.arguments)
            )
        else:
            self.state.used_tool_calls += 1
        verdict = self.stage.evaluate(self.progress(world))
        if verdict.value == -1:
            return Outcome.ended("failure", self._budget_state(), verdict.reason)
        if verdict.value == 1:
            return Outcome.ended("success", self._budget_state())
        if self.state.used_tool_calls >= self.stage.max_tool_calls:
            reason = f"budget of {self.stage.max_tool_calls} tool calls spent; {verdict.reason}"
            return Outcome.ended("exceeded", "exceeded", reason)
        return Outcome()

    def on_silence(self) -> Outcome:
        """A decision without tool calls on a stage that needs action."""
        return Outcome.ended("no_action", self._budget_state(), "answered without acting")

    def on_answer(self, world: World, say: str, called_tools: bool) -> Outcome:
        """Judge the answer to a text-only stage; calling tools there fails it."""
        if called_tools:
            reason = "a text-only question is answered with say alone, without tool calls"
            return Outcome.ended("failure", self._budget_state(), reason)
        verdict = self.stage.evaluate(self.progress(world, say))
        if verdict.value == 1:
            return Outcome.ended("success", self._budget_state())
        return Outcome.ended("failure", self._budget_state(), verdict.reason)

    def conclude(self, world: World, outcome: Outcome) -> Stage | None:
        """Record a decision's outcome; after a success, begin and return the next stage."""
        self.state.decisions += 1
        self.state.last_outcome = outcome
        if outcome.stage_end is None:
            return None
        if outcome.stage_end.event == "success" and self.state.stage_index + 1 < len(self.stages):
            self.state.stage_index += 1
            self.begin(world)
            return self.stage
        self.state.finished = True
        return None
