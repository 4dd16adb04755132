"""The parsing entry points: strictness, JSON decoding and how refusals are reported."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import TypeAdapter

from gencoach import protocol as p
from gencoach.errors import ContractError
from tests.protocol import examples as ex
from tests.protocol import records as rx
from tests.protocol.examples import expect_refusal


def test_message_names_the_field_and_the_reason() -> None:
    """A wrong type reads `invalid <Model>: <field>: <reason>`."""
    error = expect_refusal(lambda: p.AgentInput.parse({**ex.agent_input(), "id": "1"}), "id")
    assert str(error) == "invalid AgentInput: id: Input should be a valid integer"
    assert error.model == "AgentInput"


def test_every_violation_is_reported() -> None:
    """Several faults in one payload are all listed, in document order."""
    data = {**ex.agent_input(), "id": True, "extra_field": 1}
    error = expect_refusal(lambda: p.AgentInput.parse(data), "id")
    assert error.fields == ["id", "extra_field"]
    assert str(error).endswith("extra_field: unknown field")


def test_missing_field_is_named() -> None:
    """A required field that is absent is named with its full path."""
    data = ex.agent_input()
    del data["instruction"]["content"]
    error = expect_refusal(lambda: p.AgentInput.parse(data), "instruction.content")
    assert "required field is missing" in str(error)


def test_nested_models_are_accepted_as_decoded_dicts() -> None:
    """Strict mode still takes nested objects as plain dicts, at every depth."""
    request = p.SpecializedCoachingRequest.parse(ex.coaching_request())
    assert request.trajectory[0].input.instruction.type == "user"


def test_validator_errors_are_attributed_inside_lists() -> None:
    """A model rule broken by a list item is reported at that item's field."""
    items = [ex.agent_output(), {**ex.agent_output(), "output": None}]
    expect_refusal(lambda: p.AgentResponse.parse(items), "1.status")


def test_union_tags_stay_out_of_field_paths() -> None:
    """Paths inside free-form JSON name keys and indexes only, not pydantic's union tags."""
    data = {**ex.agent_input(), "memory": {"list": [{"dict": {1, 2}}]}}
    error = expect_refusal(lambda: p.AgentInput.parse(data), "memory.list.0.dict")
    assert error.fields == ["memory.list.0.dict"]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_json_non_finite_literal_in_free_form_field(literal: str) -> None:
    """A NaN or Infinity literal inside a free-form JSON field is refused, with its path."""
    raw = '{"id": 1, "instruction": {"type": "env", "content": ""}, "memory": {"x": %s}}'
    error = expect_refusal(lambda: p.AgentInput.parse_json(raw % literal), "memory.x")
    assert "not a finite number" in str(error)


@pytest.mark.parametrize(
    "raw",
    ["{", "nope", '{"id": 1} trailing', b"\xff\xfe", ""],
    ids=["truncated", "word", "trailing", "not-utf8", "empty"],
)
def test_invalid_json_is_refused(raw: str | bytes) -> None:
    """Text that is not one JSON document is refused in the model's name."""
    error = expect_refusal(lambda: p.AgentInput.parse_json(raw), "AgentInput")
    assert "invalid JSON" in str(error)


def test_non_object_is_refused_in_the_model_name() -> None:
    """A JSON array where an object belongs is refused without a field path."""
    expect_refusal(lambda: p.AgentInput.parse_json("[1]"), "AgentInput")


def test_parse_as_is_strict_for_plain_types() -> None:
    """parse_as refuses coercion for types that carry no model config of their own."""
    assert p.parse_as(list[int], [1, 2]) == [1, 2]
    error = expect_refusal(lambda: p.parse_as(list[int], [1, "2"]), "1")
    assert error.model == "list"
    expect_refusal(lambda: p.parse_as(dict[str, float], {"x": float("nan")}), "x")


def test_parse_as_takes_an_adapter_and_a_name() -> None:
    """parse_as accepts a TypeAdapter and reports under the name it is given."""
    adapter = TypeAdapter(p.GenerationEvent)
    event = p.parse_as(adapter, rx.run_finished())
    assert isinstance(event, p.RunFinished)
    bad = {**rx.run_finished(), "seq": -1}
    error = expect_refusal(lambda: p.parse_as(adapter, bad, "GenerationEvent"), "seq")
    assert error.model == "GenerationEvent"


def test_contract_error_is_a_value_error() -> None:
    """Callers that catch ValueError also catch contract refusals."""
    with pytest.raises(ValueError, match="invalid AgentHealth"):
        p.AgentHealth.parse({"status": "loading"})
    assert issubclass(ContractError, ValueError)


def test_parse_as_takes_unhashable_annotations() -> None:
    """A type whose metadata cannot be hashed is still validated strictly."""
    target = Annotated[list[int], {"note": "unhashable"}]
    assert p.parse_as(target, [1]) == [1]
    expect_refusal(lambda: p.parse_as(target, [True]), "0")
