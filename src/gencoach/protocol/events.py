"""Generation events (generator → gencoach), events format version "1"."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Annotated, Final, Literal
from urllib.parse import urlsplit

from pydantic import Field, TypeAdapter, ValidationError, field_validator, model_validator

from gencoach.protocol.agent import AgentDecision, AgentError, AgentInput, AgentInstruction
from gencoach.protocol.base import (
    ContractModel,
    FieldError,
    JsonObject,
    decode_json,
    parse_tagged,
)
from gencoach.protocol.coaching import CoachingError
from gencoach.protocol.graph import CandidateStatus, TaskDescription
from gencoach.protocol.ids import Identifier, url_problem

EVENTS_VERSION: Final = "1"


class EventBase(ContractModel):
    """Fields every generation event carries: its run, its order in the run, the format."""

    run_id: Identifier
    seq: Annotated[int, Field(ge=0)]
    events: Literal["1"] = EVENTS_VERSION


class GeneratorInfo(ContractModel):
    """The generator that reports a run."""

    name: str
    version: str


class RunStarted(EventBase):
    """A run began: where its agent answers and what task it generates."""

    type: Literal["run.started"] = "run.started"
    agent_url: str
    scenario: str
    target: str
    target_kind: str
    # MAGMA Core's object (text, one description per stage, coaching hint), or the text
    # alone: saves then describe each stage from what its situations reported.
    task_description: TaskDescription | str
    env_options: JsonObject = Field(default_factory=dict)
    generator: GeneratorInfo
    # Every call addresses the one agent of the env (a Gymnasium env, say): the protocol
    # still names it in `target_robot_name`, the exports and their prompts name no robot.
    single_agent: bool = False

    @field_validator("agent_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        problem = url_problem(value)
        if problem is not None:
            raise ValueError(f"{value!r} is not a URL an HTTP client can send: {problem}")
        try:
            parts = urlsplit(value)
            _ = parts.port  # reading the port is what checks it
        except ValueError as error:
            raise ValueError(f"{value!r} is not a URL: {error}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not an http(s) URL with a host")
        return value


class StageInfo(ContractModel):
    """The stage a situation belongs to, with its tool-call budgets."""

    id: Annotated[int, Field(ge=0)]
    goal: str
    hint: str | None = None
    text_only: bool = False
    target_tool_calls: Annotated[int, Field(ge=0)] | None = None
    max_tool_calls: Annotated[int, Field(ge=1)] | None = None
    linked_to_prev: bool = False


class SituationCreated(EventBase):
    """The generator is about to ask the agent about a new situation."""

    type: Literal["situation.created"] = "situation.created"
    situation_id: Identifier
    parent_candidate_id: Identifier | None
    link: Literal["next", "alternative"] = "next"
    stage: StageInfo
    input: AgentInput
    active_errors: list[CoachingError] = Field(default_factory=list)
    coaching_attempt_ids: list[int] = Field(default_factory=list)


class CandidateCreated(EventBase):
    """The agent answered a situation (or the simulator resumed in its place)."""

    type: Literal["candidate.created"] = "candidate.created"
    candidate_id: Identifier
    situation_id: Identifier
    kind: Literal["agent", "simulation_resume"] = "agent"
    response_status: Literal["completed", "error"]
    output: AgentDecision | None = None
    error: AgentError | None = None
    memory: JsonObject = Field(default_factory=dict)
    internal_steps: list[JsonObject] = Field(default_factory=list)
    invalid_reason: str | None = None
    origin: Literal["model", "coaching", "simulation"] = "model"
    coaching_attempt_ids: list[int] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent_status(self) -> CandidateCreated:
        if self.response_status == "completed" and (self.output is None or self.error is not None):
            raise FieldError("response_status", "completed responses need an output and no error")
        if self.response_status == "error" and (self.output is not None or self.error is None):
            raise FieldError("response_status", "error responses need an error and no output")
        return self


class StageEnd(ContractModel):
    """How a stage ended after a candidate's execution.

    `faulty_candidate_id` is the decision the generator knows to be truly at fault for a
    stage that did not end optimally (a mistake it seeded, an oracle's verdict), when it
    knows one: the truth a diagnosis is measured against. Null when it does not know.
    """

    event: Literal["success", "failure", "no_action", "exceeded"]
    state: Literal["optimal", "acceptable", "exceeded"]
    faulty_candidate_id: Identifier | None = None


class CandidateExecuted(EventBase):
    """The simulator executed a candidate; `stage_end` is set when that closed the stage.

    `feedback` is what the agent would read next, as the instruction of the situation that
    follows: reported where none follows (the call ended its stage without success), it is
    the environment's answer a recovery after this call starts from (MAGMA-GEN's status
    return). Null when the generator does not report it.
    """

    type: Literal["candidate.executed"] = "candidate.executed"
    candidate_id: Identifier
    execution: JsonObject = Field(default_factory=dict)
    status: CandidateStatus
    stage_end: StageEnd | None = None
    feedback: AgentInstruction | None = None


class RunFinished(EventBase):
    """The generator will report nothing more for this run."""

    type: Literal["run.finished"] = "run.finished"
    reason: str | None = None


AnyEvent = RunStarted | SituationCreated | CandidateCreated | CandidateExecuted | RunFinished
"""Any one generation event, as a plain union for annotations."""
GenerationEvent = Annotated[AnyEvent, Field(discriminator="type")]
"""Any one generation event, discriminated by `type` (for TypeAdapter and FastAPI bodies)."""

_EVENT_TYPES: dict[str, type[AnyEvent]] = {
    "run.started": RunStarted,
    "situation.created": SituationCreated,
    "candidate.created": CandidateCreated,
    "candidate.executed": CandidateExecuted,
    "run.finished": RunFinished,
}
EVENT_TYPES: Final = tuple(_EVENT_TYPES)


def terminal_of(event: AnyEvent) -> str | None:
    """The terminal an event reports, as `<candidate_id>:created` (a candidate the generator
    rejected) or `<candidate_id>:executed` (an execution that ended its stage); None for an
    event that cannot open coaching. gencoach routes each terminal once."""
    if isinstance(event, CandidateCreated) and event.invalid_reason is not None:
        return f"{event.candidate_id}:created"
    if isinstance(event, CandidateExecuted) and event.stage_end is not None:
        return f"{event.candidate_id}:executed"
    return None


def parse_event(data: object) -> AnyEvent:
    """Parse one decoded event by its `type`, or raise ContractError."""
    return parse_tagged(data, "type", _EVENT_TYPES, "GenerationEvent")


_EVENT_ADAPTER: TypeAdapter[AnyEvent] = TypeAdapter(GenerationEvent)
# Text that might hold a non-finite number (or a number that overflows to one). A run of
# digits is tried from its first digit only, so a long run is not rescanned 300 times.
_MAYBE_NON_FINITE = re.compile(rb"NaN|Infinity|[eE]\+?[0-9]{3}|(?<![0-9])[0-9]{300}")


def parse_event_json(raw: str | bytes) -> AnyEvent:
    """Parse one event from its JSON text, or raise ContractError.

    The common case, a valid event with nothing that could be NaN or Infinity, is
    validated straight from the JSON; anything else takes the path that explains.
    """
    data = raw.encode() if isinstance(raw, str) else raw
    if not _MAYBE_NON_FINITE.search(data):
        with contextlib.suppress(ValidationError):  # refused: the path below says why
            return _EVENT_ADAPTER.validate_json(data, strict=True)
    return parse_event(decode_json(raw, "GenerationEvent"))


def execution_items(execution: object) -> Iterator[tuple[str, object]]:
    """Every key and value of an execution result, nested ones included."""
    if isinstance(execution, dict):
        for key, item in execution.items():
            yield key, item
            yield from execution_items(item)
    elif isinstance(execution, list):
        for item in execution:
            yield from execution_items(item)


def single_bad_call(output: AgentDecision | None, execution: JsonObject | None) -> bool:
    """Whether a decision was one tool call that its execution flagged `bad_call`: the
    failure after which MAGMA-GEN offers a `recovery` restart point."""
    if output is None or len(output.tool_calls) != 1 or execution is None:
        return False
    return any(k == "error_flag" and v == "bad_call" for k, v in execution_items(execution))
