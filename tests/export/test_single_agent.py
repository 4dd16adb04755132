"""A single-agent run's rows name no robot: not in calls, tools or the default prompt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gencoach.library.sources.saves import SaveSource
from tests.export.expected import PRESS_TOOL, SYSTEM, press_turn
from tests.support.exports import Export, read_rows
from tests.support.saved_runs import coached_run, run_config, write_run

SINGLE_SYSTEM = SYSTEM.replace(
    "You are an agent that controls robots. Answer the user in words, or act by calling "
    "tools; every call names the robot that runs it.",
    "You are an agent. Answer the user in words, or act by calling tools.",
)


def _rows(source: Path, fmt: str) -> list[dict[str, Any]]:
    return read_rows(source / "datasets" / fmt / f"{fmt}.jsonl")


def _single_agent_run(source: Path) -> None:
    write_run(source / "run", coached_run(plain=True), run_config(single_agent=True))


def _calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        json.loads(call["function"]["arguments"])
        for message in messages
        for call in message.get("tool_calls") or []
    ]


def test_chat_rows_of_a_single_agent_run_name_no_robot(export: Export, source: Path) -> None:
    """Calls, tools, the default prompt and the recorded results that answer calls cut by
    a stage end name no robot."""
    _single_agent_run(source)
    export("chat", dedupe=False)
    rows = _rows(source, "chat")
    assert rows
    for row in rows:
        assert row["messages"][0]["content"] == SINGLE_SYSTEM
        assert "robot" not in row["messages"][0]["content"].split("\n\n")[0]
        calls = _calls(row["messages"])
        assert calls
        assert all(set(call) == {"id"} for call in calls), calls
        answers = [m["content"] for m in row["messages"] if m["role"] == "tool"]
        assert all("target_robot_name" not in answer for answer in answers), answers
        assert row["tools"] == [
            {
                "type": "function",
                "function": {
                    **PRESS_TOOL["function"],
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string", "description": "id of the button to press"}
                        },
                        "required": ["id"],
                    },
                },
            }
        ]
    recorded = {"error_flag": "none", "message": ""}  # c2's call, cut by its stage's end
    assert any(
        json.loads(m["content"]) == recorded
        for row in rows
        for m in row["messages"]
        if m["role"] == "tool" and m["content"].startswith('{"error_flag"')
    )


def test_an_explicit_system_prompt_is_kept_for_a_single_agent_run(
    export: Export, source: Path
) -> None:
    _single_agent_run(source)
    export("chat", dedupe=False, options={"system_prompt": "Play the grid."})
    (first, *_) = _rows(source, "chat")
    assert first["messages"][0]["content"].startswith("Play the grid.\n\n")


def test_preference_rows_of_a_single_agent_run_name_no_robot(export: Export, source: Path) -> None:
    _single_agent_run(source)
    export("preference")
    rows = _rows(source, "preference")
    assert rows
    for row in rows:
        assert row["prompt"][0]["content"] == SINGLE_SYSTEM
        calls = _calls(row["prompt"] + row["chosen"] + row["rejected"])
        assert calls
        assert all("target_robot_name" not in call for call in calls), calls
        assert "target_robot_name" not in json.dumps(row["tools"])


def test_a_multi_robot_run_keeps_its_robot_names(export: Export, source: Path) -> None:
    """The default (MAGMA's saves carry no flag): every call names its robot."""
    write_run(source / "run", coached_run(plain=True))
    export("chat", dedupe=False)
    rows = _rows(source, "chat")
    assert rows[0]["messages"][0]["content"] == SYSTEM
    assert press_turn(0, "sw0")["tool_calls"][0] in rows[0]["messages"][2]["tool_calls"]


def test_the_library_reads_a_single_agent_save_without_robot_names(source: Path) -> None:
    _single_agent_run(source)
    payloads = list(SaveSource(source / "run", "run").open().payloads)
    assert payloads
    for payload in payloads:
        assert "robot" not in payload["system"].split("\n\n")[0]
        assert "target_robot_name" not in json.dumps(payload["tools"])
        messages = [event["message"] for event in payload["events"] if "message" in event]
        assert all("target_robot_name" not in call for call in _calls(messages))
        assert all("target_robot_name" not in m["content"] for m in messages if m["role"] == "tool")
