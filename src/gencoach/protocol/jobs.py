"""Work orders from the controller to the workers (RQ jobs), and what comes back.

A job's payload travels as JSON (`model_dump_json`), never pickled, so controllers
and workers of different versions fail loudly on a mismatch instead of misreading.
Results come back on the results stream as one `JobResult` each.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, field_validator, model_validator

from gencoach.protocol.agent import AgentDecision, AgentError, AgentInput
from gencoach.protocol.base import ContractModel, FieldError, JsonObject, NonEmptyStr
from gencoach.protocol.coaching import (
    CoachingError,
    CoachingLog,
    CoachingStage,
    SpecializedCoachingRequest,
    SpecializedCoachingResponse,
)
from gencoach.protocol.decision_text import decision_line

DiagnosisRoute = Literal["failure", "no_action", "exceeded", "suboptimal"]
JobName = Literal["diagnosis", "repair", "rewrite"]
PositiveInt = Annotated[int, Field(ge=1)]

DEFAULT_MAX_ATTEMPTS: Final = 3
"""How many times a request's job is tried when its workers keep dying (the default of
`coaching.max_attempts`)."""
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class LeaseRef(ContractModel):
    """The pending slot a job holds: it renews it while it works."""

    run_id: NonEmptyStr
    stage_id: Annotated[int, Field(ge=0)]
    request_id: NonEmptyStr
    lease_s: Annotated[float, Field(gt=0)]
    record: str | None = None
    """The request's record (its JSON) as it stood when the job was queued, so that the
    worker taking the job moves it on without reading it first; None from an older
    controller. A stale copy costs a read: the move is a compare-and-set."""


class JobStep(ContractModel):
    """One decision of the trajectory a job works on (`id` is the candidate's storage id)."""

    id: int
    input: AgentInput
    output: AgentDecision | None = None
    error: AgentError | None = None
    internal_steps: list[JsonObject] = Field(default_factory=list)
    execution: JsonObject = Field(default_factory=dict)
    status: str = "ongoing"
    diagnosable: bool = True


class ExampleCase(ContractModel):
    """A validated earlier case offered to the LLM: goal, trajectory text, diagnosis.

    `expected_decision` is kept as text; a case written with a decision object (the form
    gencoach's prompts ask for) reads as that decision's line of text.
    """

    stage_goal: str
    trajectory: str
    decision_index: PositiveInt
    reason: str
    expected_decision: str

    @field_validator("expected_decision", mode="before")
    @classmethod
    def _as_text(cls, value: object) -> object:
        if isinstance(value, dict):
            return decision_line(AgentDecision.parse(value))
        return value


class DiagnosisJob(ContractModel):
    """Find the decision to correct in a failed or suboptimal trajectory."""

    job: Literal["diagnosis"] = "diagnosis"
    request_id: NonEmptyStr
    run_id: NonEmptyStr
    route: DiagnosisRoute
    backend: NonEmptyStr
    lease: LeaseRef
    stage: CoachingStage
    task_description: str = ""
    active_errors: list[CoachingError] = Field(default_factory=list)
    failure_reason: str | None = None
    trajectory: list[JobStep]
    examples: list[ExampleCase] = Field(default_factory=list)
    optimal_trajectory: str | None = None
    attempt: PositiveInt = 1
    max_attempts: PositiveInt = DEFAULT_MAX_ATTEMPTS

    @model_validator(mode="after")
    def _has_diagnosable_step(self) -> DiagnosisJob:
        if not any(step.diagnosable for step in self.trajectory):
            raise FieldError("trajectory", "at least one step must be diagnosable")
        return self


class RepairJob(ContractModel):
    """Ask the agent for a correction (`POST /v1/coaching`)."""

    job: Literal["repair"] = "repair"
    request_id: NonEmptyStr
    run_id: NonEmptyStr
    agent_url: NonEmptyStr
    lease: LeaseRef
    coaching: SpecializedCoachingRequest
    timeout_s: Annotated[float, Field(gt=0)] = 120.0
    attempt: PositiveInt = 1
    max_attempts: PositiveInt = DEFAULT_MAX_ATTEMPTS


class RewriteJob(ContractModel):
    """Rewrite the failed answer of a text-only stage (reinjected as `replace_say`)."""

    job: Literal["rewrite"] = "rewrite"
    request_id: NonEmptyStr
    run_id: NonEmptyStr
    backend: NonEmptyStr
    lease: LeaseRef
    stage: CoachingStage
    rejected_answer: str
    rejection_reason: str
    trajectory: list[JobStep] = Field(default_factory=list)
    attempt: PositiveInt = 1
    max_attempts: PositiveInt = DEFAULT_MAX_ATTEMPTS


AnyJob = DiagnosisJob | RepairJob | RewriteJob


class Diagnosis(ContractModel):
    """Which decision was wrong (`step_id`, its 1-based `decision_index`), why, and the fix."""

    step_id: int
    decision_index: PositiveInt
    explanation: str
    expected_decision: str | None = None
    rule: Literal["single_step", "llm", "human"] = "llm"


class Usage(ContractModel):
    """Tokens a job spent on LLM backends."""

    prompt_tokens: Annotated[int, Field(ge=0)] = 0
    completion_tokens: Annotated[int, Field(ge=0)] = 0
    total_tokens: Annotated[int, Field(ge=0)] = 0


class JobResult(ContractModel):
    """What a job achieved, published on the results stream for the controller.

    `done` carries the job's product (a diagnosis, the agent's coaching answer, or the
    rewritten text); `declined` is a suboptimal diagnosis that found nothing to fix;
    `abandoned` and `error` carry the reason.
    """

    request_id: NonEmptyStr
    run_id: NonEmptyStr
    job: JobName
    attempt: PositiveInt = 1
    status: Literal["done", "declined", "abandoned", "error"]
    diagnosis: Diagnosis | None = None
    coaching: SpecializedCoachingResponse | None = None
    rewrite: str | None = None
    reason: str | None = None
    logs: list[CoachingLog] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    duration_s: NonNegativeFloat | None = None
    """How long the job ran, from its start on the worker to its result."""
    record: str | None = None
    """The request's record (its JSON) as the worker's taking of the job left it, so that
    the controller moves it on without reading it first; None when the worker did not
    store the taking (or is older)."""

    @model_validator(mode="after")
    def _product_matches(self) -> JobResult:
        if self.status == "done":
            product = {
                "diagnosis": self.diagnosis,
                "repair": self.coaching,
                "rewrite": self.rewrite,
            }
            if product[self.job] is None:
                raise FieldError("status", f"a done {self.job} job must carry its result")
        elif not self.reason:
            raise FieldError("reason", f"a {self.status} job must say why")
        return self
