"""Answer contracts made for one diagnosis: decision numbers bounded, tools the ones offered.

`failure_contract` and `suboptimal_contract` narrow the public contracts
(`gencoach.protocol.llm`) to one job's trajectory; the narrowed class validates answers and
gives the tight JSON schema structured output sends (`answer_json_schema`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any, ClassVar, TypeVar, cast

from pydantic import model_validator

from gencoach.protocol.agent import AgentDecision
from gencoach.protocol.base import FieldError
from gencoach.protocol.decision_text import parse_decision
from gencoach.protocol.jobs import JobStep
from gencoach.protocol.llm import FailureDiagnosisAnswer, SuboptimalDiagnosisAnswer

_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}


def offered_tools(steps: Sequence[JobStep]) -> dict[str, dict[str, str]]:
    """The tools offered at the given steps (MAGMA shape): each one's arguments and types."""
    tools: dict[str, dict[str, str]] = {}
    for step in steps:
        for tool in step.input.tools:
            name, arguments = tool.get("name"), tool.get("arguments")
            if not isinstance(name, str) or not name or name in tools:
                continue
            specs = arguments if isinstance(arguments, dict) else {}
            tools[name] = {
                param: _JSON_TYPES.get(str(spec.get("type")), "string")
                if isinstance(spec, dict)
                else "string"
                for param, spec in specs.items()
            }
    return tools


def known_robots(steps: Sequence[JobStep]) -> list[str]:
    """The robots the inputs name (`attributes.known_robots`), in first-seen order."""
    robots: list[str] = []
    for step in steps:
        names = step.input.attributes.get("known_robots")
        for name in names if isinstance(names, list) else []:
            if isinstance(name, str) and name and name not in robots:
                robots.append(name)
    return robots


# An expected decision as one line of text (MAGMA-GEN's form).
_TEXT: dict[str, Any] = {"type": "string", "minLength": 1}

# A tool call of any name, self-contained (no $defs: it is nested in a larger schema).
_ANY_CALL: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "arguments": {"type": "object"},
        "target_robot_name": {"type": "string", "minLength": 1},
    },
    "required": ["name", "arguments", "target_robot_name"],
    "additionalProperties": False,
}


def _tool_call_schema(name: str, types: dict[str, str], robots: list[str]) -> dict[str, Any]:
    robot: dict[str, Any] = {"type": "string", "minLength": 1}
    if robots:
        robot = {"type": "string", "enum": list(robots)}
    return {
        "type": "object",
        "properties": {
            "name": {"type": "string", "enum": [name]},
            "arguments": {
                "type": "object",
                "properties": {param: {"type": kind} for param, kind in types.items()},
                "required": list(types),
                "additionalProperties": False,
            },
            "target_robot_name": robot,
        },
        "required": ["name", "arguments", "target_robot_name"],
        "additionalProperties": False,
    }


def decision_schema(steps: Sequence[JobStep]) -> dict[str, Any]:
    """An agent decision whose tool calls are the offered tools, with their own arguments
    (any call when no step lists its tools)."""
    types = offered_tools(steps)
    robots = known_robots(steps)
    if types:
        items = [_tool_call_schema(name, args, robots) for name, args in types.items()]
        calls = {"type": "array", "items": items[0] if len(items) == 1 else {"anyOf": items}}
    else:  # the generator lists no tools: any call, checked by the agent and the simulator
        calls = {"type": "array", "items": _ANY_CALL}
    return {
        "type": "object",
        "title": "AgentDecision",
        "properties": {"say": {"type": "string"}, "tool_calls": calls},
        "required": ["say", "tool_calls"],
        "additionalProperties": False,
    }


def _out_of_range(field: str, number: int, count: int) -> FieldError:
    return FieldError(
        field, f"there is no decision {number}: choose a decision numbered 1 to {count}"
    )


def _check_decision(expected: AgentDecision | str, tools: dict[str, dict[str, str]]) -> None:
    decision = parse_decision(expected) if isinstance(expected, str) else expected
    if not tools or decision is None:
        return
    for index, call in enumerate(decision.tool_calls):
        where = f"expected_decision.tool_calls.{index}"
        if isinstance(expected, str):  # text has no fields to blame: name the call instead
            where, call_name = "expected_decision", f"call {index + 1}: "
        else:
            call_name = ""
        if call.name not in tools:
            offered = ", ".join(sorted(tools)) or "none"
            field = where if call_name else f"{where}.name"
            raise FieldError(field, f"{call_name}{call.name!r} is not an offered tool ({offered})")
        if set(call.arguments) != set(tools[call.name]):
            wanted = sorted(tools[call.name])
            field = where if call_name else f"{where}.arguments"
            raise FieldError(field, f"{call_name}{call.name} takes exactly {wanted}")


class _BoundedFailure(FailureDiagnosisAnswer):
    decision_count: ClassVar[int] = 1
    tools: ClassVar[dict[str, dict[str, str]]] = {}
    decision: ClassVar[dict[str, Any]] = {}

    @model_validator(mode="after")
    def _in_range(self) -> _BoundedFailure:
        if self.decision_index > self.decision_count:
            raise _out_of_range("decision_index", self.decision_index, self.decision_count)
        if self.expected_decision is not None:
            _check_decision(self.expected_decision, self.tools)
        return self

    @classmethod
    def answer_json_schema(cls) -> dict[str, Any]:
        """The tight schema structured output sends for this job."""
        return {
            "type": "object",
            "title": "FailureDiagnosisAnswer",
            "properties": {
                "decision_index": {"type": "integer", "minimum": 1, "maximum": cls.decision_count},
                "reason": {"type": "string", "minLength": 1},
                "expected_decision": {"anyOf": [cls.decision, _TEXT, {"type": "null"}]},
            },
            "required": ["decision_index", "reason", "expected_decision"],
            "additionalProperties": False,
        }


class _BoundedSuboptimal(SuboptimalDiagnosisAnswer):
    decision_count: ClassVar[int] = 1

    @model_validator(mode="after")
    def _in_range(self) -> _BoundedSuboptimal:
        index = self.decision_idx
        if self.suboptimal and index is not None and index > self.decision_count:
            raise _out_of_range("decision_idx", index, self.decision_count)
        return self

    @classmethod
    def answer_json_schema(cls) -> dict[str, Any]:
        """The tight schema structured output sends for this job."""
        number = {"type": "integer", "minimum": 1, "maximum": cls.decision_count}
        return {
            "type": "object",
            "title": "SuboptimalDiagnosisAnswer",
            "properties": {
                "suboptimal": {"type": "boolean"},
                "decision_idx": {"anyOf": [number, {"type": "null"}]},
                "reason": {"type": "string"},
            },
            "required": ["suboptimal", "decision_idx", "reason"],
            "additionalProperties": False,
        }


BoundedT = TypeVar("BoundedT", _BoundedFailure, _BoundedSuboptimal)


# Building a model class costs milliseconds; jobs of one scenario ask for the same few.
# The key keeps the schema's key order: a grammar-enforcing server generates in that order.
@functools.lru_cache(maxsize=256)
def _narrowed(contract: type[BoundedT], namespace_json: str) -> type[BoundedT]:
    name = contract.__mro__[1].__name__  # the schema and the re-ask name the public contract
    namespace = {"__module__": __name__, **json.loads(namespace_json)}
    return cast(type[BoundedT], type(name, (contract,), namespace))


def failure_contract(steps: Sequence[JobStep]) -> type[FailureDiagnosisAnswer]:
    """The failure diagnosis contract of a trajectory whose diagnosable steps are `steps`.

    `decision_index` runs from 1 to `len(steps)`, and the tool calls of
    `expected_decision` name only the tools the agent was offered, each with exactly its
    own arguments. An expected decision given as text (MAGMA-GEN's form) is checked the
    same way when it follows the one-line convention of `gencoach.protocol.decision_text`;
    other text is passed on as it is. A refusal names the allowed range or tools (the
    backend is asked again once), and a server that enforces the schema cannot produce an
    out-of-range number or an unknown tool.
    """
    namespace = {
        "decision_count": len(steps),
        "tools": offered_tools(steps),
        "decision": decision_schema(steps),
    }
    return _narrowed(_BoundedFailure, json.dumps(namespace))


def suboptimal_contract(steps: Sequence[JobStep]) -> type[SuboptimalDiagnosisAnswer]:
    """The suboptimal diagnosis contract of a trajectory whose diagnosable steps are `steps`."""
    return _narrowed(_BoundedSuboptimal, json.dumps({"decision_count": len(steps)}))
