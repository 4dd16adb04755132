"""Trajectories as OpenAI-style chat messages and tools, shared by `chat` and `preference`.

`turns` gives each step's messages (`instruction_messages`, then `assistant_message`);
`system_message` and `function_tool` give a row's opening and tools. A single-agent run
(`robots` false) names no robot anywhere. See docs/export.md (`chat`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from gencoach.export.history import Step
from gencoach.export.inputs import RULES_KEY, JsonObject, ModelInput
from gencoach.export.tool_failures import call_result, result_text
from gencoach.protocol import (
    AgentDecision,
    AgentInput,
    AgentInstruction,
    CandidateRecord,
    ToolCall,
)

Message = dict[str, Any]

DEFAULT_SYSTEM_PROMPT: Final = (
    "You are an agent that controls robots. Answer the user in words, or act by calling "
    "tools; every call names the robot that runs it."
)
SINGLE_AGENT_SYSTEM_PROMPT: Final = (
    "You are an agent. Answer the user in words, or act by calling tools."
)
ROBOT_ARGUMENT: Final = "target_robot_name"
_ROBOT_SCHEMA: Final = {"type": "string", "description": "name of the robot that runs the call"}
_JSON_TYPES: Final = {
    "str": "string",
    "string": "string",
    "int": "integer",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "bool": "boolean",
    "boolean": "boolean",
    "list": "array",
    "array": "array",
    "dict": "object",
    "object": "object",
}
_REASONING_KEYS: Final = ("reasoning", "thinking")


def call_id(candidate_id: int, index: int) -> str:
    """A tool call id, unique in a conversation and stable across exports."""
    return f"call_{candidate_id}_{index}"


def default_system_prompt(single_agent: bool) -> str:
    """The system prompt of a run's rows when the export names none (a single-agent
    run's, `single_agent` in its `run.started` and save, speaks of no robots)."""
    return SINGLE_AGENT_SYSTEM_PROMPT if single_agent else DEFAULT_SYSTEM_PROMPT


def _parameters(tool: JsonObject, robots: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    schema = tool.get("parameters")
    if isinstance(schema, dict):
        given = schema.get("properties")
        properties = dict(given) if isinstance(given, dict) else {}
        names = schema.get("required")
        required = (
            [name for name in names if isinstance(name, str)] if isinstance(names, list) else []
        )
    else:
        arguments = tool.get("arguments")
        for name, spec in (arguments if isinstance(arguments, dict) else {}).items():
            described = spec if isinstance(spec, dict) else {}
            kind = _JSON_TYPES.get(str(described.get("type", "str")).lower(), "string")
            properties[name] = {"type": kind, "description": str(described.get("description", ""))}
            required.append(name)
    properties.pop(ROBOT_ARGUMENT, None)
    required = [name for name in required if name != ROBOT_ARGUMENT]
    if not robots:
        return {"type": "object", "properties": properties, "required": required}
    return {
        "type": "object",
        "properties": {ROBOT_ARGUMENT: dict(_ROBOT_SCHEMA), **properties},
        "required": [ROBOT_ARGUMENT, *required],
    }


def function_tool(tool: JsonObject, *, robots: bool = True) -> dict[str, Any]:
    """A MAGMA (or already OpenAI-shaped) tool as an OpenAI function tool (`robots`
    false: with no `target_robot_name` parameter).

    `{type: "function", function: {name, description, parameters}}`, MAGMA's `arguments`
    turned into a JSON Schema with the robot as a required string parameter.
    """
    inner = tool.get("function")
    source: JsonObject = (
        inner if tool.get("type") == "function" and isinstance(inner, dict) else tool
    )
    return {
        "type": "function",
        "function": {
            "name": str(source.get("name", "")),
            "description": str(source.get("description", "")),
            "parameters": _parameters(source, robots),
        },
    }


def system_message(prompt: str, seen: ModelInput) -> Message:
    """The system message: the prompt, then the attributes and rules the agent was given."""
    parts = [prompt, "Attributes: " + json.dumps(seen.attributes, ensure_ascii=False)]
    if seen.rules:
        parts.append("Rules:\n" + "\n".join(f"- {rule}" for rule in seen.rules))
    return {"role": "system", "content": "\n\n".join(parts)}


def opening_key(prompt: str, source: AgentInput) -> list[Any]:
    """What the system message and the tools show of an input, unshuffled: inputs with
    equal keys open their conversations alike (what else the memory holds is not shown)."""
    rules = source.memory.get(RULES_KEY)
    return [prompt, source.attributes, rules if isinstance(rules, list) else [], source.tools]


def recorded_result(candidate: CandidateRecord, index: int, call: ToolCall, robots: bool) -> str:
    """The result of the answer's call `index` as the simulator recorded it in its
    execution (`call_result`), as JSON: `{"target_robot_name"?, "error_flag", "message"}`
    (the flag and the failure reason or message; `"error_flag": null, "message": "no
    result recorded"` when the execution holds none)."""
    result = call_result(candidate.execution, index, call.target_robot_name)
    record: dict[str, Any] = {ROBOT_ARGUMENT: call.target_robot_name} if robots else {}
    if result is None:
        record.update(error_flag=None, message="no result recorded")
    else:
        flag = result.get("error_flag")
        record.update(
            error_flag=flag if isinstance(flag, str) else None, message=result_text(result)
        )
    return json.dumps(record, ensure_ascii=False)


def instruction_messages(
    instruction: AgentInstruction, previous: CandidateRecord | None, *, robots: bool = True
) -> list[Message]:
    """What comes between the previous answer and the next: one `tool` message answering
    each of its calls, then the instruction as a `user` message unless it was feedback.

    Every tool call is answered by exactly one `tool` message before anything else is
    said. Environment feedback answers the first call (the generator reports one feedback
    for all of an answer's calls); each other call is answered by the result the
    simulator recorded for it (`recorded_result`). A call cut by a stage end, whose next
    situation opens with the next stage's `user` instruction, is answered the same way,
    before that instruction. Feedback with no call before it is a `user` message.
    """
    calls = previous.output.tool_calls if previous is not None and previous.output else []
    if previous is None or not calls:
        return [{"role": "user", "content": instruction.content}]
    feedback = instruction.type == "env"
    messages: list[Message] = [
        {
            "role": "tool",
            "tool_call_id": call_id(previous.id, index),
            "name": call.name,
            "content": instruction.content
            if feedback and index == 0
            else recorded_result(previous, index, call, robots),
        }
        for index, call in enumerate(calls)
    ]
    if not feedback:
        messages.append({"role": "user", "content": instruction.content})
    return messages


def _call_arguments(call: ToolCall, robots: bool) -> dict[str, Any]:
    arguments = {k: v for k, v in call.arguments.items() if k != ROBOT_ARGUMENT}
    return {ROBOT_ARGUMENT: call.target_robot_name, **arguments} if robots else arguments


def assistant_message(candidate: CandidateRecord, *, robots: bool = True) -> Message:
    """An answer as an assistant message (no output: an empty one): its words as content,
    its calls as `tool_calls` whose `arguments` is a JSON string naming the robot
    (`target_robot_name`) first; `robots` false, its calls name no robot."""
    decision = candidate.output or AgentDecision()
    message: Message = {"role": "assistant", "content": decision.say}
    if decision.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id(candidate.id, index),
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": json.dumps(_call_arguments(call, robots), ensure_ascii=False),
                },
            }
            for index, call in enumerate(decision.tool_calls)
        ]
    return message


Turn = tuple[tuple[Message, ...], Message]
"""A step as the messages before its answer (see `instruction_messages`) and the answer."""


def turns(
    steps: Sequence[Step], known: dict[int, Turn] | None = None, *, robots: bool = True
) -> list[Turn]:
    """Each step as (the messages before the answer, the answer), root first.

    A step's messages depend on its candidate and the one before it alone (and the save's
    `robots`), so `known` (one per save) lets the examples of a save share them; callers
    copy a message before changing it.
    """
    pairs: list[Turn] = []
    previous: CandidateRecord | None = None
    for step in steps:
        pair = known.get(step.candidate.id) if known is not None else None
        if pair is None:
            opening = instruction_messages(
                step.situation.input.instruction, previous, robots=robots
            )
            pair = (tuple(opening), assistant_message(step.candidate, robots=robots))
            if known is not None:
                known[step.candidate.id] = pair
        pairs.append(pair)
        previous = step.candidate
    return pairs


def reasoning_of(candidate: CandidateRecord) -> str:
    """The agent's internal reasoning: the `reasoning`/`thinking` texts of its internal steps."""
    texts = []
    for step in candidate.internal_steps:
        for key in _REASONING_KEYS:
            value = step.get(key)
            if isinstance(value, str) and value:
                texts.append(value)
                break
    return "\n\n".join(texts)


def as_parts(message: Message, thinking: str = "") -> Message:
    """The message with content parts: an optional thinking part, then the text when
    there is any (a call-only answer without reasoning has no part at all)."""
    parts: list[dict[str, str]] = []
    if thinking:
        parts.append({"type": "thinking", "thinking": thinking})
    if message["content"]:
        parts.append({"type": "text", "text": message["content"]})
    return {**message, "content": parts}
