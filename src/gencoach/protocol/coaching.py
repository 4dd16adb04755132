"""Specialized coaching: sessions, requests to the agent's `POST /v1/coaching`, and corrections."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Final, Literal, NoReturn, get_args

from pydantic import Field, model_validator

from gencoach.errors import ContractError, ContractViolation
from gencoach.protocol.agent import (
    AgentDecision,
    AgentError,
    AgentInput,
    CoachingKind,
)
from gencoach.protocol.base import (
    ContractModel,
    FieldError,
    JsonObject,
    NonEmptyStr,
    parse_tagged,
)

REPLACEMENT_POINT: Final = "replacement"
"""Reinjection point that re-asks the agent at the selected step's input; always offered."""
RECOVERY_POINT: Final = "recovery"
"""Reinjection point that continues after the failure feedback of a single bad tool call."""
REPLACE_SAY: Final = "replace_say"
"""Correction payload kind: resume with new words (agents announcing `coaching_resume`)."""
REPLACE_DECISION: Final = "replace_decision"
"""Correction payload kind: resume with a whole new decision (a convention, not MAGMA's)."""
COACHING_KEY: Final = "coaching"
"""The `extra_keys` entry of a reinjected input that holds the proposal's payload."""
DECISION_SOURCE_KEY: Final = "decision_source"
"""The payload entry (`extra_keys`) saying where a proposal's decision came from."""
DECISION_SOURCE_CAPABILITY: Final = "decision_source"
"""The capability (`AgentInfo.capabilities`) of an agent that reads `decision_source` in
the payloads gencoach writes itself; others are sent those payloads without it."""

DecisionSource = Literal[
    "expected_decision", "repair_model", "rule", "fallback", "rewrite", "human", "unknown"
]
"""Where a correction's decision came from (`gencoach.protocol.coaching.DECISION_SOURCES`):

- `expected_decision`: the diagnosis's expected decision, taken by the agent;
- `repair_model`: the agent's own repair model (a session backend, or its model asked again);
- `rule`: a deterministic rule of the agent's coach;
- `fallback`: a last resort of the agent's coach when nothing else gave a decision;
- `rewrite`: gencoach's rewrite backend (the `text_rewrite` route, no agent coach);
- `human`: a person's intervention;
- `unknown`: the agent did not say (MAGMA agents send no `decision_source`).
"""
DECISION_SOURCES: Final[tuple[DecisionSource, ...]] = get_args(DecisionSource)
MODEL_SOURCES: Final[frozenset[DecisionSource]] = frozenset(
    {"expected_decision", "repair_model", "rewrite"}
)
"""The sources whose decision a model made (the diagnosis's, the agent's or the rewriter's)."""


def as_decision_source(value: object) -> DecisionSource:
    """A recorded decision source: the value when it is one of `DECISION_SOURCES`, else
    `unknown` (nothing recorded, as from a MAGMA agent or an earlier save)."""
    return value if isinstance(value, str) and value in DECISION_SOURCES else "unknown"


class InternalStep(ContractModel):
    """One model call the agent made inside a decision, as it reports it."""

    id: str
    component: str
    origin: Literal["model", "coaching"] = "model"
    full_prompt: str
    input_elements: JsonObject = Field(default_factory=dict)
    output_raw: str


class CoachingStage(ContractModel):
    """The stage whose decision is being coached."""

    id: int
    goal: str
    hint: str | None = None


class CoachingError(ContractModel):
    """An error active in the situation (a broken rule, a failing tool)."""

    code: str
    description: str
    details: JsonObject = Field(default_factory=dict)


class CoachingDiagnosis(ContractModel):
    """What went wrong and, where known, what the agent should have decided."""

    explanation: str
    expected_decision: str | None = None


class CoachingStep(ContractModel):
    """One step of the trajectory shown to the agent: its input, answer and execution."""

    id: int
    input: AgentInput
    output: AgentDecision | None = None
    error: AgentError | None = None
    internal_steps: list[JsonObject] = Field(default_factory=list)
    execution: JsonObject = Field(default_factory=dict)


class ReinjectionPoint(ContractModel):
    """Where a correction may restart: a trajectory step's input, or an explicit input."""

    id: str
    input_step_id: int | None = None
    input: AgentInput | None = None

    @model_validator(mode="after")
    def _exactly_one_input(self) -> ReinjectionPoint:
        if (self.input_step_id is None) == (self.input is None):
            raise FieldError("input_step_id", "give exactly one of input_step_id and input")
        return self


class CoachingBackendConfig(ContractModel):
    """One LLM backend the agent may call during a coaching session."""

    type: str
    endpoint: str
    default_model: str
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    timeout: float = Field(default=30.0, gt=0)
    max_retry: int = Field(default=3, ge=0)


class CoachingSessionConfig(ContractModel):
    """The body of `PUT /v1/coaching/sessions/{run_id}`: at least one backend."""

    backends: dict[str, CoachingBackendConfig] = Field(default_factory=dict)
    capture_logs: bool = True

    @model_validator(mode="after")
    def _some_backend(self) -> CoachingSessionConfig:
        if not self.backends:
            raise FieldError("backends", "coaching needs at least one backend")
        return self


class CoachingLog(ContractModel):
    """A log the agent returns with a coaching answer, saved under `_coaching_logs/`."""

    coaching_type: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]
    content: str


class SpecializedCoachingRequest(ContractModel):
    """The body of `POST /v1/coaching`: a trajectory, the step to fix, where to restart."""

    run_id: NonEmptyStr
    request_id: NonEmptyStr
    kind: CoachingKind
    stage: CoachingStage
    active_errors: list[CoachingError] = Field(default_factory=list)
    diagnosis: CoachingDiagnosis | None = None
    target_step_id: int
    trajectory: list[CoachingStep]
    reinjection_points: list[ReinjectionPoint]
    additional_info: JsonObject = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent_references(self) -> SpecializedCoachingRequest:
        step_ids = _unique("trajectory", [step.id for step in self.trajectory], "step id")
        _unique("reinjection_points", [point.id for point in self.reinjection_points], "point id")
        if self.target_step_id not in step_ids:
            reason = f"step {self.target_step_id} is not in the trajectory"
            raise FieldError("target_step_id", reason)
        for index, point in enumerate(self.reinjection_points):
            if point.input_step_id is not None and point.input_step_id not in step_ids:
                reason = f"step {point.input_step_id} is not in the trajectory"
                raise FieldError(f"reinjection_points.{index}.input_step_id", reason)
        return self


class CoachingProposal(ContractModel):
    """A correction to reinject at a named point.

    `extra_keys` IS the payload (`{"kind": "replace_decision", "decision": ...}`): the
    reinjected input carries it, verbatim, as `extra_keys["coaching"]`. Its
    `decision_source`, when given, is one of `DECISION_SOURCES`.
    """

    reinjection_point_id: str
    extra_keys: JsonObject

    @property
    def decision_source(self) -> DecisionSource:
        """Where the decision came from, as the payload says; `unknown` when it does not."""
        return as_decision_source(self.extra_keys.get(DECISION_SOURCE_KEY))


class SpecializedCoachingResponse(ContractModel):
    """The answer to `POST /v1/coaching`: proposals when corrected, a reason otherwise."""

    logs: list[CoachingLog] = Field(default_factory=list)
    request_id: NonEmptyStr
    status: Literal["corrected", "abandoned", "error"]
    proposals: list[CoachingProposal] = Field(default_factory=list)
    reason: str | None = None

    @model_validator(mode="after")
    def _consistent_status(self) -> SpecializedCoachingResponse:
        if self.status == "corrected":
            if not self.proposals:
                raise FieldError("proposals", "a corrected response needs a proposal")
        elif self.proposals:
            raise FieldError("proposals", f"an {self.status} response carries no proposals")
        elif not self.reason:
            raise FieldError("reason", f"an {self.status} response needs a reason")
        return self

    def validate_request(self, request: SpecializedCoachingRequest) -> None:
        """Check that this answers `request` and proposes only points it offered."""
        if self.request_id != request.request_id:
            self._refuse("request_id", f"expected {request.request_id!r}, got {self.request_id!r}")
        offered = [point.id for point in request.reinjection_points]
        for index, proposal in enumerate(self.proposals):
            if proposal.reinjection_point_id not in offered:
                reason = (
                    f"unknown reinjection point {proposal.reinjection_point_id!r}; "
                    f"the request offered {offered!r}"
                )
                self._refuse(f"proposals.{index}.reinjection_point_id", reason)
            source = proposal.extra_keys.get(DECISION_SOURCE_KEY)
            if source is not None and source not in DECISION_SOURCES:
                reason = f"{source!r} is not one of {', '.join(DECISION_SOURCES)}"
                self._refuse(f"proposals.{index}.extra_keys.{DECISION_SOURCE_KEY}", reason)

    def _refuse(self, field: str, reason: str) -> NoReturn:
        raise ContractError(type(self).__name__, [ContractViolation(field, reason)])


class ReplaceSay(ContractModel):
    """Correction payload: resume with this text as the agent's words."""

    kind: Literal["replace_say"] = REPLACE_SAY
    text: NonEmptyStr
    decision_source: DecisionSource | None = None


class ReplaceDecision(ContractModel):
    """Correction payload: resume with this whole decision."""

    kind: Literal["replace_decision"] = REPLACE_DECISION
    decision: AgentDecision
    decision_source: DecisionSource | None = None


CoachingPayload = Annotated[ReplaceSay | ReplaceDecision, Field(discriminator="kind")]


def parse_coaching_payload(value: object) -> ReplaceSay | ReplaceDecision:
    """Parse the `extra_keys["coaching"]` value of a reinjection, or raise ContractError."""
    choices: dict[str, type[ReplaceSay] | type[ReplaceDecision]] = {
        REPLACE_SAY: ReplaceSay,
        REPLACE_DECISION: ReplaceDecision,
    }
    return parse_tagged(value, "kind", choices, "CoachingPayload")


def payload_sent(payload: JsonObject, *, written_here: bool, reads_source: bool) -> JsonObject:
    """A proposal's payload as the agent is sent it: verbatim, except that a payload gencoach
    wrote itself (a rewrite, a person's decision) carries `decision_source` only to an agent
    announcing `DECISION_SOURCE_CAPABILITY` (a toolkit of an earlier version refuses a field
    it does not know). The request keeps the whole payload."""
    if not written_here or reads_source or DECISION_SOURCE_KEY not in payload:
        return payload
    return {key: value for key, value in payload.items() if key != DECISION_SOURCE_KEY}


def coached_input(anchor: AgentInput, payload: JsonObject) -> AgentInput:
    """A copy of `anchor` whose `extra_keys["coaching"]` is `payload`, verbatim (any earlier
    correction replaced), asking for one answer: the input a reinjection sends."""
    extra_keys = {**anchor.extra_keys, COACHING_KEY: payload}
    return anchor.model_copy(update={"extra_keys": extra_keys, "num_outputs": 1}, deep=True)


def without_coaching(agent_input: AgentInput) -> AgentInput:
    """A copy of `agent_input` without an inherited `extra_keys["coaching"]`, as MAGMA-GEN
    builds the input that follows a coached decision."""
    if COACHING_KEY not in agent_input.extra_keys:
        return agent_input
    extra_keys = {k: v for k, v in agent_input.extra_keys.items() if k != COACHING_KEY}
    return agent_input.model_copy(update={"extra_keys": extra_keys})


def _unique(field: str, ids: Sequence[int | str], what: str) -> set[int | str]:
    seen: set[int | str] = set()
    for index, value in enumerate(ids):
        if value in seen:
            raise FieldError(f"{field}.{index}.id", f"duplicate {what} {value!r}")
        seen.add(value)
    return seen
