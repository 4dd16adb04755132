"""Every wire model parses a valid example and refuses the generic faults the same way."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from gencoach import protocol as p
from tests.protocol import examples as ex
from tests.protocol import records as rx
from tests.protocol.examples import expect_refusal

Model = type[p.ContractModel] | type[p.ContractRootModel[Any]]

EXAMPLES: list[tuple[Model, Callable[[], Any]]] = [
    (p.AgentInstruction, lambda: ex.agent_input()["instruction"]),
    (p.AgentInput, ex.agent_input),
    (p.AgentRequest, ex.agent_request),
    (p.ToolCall, ex.tool_call),
    (p.AgentDecision, ex.agent_decision),
    (p.AgentError, ex.agent_error),
    (p.AgentOutput, ex.agent_output),
    (p.AgentOutput, ex.failed_output),
    (p.AgentResponse, ex.agent_response),
    (p.AgentHealth, ex.agent_health),
    (p.AgentInfo, ex.agent_info),
    (p.InternalStep, ex.internal_step),
    (p.CoachingStage, ex.coaching_stage),
    (p.CoachingError, ex.coaching_error),
    (p.CoachingDiagnosis, ex.coaching_diagnosis),
    (p.CoachingStep, ex.coaching_step),
    (p.ReinjectionPoint, ex.reinjection_point),
    (p.CoachingBackendConfig, ex.backend_config),
    (p.CoachingSessionConfig, ex.session_config),
    (p.CoachingLog, ex.coaching_log),
    (p.SpecializedCoachingRequest, ex.coaching_request),
    (p.CoachingProposal, ex.coaching_proposal),
    (p.SpecializedCoachingResponse, ex.coaching_response),
    (p.ReplaceSay, ex.replace_say),
    (p.ReplaceDecision, ex.replace_decision),
    (p.Producer, rx.producer),
    (p.RunConfig, rx.run_config),
    (p.TaskDescription, rx.task_description),
    (p.StageDescription, rx.stage_description),
    (p.SituationLink, rx.situation_link),
    (p.StageScore, rx.stage_score),
    (p.CoachingMarker, rx.coaching_marker),
    (p.CandidateRecord, rx.candidate_record),
    (p.SituationRecord, rx.situation_record),
    (p.StageInfo, rx.stage_info),
    (p.GeneratorInfo, lambda: rx.run_started()["generator"]),
    (p.RunStarted, rx.run_started),
    (p.SituationCreated, rx.situation_created),
    (p.CandidateCreated, rx.candidate_created),
    (p.StageEnd, lambda: rx.candidate_executed()["stage_end"]),
    (p.CandidateExecuted, rx.candidate_executed),
    (p.RunFinished, rx.run_finished),
    (p.BranchAnchor, lambda: rx.branch_order()["anchor"]),
    (p.BranchOrder, rx.branch_order),
    (p.RunSettled, rx.run_settled),
    (p.FailureDiagnosisAnswer, ex.failure_diagnosis),
    (p.SuboptimalDiagnosisAnswer, ex.suboptimal_diagnosis),
    (p.CaseSelectionAnswer, ex.case_selection),
]
IDS = [f"{model.__name__}-{index}" for index, (model, _) in enumerate(EXAMPLES)]
# MAGMA Core's stage descriptions carry keys of their own, which are kept, not refused.
OPEN_MODELS = (p.StageDescription,)
OBJECTS = [
    (model, make)
    for model, make in EXAMPLES
    if isinstance(make(), dict) and model not in OPEN_MODELS
]
OBJECT_IDS = [model.__name__ for model, _ in OBJECTS]


def _int_field(data: dict[str, Any]) -> str | None:
    return next((key for key, value in data.items() if type(value) is int), None)


INT_FIELDS = [(m, f, _int_field(f())) for m, f in OBJECTS if _int_field(f()) is not None]


def test_every_model_has_an_example() -> None:
    """Each public wire model of the package appears in the example table."""
    covered = {model for model, _ in EXAMPLES}
    models = {
        value
        for name in p.__all__
        if isinstance(value := getattr(p, name), type)
        and issubclass(value, p.ContractModel | p.ContractRootModel)
        and value not in (p.ContractModel, p.ContractRootModel, p.EventBase)
    }
    assert models - covered == set()


@pytest.mark.parametrize(("model", "make"), EXAMPLES, ids=IDS)
def test_example_round_trips(model: Model, make: Callable[[], Any]) -> None:
    """A valid example parses, and its JSON dump parses back to an equal model."""
    parsed = model.parse(make())
    dumped = parsed.model_dump(mode="json", by_alias=True)
    assert model.parse(dumped) == parsed
    assert model.parse_json(json.dumps(dumped)) == parsed
    assert model.parse_json(parsed.model_dump_json(by_alias=True)) == parsed


@pytest.mark.parametrize(("model", "make"), EXAMPLES, ids=IDS)
def test_example_parses_from_json_text(model: Model, make: Callable[[], Any]) -> None:
    """JSON text and the same document already decoded give the same model."""
    data = make()
    assert model.parse_json(json.dumps(data).encode()) == model.parse(data)


@pytest.mark.parametrize(("model", "make"), OBJECTS, ids=OBJECT_IDS)
def test_unknown_field_is_refused(model: Model, make: Callable[[], Any]) -> None:
    """A field the contract does not define is refused and named."""
    error = expect_refusal(lambda: model.parse({**make(), "surprise": 1}), "surprise")
    assert "surprise: unknown field" in str(error)


@pytest.mark.parametrize(("model", "make"), OBJECTS, ids=OBJECT_IDS)
def test_unknown_field_is_refused_in_json(model: Model, make: Callable[[], Any]) -> None:
    """An unknown field is refused just the same when the payload is JSON text."""
    raw = json.dumps({**make(), "surprise": 1})
    expect_refusal(lambda: model.parse_json(raw), "surprise")


@pytest.mark.parametrize("wrong", ["1", True, 1.0], ids=["string", "bool", "float"])
@pytest.mark.parametrize(
    ("model", "make", "field"), INT_FIELDS, ids=lambda v: getattr(v, "__name__", v)
)
def test_integer_fields_take_only_integers(
    model: Model, make: Callable[[], Any], field: str, wrong: object
) -> None:
    """A string, a bool or a float where an integer belongs is refused, never coerced."""
    expect_refusal(lambda: model.parse({**make(), field: wrong}), field)
    expect_refusal(lambda: model.parse_json(json.dumps({**make(), field: wrong})), field)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.parametrize(("model", "make"), OBJECTS, ids=OBJECT_IDS)
def test_non_finite_numbers_are_refused_anywhere(
    model: Model, make: Callable[[], Any], literal: str
) -> None:
    """NaN and Infinity are refused in any field, even a free-form one, from JSON text."""
    raw = json.dumps({**make(), "surprise": {"deep": [0.0]}}).replace("[0.0]", f"[{literal}]")
    expect_refusal(lambda: model.parse_json(raw), "surprise.deep.0")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_refused_in_decoded_json(value: float) -> None:
    """NaN and Infinity in an already-decoded free-form object are refused with their path."""
    data = ex.agent_input()
    data["memory"] = {"scores": [1.0, value]}
    expect_refusal(lambda: p.AgentInput.parse(data), "memory.scores.1")
    timeout = {**ex.backend_config(), "timeout": value}
    expect_refusal(lambda: p.CoachingBackendConfig.parse(timeout), "timeout")
