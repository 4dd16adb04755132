"""Whether an answer's step failed: every call a harness error or one its tool's own
failure predicate recognises.

`step_failed` decides it, from each call's recorded result (`call_result`) and the tools'
predicates (`ToolFailures`). The chat export and the trajectory library's save source
(its loss mask) ask it. See docs/export.md ("A tool's own failure recogniser").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

import re2
from pydantic import JsonValue

from gencoach.errors import ExportError
from gencoach.export.callables import resolve_callable
from gencoach.protocol import CandidateRecord

FailurePredicate = Callable[[str], bool]
_MESSAGE_KEYS: Final = ("failure_reason", "mess")


def _quiet_options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False
    return options


def pattern_predicate(pattern: str, tool: str = "") -> FailurePredicate:
    """A predicate searching `pattern` (RE2, linear time) in a result's text."""
    try:
        compiled = re2.compile(pattern, _quiet_options())
    except re2.error as error:
        detail = error.args[0].decode() if isinstance(error.args[0], bytes) else str(error)
        where = f" of tool {tool!r}" if tool else ""
        raise ExportError(
            f"failure pattern{where} {pattern!r} is not a linear-time (RE2) regular "
            f"expression: {detail}"
        ) from None

    def failed(result: str) -> bool:
        return compiled.search(result) is not None

    return failed


class ToolFailures:
    """Each tool's own failure predicate, by tool name; tools without one have none."""

    def __init__(self, predicates: Mapping[str, FailurePredicate] | None = None) -> None:
        self.predicates = dict(predicates or {})

    @classmethod
    def parse(cls, declaration: JsonValue, where: str = "tool_failures") -> ToolFailures:
        """Read `{tool: "pattern" | {"pattern": str} | {"callable": "module:function"}}`:
        an RE2 pattern searched in the result text, or a callable `(result: str) -> bool`."""
        expected = (
            f'{where} must be an object of tool name → "pattern", {{"pattern": str}} or '
            '{"callable": "module:function"}'
        )
        if not isinstance(declaration, dict):
            raise ExportError(expected)
        predicates: dict[str, FailurePredicate] = {}
        for tool, spec in declaration.items():
            if isinstance(spec, str):
                predicates[tool] = pattern_predicate(spec, tool)
            elif isinstance(spec, dict) and set(spec) == {"pattern"}:
                pattern = spec["pattern"]
                if not isinstance(pattern, str):
                    raise ExportError(f"{expected}; got {spec!r} for {tool!r}")
                predicates[tool] = pattern_predicate(pattern, tool)
            elif isinstance(spec, dict) and set(spec) == {"callable"}:
                reference = spec["callable"]
                if not isinstance(reference, str):
                    raise ExportError(f"{expected}; got {spec!r} for {tool!r}")
                predicates[tool] = resolve_callable(reference, f"failure predicate of {tool!r}")
            else:
                raise ExportError(f"{expected}; got {spec!r} for {tool!r}")
        return cls(predicates)

    def merged(self, other: ToolFailures) -> ToolFailures:
        """These predicates, with `other`'s replacing them tool by tool."""
        return ToolFailures({**self.predicates, **other.predicates})

    def recognises(self, tool: str, result: str) -> bool:
        """Whether the tool's own predicate calls this result a failure."""
        predicate = self.predicates.get(tool)
        return predicate is not None and bool(predicate(result))


NO_PREDICATES: Final = ToolFailures()


def robot_results(execution: Mapping[str, JsonValue]) -> dict[str, Mapping[str, JsonValue]]:
    """Each robot's execution result, from either shape a save may hold.

    MAGMA-GEN's step summary lists them under `per_robot_status` (`robot_name`,
    `error_flag`, ...) or keys them by robot there; saves written by gencoach key them by
    robot at the top.
    """
    nested = execution.get("per_robot_status")
    if isinstance(nested, list):
        return {
            str(entry["robot_name"]): entry
            for entry in nested
            if isinstance(entry, dict) and isinstance(entry.get("robot_name"), str)
        }
    by_robot = nested if isinstance(nested, dict) else execution
    return {robot: result for robot, result in by_robot.items() if isinstance(result, dict)}


def call_result(
    execution: Mapping[str, JsonValue], index: int, robot: str
) -> Mapping[str, JsonValue] | None:
    """The recorded result of an answer's call `index`, sent to `robot`: MAGMA-GEN's step
    summary lists one status per executed call, in order, so the call's own entry when it
    names that robot (several calls to one robot each have theirs); else the robot's
    result (gencoach's shape keeps one per robot); None when nothing was recorded."""
    statuses = execution.get("per_robot_status")
    if isinstance(statuses, list) and index < len(statuses):
        entry = statuses[index]
        if isinstance(entry, dict) and entry.get("robot_name") == robot:
            return entry
    return robot_results(execution).get(robot)


def result_text(result: Mapping[str, JsonValue]) -> str:
    """The text of a robot's result: its `failure_reason` (gencoach's execution shape) or
    `mess` (MAGMA-GEN's step summary), else empty."""
    for key in _MESSAGE_KEYS:
        value = result.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def step_failed(candidate: CandidateRecord, failures: ToolFailures = NO_PREDICATES) -> bool:
    """Whether the answer called tools and every call failed.

    A call fails when its result carries an `error_flag` other than `none` (the
    executor's verdict), or when its tool's predicate recognises the result's text (a
    rejected input the executor ran without complaint). A call without a recorded result
    counts as not failed, so doubt keeps the turn.
    """
    if candidate.output is None or not candidate.output.tool_calls:
        return False
    for index, call in enumerate(candidate.output.tool_calls):
        result = call_result(candidate.execution, index, call.target_robot_name)
        if result is None:
            return False
        flag = result.get("error_flag")
        harness_error = flag is not None and flag != "none"
        if not harness_error and not failures.recognises(call.name, result_text(result)):
            return False
    return True
