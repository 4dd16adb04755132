"""Agent protocol 2.0: inference requests and answers, health and self-description."""

from __future__ import annotations

from typing import Annotated, Final, Literal, NoReturn, get_args

from pydantic import Field, model_validator

from gencoach.errors import ContractError, ContractViolation
from gencoach.protocol.base import (
    ContractModel,
    ContractRootModel,
    FieldError,
    JsonObject,
    NonEmptyStr,
)

PROTOCOL_VERSION: Final = "2.0"

CoachingKind = Literal["failure", "suboptimal", "format"]
COACHING_KINDS: tuple[CoachingKind, ...] = get_args(CoachingKind)


class AgentInstruction(ContractModel):
    """What the agent is told at this step: a user message or environment feedback."""

    type: Literal["user", "env"]
    content: str


class AgentInput(ContractModel):
    """One situation the agent must answer, with the memory it carries so far."""

    id: int
    instruction: AgentInstruction
    tools: list[JsonObject] = Field(default_factory=list)
    attributes: JsonObject = Field(default_factory=dict)
    memory: JsonObject = Field(default_factory=dict)
    num_outputs: Annotated[int, Field(gt=0)] = 1
    extra_keys: JsonObject = Field(default_factory=dict)


class AgentRequest(ContractModel):
    """The body of `POST /v1/responses`: inputs whose ids are unique."""

    request_id: NonEmptyStr
    inputs: list[AgentInput]

    @model_validator(mode="after")
    def _unique_input_ids(self) -> AgentRequest:
        seen: set[int] = set()
        for index, entry in enumerate(self.inputs):
            if entry.id in seen:
                raise FieldError(f"inputs.{index}.id", f"duplicate input id {entry.id}")
            seen.add(entry.id)
        return self


class ToolCall(ContractModel):
    """One tool invocation addressed to a named robot."""

    name: NonEmptyStr
    arguments: JsonObject = Field(default_factory=dict)
    target_robot_name: NonEmptyStr


class AgentDecision(ContractModel):
    """What the agent decided: words to say and tool calls to run."""

    say: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)


class AgentError(ContractModel):
    """Why the agent produced no decision."""

    code: NonEmptyStr
    message: NonEmptyStr
    component: str | None = None


class AgentOutput(ContractModel):
    """One candidate answer: a decision when completed, an error otherwise, never both."""

    request_id: NonEmptyStr
    source_id: int
    candidate_index: Annotated[int, Field(ge=0)]
    status: Literal["completed", "error"]
    memory: JsonObject
    internal_steps: list[JsonObject] = Field(default_factory=list)
    output: AgentDecision | None = None
    error: AgentError | None = None

    @model_validator(mode="after")
    def _consistent_status(self) -> AgentOutput:
        if self.status == "completed" and (self.output is None or self.error is not None):
            raise FieldError("status", "completed candidates need an output and no error")
        if self.status == "error" and (self.output is not None or self.error is None):
            raise FieldError("status", "error candidates need an error and no output")
        return self


class AgentResponse(ContractRootModel[list[AgentOutput]]):
    """The body answering `POST /v1/responses`: a JSON array of AgentOutput."""

    def validate_request(self, request: AgentRequest) -> None:
        """Check count and order: input order, then ascending candidate_index, ids matching."""
        expected = [
            (request.request_id, entry.id, index)
            for entry in request.inputs
            for index in range(entry.num_outputs)
        ]
        names = ("request_id", "source_id", "candidate_index")
        for position, (want, item) in enumerate(zip(expected, self.root, strict=False)):
            got = (item.request_id, item.source_id, item.candidate_index)
            for name, wanted, actual in zip(names, want, got, strict=True):
                if wanted != actual:
                    reason = f"expected {wanted!r}, got {actual!r}"
                    self._refuse(f"{position}.{name}", reason)
        if len(self.root) < len(expected):
            _, source_id, index = expected[len(self.root)]
            reason = (
                f"missing candidate {index} of input {source_id}: the request asks for "
                f"{len(expected)} candidates, the response has {len(self.root)}"
            )
            self._refuse(str(len(self.root)), reason)
        if len(self.root) > len(expected):
            reason = (
                f"unexpected candidate: the request asks for {len(expected)} candidates, "
                f"the response has {len(self.root)}"
            )
            self._refuse(str(len(expected)), reason)

    def _refuse(self, field: str, reason: str) -> NoReturn:
        raise ContractError(type(self).__name__, [ContractViolation(field, reason)])


class AgentHealth(ContractModel):
    """The body of `GET /health` once the agent is ready."""

    status: Literal["ready"] = "ready"


class AgentInfo(ContractModel):
    """The body of `GET /v1/info`: who the agent is and which coaching it supports.

    `specialized_coaching` is any list of strings, as magma-core accepts it; gencoach
    routes the kinds it knows (`routed_kinds`) and ignores the others (`ignored_kinds`,
    e.g. MAGMA's `text_only`).
    """

    protocol_version: str = PROTOCOL_VERSION
    agent_id: str
    agent_version: str
    specialized_coaching: list[str] = Field(default_factory=list)
    coaching_resume: bool = False
    coaching_unavailable_reason: str | None = None
    capabilities: dict[str, bool]

    @property
    def routed_kinds(self) -> list[CoachingKind]:
        """The announced kinds gencoach can ask for, in announcement order, once each."""
        kinds: list[CoachingKind] = []
        for kind in self.specialized_coaching:
            if kind in COACHING_KINDS and kind not in kinds:
                kinds.append(kind)
        return kinds

    @property
    def ignored_kinds(self) -> list[str]:
        """The announced kinds gencoach never routes a request to."""
        return [kind for kind in self.specialized_coaching if kind not in COACHING_KINDS]
