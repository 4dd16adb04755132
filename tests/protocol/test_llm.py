"""LLM answer contracts: schemas for structured output and strict parsing of text answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gencoach import protocol as p
from tests.protocol import examples as ex
from tests.protocol.examples import expect_refusal

DIAGNOSIS = json.dumps(ex.failure_diagnosis())


@pytest.mark.parametrize(
    "text",
    [
        DIAGNOSIS,
        f"  {DIAGNOSIS}\n",
        f"```json\n{DIAGNOSIS}\n```",
        f"```JSON\n{DIAGNOSIS}```",
        f"\n```\n{DIAGNOSIS}\n```\n",
    ],
    ids=["bare", "spaces", "json-fence", "upper-fence", "plain-fence"],
)
def test_answer_text_is_unwrapped(text: str) -> None:
    """Surrounding whitespace and one ```json fence are stripped before parsing."""
    answer = p.parse_llm_answer(p.FailureDiagnosisAnswer, text)
    assert answer == p.FailureDiagnosisAnswer.parse(ex.failure_diagnosis())


@pytest.mark.parametrize(
    "text",
    [f"Here you go: {DIAGNOSIS}", f"```json\n{DIAGNOSIS}", f"{DIAGNOSIS}\n{DIAGNOSIS}", ""],
    ids=["prose", "unclosed-fence", "two-documents", "empty"],
)
def test_answer_that_is_not_json_is_refused(text: str) -> None:
    """Anything but one JSON document, bare or fenced, is refused."""
    error = expect_refusal(
        lambda: p.parse_llm_answer(p.FailureDiagnosisAnswer, text), "FailureDiagnosisAnswer"
    )
    assert "invalid JSON" in str(error)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"decision_index": 0}, "decision_index"),
        ({"decision_index": "2"}, "decision_index"),
        ({"decision_index": 2.0}, "decision_index"),
        ({"reason": "  "}, "reason"),
        ({"expected_decision": ""}, "expected_decision"),
        ({"expected_decision": " "}, "expected_decision"),
        ({"expected_decision": 3}, "expected_decision"),
        (
            {"expected_decision": {"tool_calls": [{"name": "grasp"}]}},
            "expected_decision.tool_calls.0.target_robot_name",
        ),
        ({"confidence": 0.9}, "confidence"),
    ],
)
def test_failure_diagnosis_refusals(change: dict[str, Any], field: str) -> None:
    """Indexes are integers from 1; the reason is not blank; the expected decision is a
    decision object, text that is not blank, or null."""
    text = json.dumps({**ex.failure_diagnosis(), **change})
    expect_refusal(lambda: p.parse_llm_answer(p.FailureDiagnosisAnswer, text), field)


def test_magma_gens_text_form_of_the_expected_decision_is_accepted() -> None:
    """MAGMA-GEN's answer, whose expected decision is text, parses; the text is kept."""
    text = json.dumps(
        {
            "decision_index": 1,
            "reason": "pressed the wrong button first",
            "expected_decision": "press_button(id='sw0') with panda",
        }
    )
    answer = p.parse_llm_answer(p.FailureDiagnosisAnswer, text)
    assert answer.expected_decision == "press_button(id='sw0') with panda"


def test_a_refused_expected_decision_names_the_forms_it_may_take() -> None:
    """A number where a decision belongs is refused with the three forms allowed."""
    text = json.dumps({**ex.failure_diagnosis(), "expected_decision": 3})
    error = expect_refusal(
        lambda: p.parse_llm_answer(p.FailureDiagnosisAnswer, text), "expected_decision"
    )
    assert "expected a decision object, a line of text, or null" in str(error)


def test_suboptimal_decline_needs_no_index() -> None:
    """`suboptimal: false` with a null index is a valid decline."""
    text = '{"suboptimal": false, "decision_idx": null, "reason": "efficient enough"}'
    answer = p.parse_llm_answer(p.SuboptimalDiagnosisAnswer, text)
    assert (answer.suboptimal, answer.decision_idx) == (False, None)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"decision_idx": None}, "decision_idx"),
        ({"decision_idx": 0}, "decision_idx"),
        ({"suboptimal": "true"}, "suboptimal"),
    ],
)
def test_suboptimal_diagnosis_refusals(change: dict[str, Any], field: str) -> None:
    """A suboptimal verdict names a decision from 1; the verdict is a real boolean."""
    text = json.dumps({**ex.suboptimal_diagnosis(), **change})
    expect_refusal(lambda: p.parse_llm_answer(p.SuboptimalDiagnosisAnswer, text), field)


@pytest.mark.parametrize(("text", "cases"), [("[]", []), ("```json\n[1, 3]\n```", [1, 3])])
def test_case_selection_is_a_list_of_numbers(text: str, cases: list[int]) -> None:
    """A case selection is a JSON array of case numbers, possibly empty."""
    assert p.parse_llm_answer(p.CaseSelectionAnswer, text).root == cases


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("[1, 3, 1]", "2"),
        ("[0]", "0"),
        ('[1, "2"]', "1"),
        ("[true]", "0"),
        ('{"cases": [1]}', "CaseSelectionAnswer"),
    ],
    ids=["duplicate", "zero", "string", "bool", "object"],
)
def test_case_selection_refusals(text: str, field: str) -> None:
    """Case numbers are distinct integers from 1, in a bare array."""
    expect_refusal(lambda: p.parse_llm_answer(p.CaseSelectionAnswer, text), field)


@pytest.mark.parametrize(
    ("model", "required"),
    [
        (p.FailureDiagnosisAnswer, {"decision_index", "reason", "expected_decision"}),
        (p.SuboptimalDiagnosisAnswer, {"suboptimal", "decision_idx", "reason"}),
    ],
)
def test_object_answer_schema_is_closed(model: type[p.ContractModel], required: set[str]) -> None:
    """An object answer's schema requires every field and allows no other."""
    schema = p.answer_schema(model)
    assert set(schema["required"]) == required
    assert schema["additionalProperties"] is False


def test_case_selection_schema_is_an_array_of_positive_integers() -> None:
    """The case selection schema is an array of integers from 1."""
    schema = p.answer_schema(p.CaseSelectionAnswer)
    assert schema["type"] == "array"
    assert schema["items"] == {"type": "integer", "minimum": 1}
