"""What diagnosis jobs ask an LLM backend to return, and how its text answer is parsed."""

from __future__ import annotations

import re
from typing import Annotated, Any, Protocol, Self, TypeVar

from pydantic import AfterValidator, BaseModel, Field, model_validator

from gencoach.protocol.agent import AgentDecision
from gencoach.protocol.base import ContractModel, ContractRootModel, FieldError


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


PositiveInt = Annotated[int, Field(ge=1)]
# A blank reason or fix is no diagnosis: MAGMA drops such answers too.
Text = Annotated[str, Field(min_length=1), AfterValidator(_not_blank)]


class _JsonParsable(Protocol):
    @classmethod
    def parse_json(cls, raw: str | bytes) -> Self: ...


AnswerT = TypeVar("AnswerT", bound=_JsonParsable)

_FENCE = re.compile(r"```(?:json)?[ \t]*\n?(?P<body>.*?)\s*```", re.DOTALL | re.IGNORECASE)


class FailureDiagnosisAnswer(ContractModel):
    """Diagnosis of a failed, idle or exhausted stage: which decision caused it, and the fix.

    `expected_decision` is the decision the agent should have made there (words or tool
    calls, as an agent answers), or null when the model cannot name one.
    """

    decision_index: PositiveInt
    reason: Text
    expected_decision: AgentDecision | None


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
    body = text.strip()
    fenced = _FENCE.fullmatch(body)
    if fenced is not None:
        body = fenced["body"]
    return model.parse_json(body)
