"""Answer contracts narrowed to one trajectory: the schema sent and the answers refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gencoach.errors import ContractError
from gencoach.protocol import AgentDecision
from gencoach.protocol.jobs import JobStep
from gencoach.protocol.llm import answer_schema, parse_llm_answer
from gencoach.workers.backends import make_backend
from gencoach.workers.backends.schemas import response_format
from gencoach.workers.contracts import failure_contract, suboptimal_contract
from gencoach.workers.diagnosis import diagnose
from gencoach.workers.transcripts import Transcript
from tests.support.backends import openai_settings
from tests.support.llm_server import ScriptedLLMServer, json_reply
from tests.workers.builders import diagnosis_job, step

PRESS_TOOL = {
    "name": "press_button",
    "description": "Press a button.",
    "arguments": {"id": {"description": "the button", "type": "str"}},
}
TAKE_TOOL = {
    "name": "take_obj",
    "description": "Take an object.",
    "arguments": {"obj": {"description": "the object", "type": "str"}},
}


def _with_tools(data: dict[str, Any]) -> dict[str, Any]:
    data["input"]["tools"] = [PRESS_TOOL, TAKE_TOOL]
    data["input"]["attributes"] = {"known_robots": ["panda", "ur5"]}
    return data


def _steps() -> list[JobStep]:
    return [JobStep.model_validate(_with_tools(step(n, "sw0"))) for n in (12, 13, 14)]


def _answer(**decision: Any) -> str:
    expected = {"say": "", "tool_calls": [decision]} if decision else None
    return json.dumps({"decision_index": 2, "reason": "r", "expected_decision": expected})


def test_the_failure_schema_bounds_the_index_and_names_each_offered_tool() -> None:
    """decision_index runs 1..3; each call is one offered tool with its own required arguments."""
    schema = answer_schema(failure_contract(_steps()))
    properties = schema["properties"]
    assert properties["decision_index"] == {"type": "integer", "minimum": 1, "maximum": 3}
    decision, text, null = properties["expected_decision"]["anyOf"]
    assert null == {"type": "null"}
    assert text == {"type": "string", "minLength": 1}
    calls = decision["properties"]["tool_calls"]["items"]["anyOf"]
    by_name = {call["properties"]["name"]["enum"][0]: call for call in calls}
    assert set(by_name) == {"press_button", "take_obj"}
    press = by_name["press_button"]["properties"]
    assert press["arguments"]["required"] == ["id"]
    assert press["arguments"]["additionalProperties"] is False
    assert press["target_robot_name"]["enum"] == ["panda", "ur5"]
    assert schema["required"] == ["decision_index", "reason", "expected_decision"]


def test_the_schema_keeps_the_order_a_grammar_generates_in() -> None:
    """Properties stay in the contract's order (a call's name before its arguments), also
    when the contract comes from the cache: grammar-enforcing servers generate in it."""
    for _ in range(2):
        schema = answer_schema(failure_contract(_steps()))
        assert list(schema["properties"]) == ["decision_index", "reason", "expected_decision"]
        decision = schema["properties"]["expected_decision"]["anyOf"][0]
        call = decision["properties"]["tool_calls"]["items"]["anyOf"][0]
        assert list(decision["properties"]) == ["say", "tool_calls"]
        assert list(call["properties"]) == ["name", "arguments", "target_robot_name"]


def test_the_tight_schema_is_sent_strict_in_json_schema_mode() -> None:
    """OpenAI's strict mode can take the narrowed schema: it goes out with strict true."""
    sent = response_format("json_schema", failure_contract(_steps()))
    assert sent is not None
    assert sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["name"] == "FailureDiagnosisAnswer"
    assert sent["json_schema"]["schema"]["properties"]["decision_index"]["maximum"] == 3


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            {"name": "open_door", "arguments": {}, "target_robot_name": "panda"},
            "'open_door' is not an offered tool (press_button, take_obj)",
        ),
        (
            {"name": "press_button", "arguments": {"button": "sw4"}, "target_robot_name": "panda"},
            "press_button takes exactly ['id']",
        ),
    ],
    ids=["unknown-tool", "wrong-arguments"],
)
def test_a_call_outside_the_offered_tools_is_refused(call: dict[str, Any], message: str) -> None:
    """An expected decision naming a tool not offered, or other arguments, is refused."""
    with pytest.raises(ContractError) as refused:
        parse_llm_answer(failure_contract(_steps()), _answer(**call))
    assert message in str(refused.value)


def test_an_offered_call_or_a_null_decision_is_accepted() -> None:
    """The offered tool with its arguments passes, and so does null (no decision named)."""
    call = {"name": "take_obj", "arguments": {"obj": "cube"}, "target_robot_name": "ur5"}
    answer = parse_llm_answer(failure_contract(_steps()), _answer(**call))
    assert isinstance(answer.expected_decision, AgentDecision)
    assert answer.expected_decision.tool_calls[0].name == "take_obj"
    assert parse_llm_answer(failure_contract(_steps()), _answer()).expected_decision is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('panda.open_door(); say("x")', "call 1: 'open_door' is not an offered tool"),
        ('panda.press_button(button="sw4")', "call 1: press_button takes exactly ['id']"),
    ],
    ids=["unknown-tool", "wrong-arguments"],
)
def test_text_in_the_decision_convention_is_checked_like_an_object(text: str, message: str) -> None:
    """Text that parses as a decision is held to the offered tools as an object is."""
    answer = json.dumps({"decision_index": 2, "reason": "r", "expected_decision": text})
    with pytest.raises(ContractError) as refused:
        parse_llm_answer(failure_contract(_steps()), answer)
    assert message in str(refused.value)
    assert "expected_decision:" in str(refused.value)


def test_text_outside_the_convention_is_accepted_as_it_is() -> None:
    """MAGMA-GEN's free text names no checkable call: accepted, kept verbatim."""
    text = "press_button(id='sw0') with panda"
    answer = json.dumps({"decision_index": 1, "reason": "r", "expected_decision": text})
    assert parse_llm_answer(failure_contract(_steps()), answer).expected_decision == text


def test_the_suboptimal_schema_bounds_its_index() -> None:
    """decision_idx is an integer of 1..n or null."""
    schema = answer_schema(suboptimal_contract(_steps()[:2]))
    number, null = schema["properties"]["decision_idx"]["anyOf"]
    assert (number["maximum"], null) == (2, {"type": "null"})


_PRESS_SW4 = {
    "say": "",
    "tool_calls": [
        {"name": "press_button", "arguments": {"id": "sw4"}, "target_robot_name": "panda"}
    ],
}


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("expected", "handed_on"),
    [
        (_PRESS_SW4, 'panda.press_button(id="sw4")'),
        ('panda.press_button( id = "sw4" )', 'panda.press_button(id="sw4")'),
        ("  press the fourth button with panda ", "press the fourth button with panda"),
    ],
    ids=["object", "convention-text", "free-text"],
)
async def test_the_expected_decision_reaches_the_repair_as_one_line_of_text(
    llm_server: ScriptedLLMServer, expected: Any, handed_on: str
) -> None:
    """The model's decision object, or text in the convention, becomes the one-line text
    agents' coaches parse back; other text (MAGMA-GEN's form) is handed on as given."""
    llm_server.script(
        json_reply({"decision_index": 2, "reason": "r", "expected_decision": expected})
    )
    job = diagnosis_job(trajectory=[_with_tools(step(n, "sw0")) for n in (12, 13)])
    async with make_backend("coach", openai_settings(llm_server.endpoint)) as backend:
        verdict = await diagnose(job, backend, Transcript())
    assert verdict.diagnosis is not None
    assert verdict.diagnosis.expected_decision == handed_on
    prompt = llm_server.requests[0].body["messages"][1]["content"]
    assert "OFFERED TOOLS (name and arguments)\n- press_button(id)\n- take_obj(obj)" in prompt


def test_without_listed_tools_any_call_is_allowed_by_a_self_contained_schema() -> None:
    """A trajectory whose inputs list no tools gets call items without $refs (they would
    dangle once nested) and any tool name passes validation."""
    steps = [JobStep.model_validate(step(n, "sw0")) for n in (12, 13)]
    schema = answer_schema(failure_contract(steps))
    assert "$ref" not in json.dumps(schema)
    call = {"name": "anything", "arguments": {"x": 1}, "target_robot_name": "panda"}
    assert parse_llm_answer(failure_contract(steps), _answer(**call)).expected_decision is not None
