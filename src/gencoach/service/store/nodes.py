"""A run's graph as read back from Redis: situations, candidates, executions, links."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from gencoach.protocol import (
    AgentDecision,
    AgentError,
    AgentInput,
    AgentInstruction,
    CoachingError,
    CoachingMarker,
    JsonObject,
    RunStarted,
    StageEnd,
    StageInfo,
)

INVALID_RESPONSE: Final = "invalid_response"


class _Stored(BaseModel):
    model_config = ConfigDict(extra="ignore")


class StoredSituation(_Stored):
    """A situation as kept in Redis: its event fields plus storage ids."""

    id: int
    parent_id: int | None
    situation_id: str
    parent_candidate_id: str | None
    link: Literal["next", "alternative"]
    stage: StageInfo
    input: AgentInput
    active_errors: list[CoachingError] = Field(default_factory=list)
    coaching_attempt_ids: list[int] = Field(default_factory=list)


class StoredCandidate(_Stored):
    """A candidate as kept in Redis: its event fields plus storage ids."""

    id: int
    situation_id: int
    candidate_id: str
    kind: Literal["agent", "simulation_resume"]
    response_status: Literal["completed", "error"]
    output: AgentDecision | None = None
    error: AgentError | None = None
    memory: JsonObject = Field(default_factory=dict)
    internal_steps: list[JsonObject] = Field(default_factory=list)
    invalid_reason: str | None = None
    origin: Literal["model", "coaching", "simulation"]
    coaching_attempt_ids: list[int] = Field(default_factory=list)

    def reported_error(self) -> AgentError | None:
        """The candidate's error; a generator's rejection reads as an invalid response."""
        if self.invalid_reason is None:
            return self.error
        answer = self.output.model_dump_json() if self.output is not None else "null"
        return AgentError(
            code=INVALID_RESPONSE,
            message=f"{self.invalid_reason}; rejected answer: {answer}",
            component="generator",
        )


class StoredExecution(_Stored):
    """A candidate's execution result, the stage end it caused, if any, and the feedback
    the generator reported with it (`CandidateExecuted.feedback`)."""

    execution: JsonObject = Field(default_factory=dict)
    status: str
    stage_end: StageEnd | None = None
    feedback: AgentInstruction | None = None


def as_text(value: object) -> str:
    """A Redis reply (bytes) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class RunGraph:
    """A run's graph read from Redis, indexed by storage id."""

    run_id: str
    state: str
    started: RunStarted
    roots: list[int]
    situations: dict[int, StoredSituation]
    candidates: dict[int, StoredCandidate]
    executions: dict[int, StoredExecution]
    links: dict[int, list[tuple[int, Literal["next", "alternative"]]]]
    members: dict[int, list[int]]
    markers: dict[int, CoachingMarker] = field(default_factory=dict)
    sources: dict[int, JsonObject] = field(default_factory=dict)
    # When the run's start was applied (seconds since the epoch, Redis's clock).
    started_at: float | None = None
