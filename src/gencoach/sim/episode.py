"""An episode: one scenario instance played decision by decision, saved and restored whole.

The snapshot is `{scenario, seed, world, tracker}`: the stages are rebuilt from the
scenario and the seed, so restoring a snapshot and replaying the same decisions gives the
same results, feedback and outcomes, injected errors included.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from gencoach.errors import GencoachError
from gencoach.sim.decisions import Decision, parse_decision
from gencoach.sim.feedback import env_feedback
from gencoach.sim.injection import ActiveError
from gencoach.sim.plans import Plan
from gencoach.sim.scenarios import Scenario, get_scenario
from gencoach.sim.stages import Outcome, Stage
from gencoach.sim.tools import ToolResult, execute, tool_specs
from gencoach.sim.tracker import StageTracker, TrackerState
from gencoach.sim.world import StateModel, World


class EpisodeOverError(GencoachError, RuntimeError):
    """A decision was given to an episode that has already ended."""


class EpisodeState(StateModel):
    """Everything needed to restore an episode exactly."""

    scenario: str
    seed: int
    world: World
    tracker: TrackerState


class StepResult(StateModel):
    """What executing one decision did: per-call results, the agent's feedback, the outcome."""

    stage_id: int
    results: list[ToolResult] = Field(default_factory=list)
    feedback: dict[str, Any]
    outcome: Outcome
    # Calls left unexecuted because the stage ended before them (or was text-only).
    skipped_calls: int = 0
    # The stage's active errors after the decision, for gencoach, never for the agent.
    active_errors: list[ActiveError] = Field(default_factory=list)
    next_stage_id: int | None = None
    # The stage's tool calls so far, and how many of them failed by injection (forgiven).
    tool_calls: int = 0
    forgiven_tool_calls: int = 0


class Episode:
    """A scenario instance in play."""

    def __init__(self, scenario: Scenario, seed: int, world: World, tracker: StageTracker) -> None:
        self.scenario = scenario
        self.seed = seed
        self.world = world
        self.tracker = tracker

    @classmethod
    def start(
        cls,
        scenario: str | Scenario,
        seed: int,
        *,
        injection_probability: float = 0.0,
        injection_shots: int = 1,
    ) -> Episode:
        """Begin the first stage of a scenario instance."""
        found = get_scenario(scenario) if isinstance(scenario, str) else scenario
        task = found.build(
            seed, injection_probability=injection_probability, injection_shots=injection_shots
        )
        tracker = StageTracker(task.stages)
        tracker.begin(task.world)
        return cls(found, seed, task.world, tracker)

    @property
    def stage(self) -> Stage:
        """The stage being played (the last one played, once the episode is over)."""
        return self.tracker.stage

    @property
    def stages(self) -> tuple[Stage, ...]:
        """All stages of the instance, in order."""
        return self.tracker.stages

    @property
    def finished(self) -> bool:
        """True once a stage ended without success or the last stage succeeded."""
        return self.tracker.state.finished

    @property
    def active_errors(self) -> list[ActiveError]:
        """The current stage's active errors."""
        return list(self.tracker.state.active_errors)

    def instruction(self) -> str:
        """The user instruction of the current stage."""
        return self.stage.instruction

    def tools(self) -> list[dict[str, Any]]:
        """The tools offered to the agent, in the MAGMA shape."""
        return tool_specs()

    def attributes(self) -> dict[str, Any]:
        """The world as shown to the agent."""
        return self.world.attributes()

    def step(self, decision: Mapping[str, Any] | Decision) -> StepResult:
        """Execute one decision on the current stage and judge it."""
        if self.finished:
            raise EpisodeOverError("the episode is over; restore a snapshot to branch")
        parsed = parse_decision(decision)
        stage = self.stage
        results: list[ToolResult] = []
        if stage.text_only:
            outcome = self.tracker.on_answer(self.world, parsed.say, bool(parsed.tool_calls))
        elif not parsed.tool_calls:
            outcome = self.tracker.on_silence()
        else:
            outcome = Outcome()
            for call in parsed.tool_calls:
                result = execute(self.world, call)
                results.append(result)
                outcome = self.tracker.on_call(self.world, result)
                if outcome.stage_end is not None:
                    break
        active = self.active_errors
        counted = self.tracker.state.used_tool_calls
        forgiven = sum(1 for error in active if error.code == "injection_error")
        next_stage = self.tracker.conclude(self.world, outcome)
        return StepResult(
            stage_id=stage.id,
            results=results,
            feedback=env_feedback(results),
            outcome=outcome,
            skipped_calls=len(parsed.tool_calls) - len(results),
            active_errors=active,
            next_stage_id=None if next_stage is None else next_stage.id,
            tool_calls=counted + forgiven,
            forgiven_tool_calls=forgiven,
        )

    def optimal_plan(self) -> Plan | None:
        """The shortest way to complete the current stage from here; None once it failed."""
        if self.finished:
            return None
        return self.stage.optimal_plan(self.tracker.progress(self.world))

    def snapshot(self) -> EpisodeState:
        """A copy of the full state, detached from this episode."""
        state = EpisodeState(
            scenario=self.scenario.name,
            seed=self.seed,
            world=self.world,
            tracker=self.tracker.state,
        )
        return state.model_copy(deep=True)

    def reopened(self) -> EpisodeState:
        """A snapshot after a decision that ended its stage without success, with that stage
        going on: where a recovery after a stage-ending bad call continues (gencoach, as
        MAGMA-GEN, restarts it from the state after the call; its budget stays spent)."""
        state = self.snapshot()
        state.tracker.finished = False
        return state

    def to_json(self) -> str:
        """Serialise the episode; `Episode.from_json` restores it exactly."""
        return self.snapshot().model_dump_json()

    @classmethod
    def restore(cls, state: EpisodeState) -> Episode:
        """Rebuild an episode from a snapshot; the snapshot itself is not shared."""
        state = state.model_copy(deep=True)
        scenario = get_scenario(state.scenario)
        stages = scenario.builder(state.seed).stages
        return cls(scenario, state.seed, state.world, StageTracker(stages, state.tracker))

    @classmethod
    def from_json(cls, text: str | bytes) -> Episode:
        """Restore an episode serialised by `to_json`."""
        return cls.restore(EpisodeState.model_validate_json(text))

    def copy(self) -> Episode:
        """An independent episode in the same situation, to branch from."""
        return Episode.restore(self.snapshot())
