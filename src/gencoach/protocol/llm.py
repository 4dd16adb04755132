"""What diagnosis jobs ask an LLM backend to return, and how its text answer is parsed."""

from __future__ import annotations

from typing import Annotated, Any, Protocol, Self, TypeVar

from pydantic import AfterValidator, BaseModel, Discriminator, Field, Tag, model_validator

from gencoach.protocol.agent import AgentDecision
from gencoach.protocol.base import ContractModel, ContractRootModel, FieldError


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


PositiveInt = Annotated[int, Field(ge=1)]
# A blank reason or fix is no diagnosis: MAGMA drops such answers too.
Text = Annotated[str, Field(min_length=1), AfterValidator(_not_blank)]


def _decision_form(value: object) -> str | None:
    if isinstance(value, str):
        return "text"
    return "object" if isinstance(value, dict | BaseModel) else None


# MAGMA-GEN's diagnoses give the expected decision as text; gencoach's prompts ask for an
# object. Either form is one branch of the union, so a refusal speaks of that form only.
ExpectedDecision = Annotated[
    Annotated[AgentDecision, Tag("object")] | Annotated[Text, Tag("text")],
    Discriminator(
        _decision_form,
        custom_error_type="expected_decision_form",
        custom_error_message="expected a decision object, a line of text, or null",
    ),
]


class _JsonParsable(Protocol):
    @classmethod
    def parse_json(cls, raw: str | bytes) -> Self: ...


AnswerT = TypeVar("AnswerT", bound=_JsonParsable)

_FENCE = "```"


class FailureDiagnosisAnswer(ContractModel):
    """Diagnosis of a failed, idle or exhausted stage: which decision caused it, and the fix.

    `expected_decision` is the decision the agent should have made there: an agent
    decision object (words or tool calls, as an agent answers), or text (MAGMA-GEN's
    form, `DiagnosisResult.expected_decision`), or null when the model cannot name one.
    """

    decision_index: PositiveInt
    reason: Text
    expected_decision: ExpectedDecision | None


class SuboptimalDiagnosisAnswer(ContractModel):
    """Diagnosis of a completed stage: which decision was wasteful, or a decline."""

    suboptimal: bool
    decision_idx: PositiveInt | None
    reason: str

    @model_validator(mode="after")
    def _index_when_suboptimal(self) -> SuboptimalDiagnosisAnswer:
        if self.suboptimal and self.decision_idx is None:
            raise FieldError("decision_idx", "a suboptimal verdict must name the decision")
        return self


class CaseSelectionAnswer(ContractRootModel[list[PositiveInt]]):
    """The validated cases (1-based numbers, each once) that help diagnose the current one."""

    @model_validator(mode="after")
    def _unique(self) -> CaseSelectionAnswer:
        for index, case in enumerate(self.root):
            if case in self.root[:index]:
                raise FieldError(str(index), f"case {case} is listed twice")
        return self


def answer_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of an answer, for a backend's structured-output setting.

    A contract made for one job (see `gencoach.workers.contracts`) gives its own, tighter
    schema through a classmethod `answer_json_schema`; others give pydantic's.
    """
    tight = getattr(model, "answer_json_schema", None)
    if callable(tight):
        schema: dict[str, Any] = tight()
        return schema
    return model.model_json_schema()


def parse_llm_answer(model: type[AnswerT], text: str) -> AnswerT:
    """Parse an LLM's text answer (JSON, bare or in one ```json fence) or raise ContractError."""
    return model.parse_json(_unfenced(text.strip()))


def _unfenced(body: str) -> str:
    """The inside of one ```json fence around all of `body`, or `body` when it has none.

    Plain string operations, not a pattern: a lazy body followed by optional whitespace
    rescans a long run of spaces from every position.
    """
    if len(body) < 2 * len(_FENCE) or not (body.startswith(_FENCE) and body.endswith(_FENCE)):
        return body
    inside = body[len(_FENCE) : -len(_FENCE)]
    if inside[:4].lower() == "json":
        inside = inside[4:]
    inside = inside.lstrip(" \t")
    return inside.removeprefix("\n").rstrip()
