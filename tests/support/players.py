"""Scripted agent behaviours for the generator tests: play a scenario right, or err on purpose.

Each player is a `ScriptedAgent.answer` script: given the input and the candidate index,
the fields of the output to send. Players keep what they know in the memory, so they
also show that the generator carries each candidate's memory to the next situation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Json = dict[str, Any]
Script = Callable[[Json, int], Json]

BUTTONS_TASK = re.compile(r"Press (\w+) twice, then (\w+)\.")
_SHAPE = re.compile(r"What colour is the (\w+)\?")


def call(name: str, robot: str = "panda", **arguments: Any) -> Json:
    """A tool call as an agent sends it."""
    return {"name": name, "arguments": arguments, "target_robot_name": robot}


def act(*calls: Json, say: str = "") -> Json:
    """A decision made of these calls."""
    return {"say": say, "tool_calls": list(calls)}


def wrong_button(sequence: list[str], done: int) -> Json:
    """Press a button that is not the next one of the sequence."""
    return act(call("press_button", id="sw5" if sequence[done] != "sw5" else "sw4"))


MISTAKES: dict[str, Callable[[list[str], int], Json]] = {
    "wrong_button": wrong_button,
    "say_and_act": lambda seq, done: act(call("press_button", id=seq[done]), say="pressing"),
    "unknown_tool": lambda seq, done: act(call("fly", id=seq[done])),
    "missing_argument": lambda seq, done: act(call("press_button")),
    "extra_argument": lambda seq, done: act(call("press_button", id=seq[done], force="1")),
    "unknown_robot": lambda seq, done: act(call("press_button", robot="r2d2", id=seq[done])),
    "silence": lambda seq, done: act(say="I am done."),
}


def buttons_player(mistake: str | None = "wrong_button", at: int = 1) -> Script:
    """Candidate indexes other than `at` press the next button; candidate `at` errs."""

    def answer(item: Json, index: int) -> Json:
        memory = dict(item["memory"])
        instruction = item["instruction"]
        if instruction["type"] == "user":
            found = BUTTONS_TASK.search(instruction["content"])
            assert found is not None, instruction
            first, second = found.groups()
            memory = {"sequence": [first, first, second], "done": 0, "seen": 0}
        sequence, done = memory["sequence"], memory["done"]
        memory["seen"] += 1
        coaching = item.get("extra_keys", {}).get("coaching")
        if coaching is not None:  # a reinjected correction: say what the coach decided
            memory["done"] = done + 1
            return {"output": coaching["decision"], "memory": memory}
        if mistake is not None and index == at:
            return {"output": MISTAKES[mistake](sequence, done), "memory": memory}
        memory["done"] = done + 1
        return {"output": act(call("press_button", id=sequence[done])), "memory": memory}

    return answer


def two_stage_player() -> Script:
    """Take the object named by its colour and shape, then depose it where the next order says."""

    def answer(item: Json, index: int) -> Json:
        content = item["instruction"]["content"]
        objects = item["attributes"]["objects"]
        if content.startswith("Take the "):
            colour, shape = content.removeprefix("Take the ").rstrip(".").split()
            obj = next(
                o
                for o, seen in objects.items()
                if (seen["colour"], seen["shape"]) == (colour, shape)
            )
            return {"output": act(call("take_obj", obj=obj))}
        target = content.removeprefix("Now put it in the ").rstrip(".")
        holder = next(r for r, held in item["attributes"]["holding"].items() if held)
        return {"output": act(call("depose", robot=holder, target=target))}

    return answer


def text_player(wrong_at: int = 1) -> Script:
    """Answer the colour question right, except candidate `wrong_at`, which says "green"."""

    def answer(item: Json, index: int) -> Json:
        found = _SHAPE.search(item["instruction"]["content"])
        assert found is not None
        colour = item["attributes"]["objects"][found[1]]["colour"]
        return {"output": act(say="green" if index == wrong_at else colour)}

    return answer
