"""Conversation rows in the shapes training sets come in, as OpenAI-style messages.

`messages_of` reads a row's messages (OpenAI chat, ShareGPT, TRL prompt/completion);
`canonical_tools` gives its tools in one shape. See docs/library.md ("Sources").
"""

from __future__ import annotations

import json
from typing import Any

from gencoach.export.formats.conversation import function_tool

Message = dict[str, Any]

_SHAREGPT_ROLES = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "observation": "tool",
    "tool": "tool",
}


def _sharegpt(turns: object, system: object) -> list[Message]:
    """ShareGPT's `conversations: [{from, value}]` as messages: `from` is one of `system`,
    `human` (`user`), `gpt` (`assistant`, `chatgpt`), `function_call` (a JSON `{name,
    arguments}` becoming an assistant tool call) and `observation` (its result); a
    top-level `system` opens the conversation (LLaMA-Factory's layout)."""
    if not isinstance(turns, list):
        raise ValueError("conversations must be a list of {from, value}")
    if system is not None and not isinstance(system, str):
        raise ValueError("system must be a string")
    messages: list[Message] = [{"role": "system", "content": system}] if system else []
    calls = 0
    for index, turn in enumerate(turns):
        where = f"conversations.{index}"
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise ValueError(f"{where} needs `from` and a string `value`")
        speaker = turn.get("from")
        if speaker == "function_call":
            try:
                call = json.loads(turn["value"])
            except ValueError:
                raise ValueError(f"{where}: a function_call value must be JSON") from None
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise ValueError(f"{where}: a function_call needs a name")
            calls += 1
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": f"call_{calls}", "type": "function",
                 "function": {"name": call["name"], "arguments": call.get("arguments", {})}}
            ]})  # fmt: skip
            continue
        role = _SHAREGPT_ROLES.get(str(speaker))
        if role is None:
            known = ", ".join([*_SHAREGPT_ROLES, "function_call"])
            raise ValueError(f"{where}: unknown speaker {speaker!r}; one of: {known}")
        message: Message = {"role": role, "content": turn["value"]}
        if role == "tool":
            message["tool_call_id"] = f"call_{calls}"
        messages.append(message)
    return messages


def _trl(prompt: object, completion: object) -> list[Message]:
    """TRL's `prompt` and `completion`, as strings (standard) or as lists of messages
    (conversational). Only the completion is supervised: assistant messages in the prompt
    are context (`trainable: false`)."""
    if isinstance(prompt, str) and isinstance(completion, str):
        return [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": completion},
        ]
    if not (isinstance(prompt, list) and isinstance(completion, list)):
        raise ValueError("prompt and completion must both be strings or both lists of messages")
    context = [
        {**message, "trainable": False}
        if isinstance(message, dict) and message.get("role") == "assistant"
        else message
        for message in prompt
    ]
    return [*context, *completion]


def _canonical_tool(tool: object, index: int) -> dict[str, Any]:
    inner = tool.get("function") if isinstance(tool, dict) else None
    source = inner if isinstance(tool, dict) and isinstance(inner, dict) else tool
    if not isinstance(source, dict) or not isinstance(source.get("name"), str):
        raise ValueError(f"tools.{index} needs a name (a function tool or {{name, ...}})")
    if "parameters" not in source and "arguments" in source:
        return function_tool(source, robots=False)
    parameters = source.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise ValueError(f"tools.{index}.parameters must be a JSON Schema object")
    schema = {"type": "object", "properties": {}, **(parameters or {})}
    description = source.get("description")
    return {
        "type": "function",
        "function": {
            "name": source["name"],
            "description": description if isinstance(description, str) else "",
            "parameters": schema,
        },
    }


def canonical_tools(value: object) -> list[dict[str, Any]]:
    """A row's tools in the one canonical shape, OpenAI's function tool `{type:
    "function", function: {name, description, parameters}}` (ShareGPT's flat `{name,
    description, parameters}` is nested, MAGMA's `arguments` become a JSON Schema):
    `value` is a list, or a JSON string of one (LLaMA-Factory writes that)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except ValueError:
            raise ValueError("tools is a string but not JSON") from None
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError("tools must be a list of objects")
    return [_canonical_tool(tool, index) for index, tool in enumerate(value)]


def messages_of(row: dict[str, Any]) -> tuple[str, list[Message]]:
    """The row's shape (`openai`, `sharegpt`, `trl`) and its messages. OpenAI chat (and
    TRL's conversational language modelling) `messages` are taken as they are."""
    if "messages" in row:
        return "openai", row["messages"]
    if "conversations" in row:
        return "sharegpt", _sharegpt(row["conversations"], row.get("system"))
    if "prompt" in row and "completion" in row:
        return "trl", _trl(row["prompt"], row["completion"])
    raise ValueError(
        "is not a conversation: needs `messages` (OpenAI chat), `conversations` "
        "(ShareGPT) or `prompt` and `completion` (TRL)"
    )


ROW_KEYS = {"messages", "conversations", "system", "prompt", "completion", "tools", "metadata"}
"""The keys that are the conversation itself; the others are metadata."""
