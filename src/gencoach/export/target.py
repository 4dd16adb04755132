"""Exporting for another agent (option `as`): a parent's good runs as a child's data.

`Target` reads the option and writes rows as the target agent's: its instructions, its
reasoning (`Target.reasoning`), its tools and its name (`Target.relabel`). See
docs/export.md ("Export for another agent: `as`").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import JsonValue

from gencoach.errors import ExportError
from gencoach.export.callables import resolve_callable
from gencoach.export.inputs import JsonObject

_KEYS = {"agent_id", "agent_version", "instructions", "reasoning_transform", "tools"}
_EXPECTED = (
    'an object {"agent_id": str, "agent_version"?: str, "instructions"?: str, '
    '"reasoning_transform"?: "module:function", "tools"?: [tool, ...]}'
)


@dataclass(frozen=True)
class Target:
    """The agent the rows are written for; only `agent_id` is required."""

    agent_id: str
    agent_version: str | None = None
    instructions: str | None = None
    transform: Callable[[str], Any] | None = None
    tools: tuple[JsonObject, ...] | None = None
    """The tools the target is offered (MAGMA or OpenAI shape), None: the save's."""

    @classmethod
    def parse(cls, value: JsonValue, where: str = "option 'as'") -> Target:
        """Read the option, resolving the transform (a clear error for a bad reference)."""
        if not isinstance(value, dict) or set(value) - _KEYS:
            raise ExportError(f"{where} must be {_EXPECTED}, got {value!r}")
        agent_id, version = value.get("agent_id"), value.get("agent_version")
        instructions, reference = value.get("instructions"), value.get("reasoning_transform")
        if not isinstance(agent_id, str) or not agent_id:
            raise ExportError(f"{where} must be {_EXPECTED}, got {value!r}")
        for key, item in (("agent_version", version), ("instructions", instructions)):
            if item is not None and not isinstance(item, str):
                raise ExportError(f"{where}: {key} must be a string, got {item!r}")
        if reference is not None and not isinstance(reference, str):
            raise ExportError(f"{where}: reasoning_transform must be a string, got {reference!r}")
        transform = (
            None if reference is None else resolve_callable(reference, "the reasoning transform")
        )
        return cls(
            agent_id,
            version if isinstance(version, str) else None,
            instructions if isinstance(instructions, str) else None,
            transform,
            _tools(value.get("tools"), where),
        )

    def unknown_calls(self, names: Iterable[str]) -> list[str]:
        """Of the tools a row calls, those the target is not offered (none without `tools`)."""
        if self.tools is None:
            return []
        offered = {_name(tool) for tool in self.tools}
        return sorted({name for name in names if name not in offered})

    def reasoning(self, text: str) -> str:
        """The reasoning as the target thinks it: the transform, a Python callable
        `(reasoning: str) -> str`, applied before the text becomes a thinking part."""
        if self.transform is None or not text:
            return text
        result = self.transform(text)
        if not isinstance(result, str):
            raise ExportError(
                f"the reasoning transform returned a {type(result).__name__}, not a string"
            )
        return result

    def relabel(self, row: dict[str, Any]) -> None:
        """Name the target as the row's agent, the save's producer as its source."""
        row["source_agent_id"] = row.get("agent_id")
        row["source_agent_version"] = row.get("agent_version")
        row["agent_id"] = self.agent_id
        row["agent_version"] = self.agent_version


def _name(tool: JsonObject) -> str:
    inner = tool.get("function")
    source = inner if tool.get("type") == "function" and isinstance(inner, dict) else tool
    name = source.get("name")
    return name if isinstance(name, str) else ""


def _tools(value: JsonValue, where: str) -> tuple[JsonObject, ...] | None:
    """The option's `tools`: a list of tools, each with a name."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise ExportError(f"{where}: tools must be a list of tools, got {value!r}")
    for index, tool in enumerate(value):
        if not isinstance(tool, dict) or not _name(tool):
            raise ExportError(
                f"{where}: tools[{index}] must be a MAGMA tool {{name, description, arguments}} "
                f"or an OpenAI function tool, got {tool!r}"
            )
    return tuple(tool for tool in value if isinstance(tool, dict))
