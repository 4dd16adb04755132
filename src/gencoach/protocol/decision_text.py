"""A decision written as one line of text, for diagnoses' `expected_decision`.

Teachers and LLMs describe the decision they expect as text; `parse_decision` turns text
that follows this convention back into a decision, `format_decision` writes one:
`panda.press_button(id="sw4"); ur5.take_obj(obj="red_cube"); say("the answer is 42")`.
"""

from __future__ import annotations

import json
import re

from gencoach.protocol.agent import AgentDecision, ToolCall

_CALL = re.compile(r"^(?P<robot>[\w-]+)\.(?P<tool>\w+)\((?P<args>.*)\)$", re.S)
_SAY = re.compile(r"^say\((?P<text>\".*\")\)$", re.S)
_ARG = re.compile(r"\s*(?P<name>\w+)\s*=\s*")


def format_decision(decision: AgentDecision) -> str:
    """The decision as one line of text."""
    items = [
        f"{call.target_robot_name}.{call.name}("
        + ", ".join(f"{key}={json.dumps(value)}" for key, value in call.arguments.items())
        + ")"
        for call in decision.tool_calls
    ]
    if decision.say:
        items.append(f"say({json.dumps(decision.say)})")
    return "; ".join(items)


def _split(text: str, separator: str) -> list[str]:
    """Split on `separator` outside JSON strings and brackets."""
    parts: list[str] = []
    current: list[str] = []
    depth, quoted, escaped = 0, False, False
    for char in text:
        if quoted:
            escaped = char == "\\" and not escaped
            quoted = not (char == '"' and not escaped)
        elif char == '"':
            quoted = True
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == separator and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    parts.append("".join(current).strip())
    return [part for part in parts if part]


def _arguments(text: str) -> dict[str, object] | None:
    arguments: dict[str, object] = {}
    for item in _split(text, ","):
        match = _ARG.match(item)
        if match is None:
            return None
        try:
            arguments[match["name"]] = json.loads(item[match.end() :])
        except ValueError:
            return None
    return arguments


def parse_decision(text: str) -> AgentDecision | None:
    """The decision the text describes, or None when it does not follow the convention.

    Calls are `<robot>.<tool>(<name>=<JSON value>, ...)`, separated by `;`; a `say("...")`
    item (a JSON string) sets what the agent says. Anything else does not parse.
    """
    calls: list[ToolCall] = []
    say = ""
    items = _split(text.strip(), ";")
    if not items:
        return None
    for item in items:
        spoken = _SAY.match(item)
        if spoken is not None:
            try:
                say = json.loads(spoken["text"])
            except ValueError:
                return None
            continue
        call = _CALL.match(item)
        arguments = _arguments(call["args"]) if call is not None else None
        if call is None or arguments is None:
            return None
        calls.append(
            ToolCall.model_validate(
                {"name": call["tool"], "arguments": arguments, "target_robot_name": call["robot"]}
            )
        )
    return AgentDecision(say=say, tool_calls=calls)


def decision_line(expected: AgentDecision | str) -> str:
    """An expected decision as the coaching protocol carries it: a decision object as one
    line of text, text that follows the convention in its normal form, other text as given."""
    if isinstance(expected, str):
        decision = parse_decision(expected)
        return format_decision(decision) if decision is not None else expected.strip()
    return format_decision(expected)
