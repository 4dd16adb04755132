"""The response_format sent per structured-output mode, and when it can be strict."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from gencoach.workers.backends import response_format
from gencoach.workers.backends.schemas import strict_compatible


class Step(BaseModel):
    """A nested object whose field is called like a keyword."""

    model_config = ConfigDict(extra="forbid")

    minLength: Annotated[str, Field(min_length=2)]  # noqa: N815 (a field named like a keyword)


class Plan(BaseModel):
    """An object holding a list of nested objects."""

    model_config = ConfigDict(extra="forbid")

    steps: list[Step]


class Loose(BaseModel):
    """An object with an optional field and extra keys allowed."""

    note: str = ""


def test_nested_closed_objects_are_strict_without_refused_keywords() -> None:
    """Nested closed objects stay strict; minLength goes, a property named minLength stays."""
    sent = response_format("json_schema", Plan)
    assert sent is not None
    assert sent["json_schema"]["strict"] is True
    step = sent["json_schema"]["schema"]["$defs"]["Step"]
    assert list(step["properties"]) == ["minLength"]
    assert "minLength" not in step["properties"]["minLength"]


def test_open_or_optional_objects_are_sent_whole_and_not_strict() -> None:
    """An object with optional fields or extra keys is sent unchanged with strict false."""
    sent = response_format("json_schema", Loose)
    assert sent is not None
    assert sent["json_schema"] == {
        "name": "Loose",
        "schema": Loose.model_json_schema(),
        "strict": False,
    }


def test_shapes_strict_mode_cannot_express() -> None:
    """Arrays at the root and allOf/oneOf are not strict-compatible."""
    closed = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    assert strict_compatible(closed)
    assert not strict_compatible({"type": "array", "items": {"type": "integer"}})
    assert not strict_compatible({**closed, "allOf": [{"type": "object"}]})


def test_no_schema_or_mode_none_sends_nothing() -> None:
    """Without a contract, or in mode none, no response_format is sent."""
    assert response_format("json_schema", None) is None
    assert response_format("none", Plan) is None
