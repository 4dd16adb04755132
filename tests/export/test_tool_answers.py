"""Every tool call is answered by exactly one tool message: at a stage's end, after an
answer with several calls, in the chat, per-turn and preference rows and the library.

The row validator every export and library test runs (`tests.support.rows`) is tested
here too: it must catch what it claims to catch, or it would prove nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gencoach.library import CanonicalDatasetAdapter
from gencoach.library.build import build_library
from tests.support.exports import Export, read_rows
from tests.support.rows import conversation_problems, row_problems
from tests.support.saved_runs import FEEDBACK, candidate, run_config, situation, stage, write_run

OK = {"stage_0": stage(1, 0, 0, 1)}


def _two_robots(folder: Path) -> None:
    """c0 presses with two robots in one answer (one fails), the feedback follows; c1 ends."""
    calls = [
        {"name": "press_button", "arguments": {"id": "sw0"}, "target_robot_name": "panda"},
        {"name": "press_button", "arguments": {"id": "sw4"}, "target_robot_name": "kuka"},
    ]
    execution = {
        "panda": {"error_flag": "none", "failure_reason": None},
        "kuka": {"error_flag": "bad_call", "failure_reason": "sw4 is out of reach"},
    }
    first = candidate(
        0,
        {"say": "", "tool_calls": calls},
        "ongoing",
        OK,
        links=[(1, "next")],
        execution=execution,
    )
    last = candidate(1, {"say": "done", "tool_calls": []}, "optimal", OK)
    write_run(
        folder,
        [situation(0, None, [first]), situation(1, 0, [last], content=FEEDBACK, kind="env")],
        run_config(),
    )


def test_each_call_of_an_answer_has_its_own_tool_message(export: Export, source: Path) -> None:
    """The feedback answers the first call, the second call's recorded result the second:
    two tool messages, each naming its call, before the next answer."""
    _two_robots(source / "run")
    export("chat")
    row = read_rows(source / "datasets" / "chat" / "chat.jsonl")[-1]
    tools = [m for m in row["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["call_0_0", "call_0_1"]
    assert tools[0]["content"] == FEEDBACK
    assert json.loads(tools[1]["content"]) == {
        "target_robot_name": "kuka",
        "error_flag": "bad_call",
        "message": "sw4 is out of reach",
    }
    assert row_problems(row) == []


def test_per_turn_and_preference_rows_answer_the_call_cut_by_a_stage_end(
    export: Export, source: Path
) -> None:
    """In the coached run, c2's call ends stage 0: every per-turn row through it and every
    preference prompt through it answers it before the next stage's instruction."""
    from tests.support.saved_runs import coached_run

    write_run(source / "run", coached_run())
    export("chat", options={"per_turn": True}, dedupe=False)
    export("preference")
    rows = read_rows(source / "datasets" / "chat" / "chat.jsonl")
    pairs = read_rows(source / "datasets" / "preference" / "preference.jsonl")
    through = [row["messages"] for row in rows if row["candidate_id"] in (5, 6)]
    through += [pair["prompt"] for pair in pairs if pair["metadata"]["chosen"]["candidate_id"] == 6]
    assert through
    for messages in through:
        roles = [(m["role"], m.get("tool_call_id")) for m in messages]
        cut = roles.index(("tool", "call_2_0"))
        assert roles[cut + 1] == ("user", None)


def test_a_library_record_with_an_unanswered_call_is_not_structurally_eligible(
    tmp_path: Path,
) -> None:
    """A chat row whose call is followed by a user message is read, and marked
    structurally ineligible with the reason; the same row answered is eligible."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    opened = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
    ]
    closing = [{"role": "user", "content": "and now?"}, {"role": "assistant", "content": "ok"}]
    answered = [{"role": "tool", "tool_call_id": "c1", "content": "done"}]
    rows = [{"messages": opened + closing}, {"messages": opened + answered + closing}]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    build_library([path], tmp_path / "lib", "r1")
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        records = {len(r.trajectory.events): r.trajectory for r in lib.iter_records()}
    unanswered, complete = records[4], records[5]
    assert unanswered.eligibility["structural"] is False
    assert unanswered.eligibility["reasons"] == [
        "instruction e2 comes before tool call(s) c1 are answered"
    ]
    assert complete.eligibility["structural"] is True


CALL: dict[str, Any] = {
    "id": "c1",
    "type": "function",
    "function": {"name": "f", "arguments": "{}"},
}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
USER = {"role": "user", "content": "x"}
ASKS = {"role": "assistant", "content": "", "tool_calls": [CALL]}
STRAY = {"role": "tool", "tool_call_id": "c9", "content": "r"}
EMPTY_PART = [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": ""}]
FLAT = {"name": "f", "parameters": {"type": "object"}}


@pytest.mark.parametrize(
    ("messages", "tools", "problem"),
    [
        ([ASKS, USER], [TOOL], "messages.1 (user) comes before call(s) ['c1'] are answered"),
        ([USER, STRAY], [TOOL], "messages.1 answers no pending call ('c9')"),
        (
            [{"role": "assistant", "content": EMPTY_PART}],
            [TOOL],
            "messages.0.content.1 is an empty text part",
        ),
        (
            [USER, {"role": "assistant", "content": ""}],
            [],
            "messages.1 is an empty assistant message",
        ),
        ([USER], [FLAT], f"tools.0 is not {{type: function, function: ...}}: {FLAT!r}"),
    ],
)
def test_the_row_validator_catches_each_defect(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], problem: str
) -> None:
    """An unanswered call, a stray tool message, an empty part, an empty answer and a flat
    tool are each named; a call left pending by the last answer is the row's target."""
    assert conversation_problems(messages, tools) == [problem]
    target = [USER, ASKS]
    assert conversation_problems(target, [TOOL]) == []


def _status(robot: str, flag: str, message: str) -> dict[str, Any]:
    return {"robot_name": robot, "mess": message, "result": flag == "none", "error_flag": flag,
            "mess_is_public": False}  # fmt: skip


def test_calls_to_one_robot_are_answered_by_their_own_statuses(
    export: Export, source: Path
) -> None:
    """MAGMA-GEN's step summary lists one status per executed call: three presses by one
    robot, the first done and the others refused, are each judged by their own status (the
    answer is no failed step: one call succeeded), and the second call's tool message is
    its own status, not the robot's last."""
    calls = [
        {"name": "press_button", "arguments": {"id": button}, "target_robot_name": "panda"}
        for button in ("sw0", "sw9", "sw8")
    ]
    summary = {
        "per_robot_status": [
            _status("panda", "none", "sw0 pressed"),
            _status("panda", "bad_call", "sw9 does not exist"),
            _status("panda", "bad_call", "sw8 does not exist"),
        ],
        "stage_success": 0,
        "stage_state": 0,
    }
    first = candidate(0, {"say": "", "tool_calls": calls}, "ongoing", OK, links=[(1, "next")],
                      execution=summary)  # fmt: skip
    last = candidate(1, {"say": "done", "tool_calls": []}, "optimal", OK)
    write_run(
        source / "run",
        [situation(0, None, [first]), situation(1, 0, [last], content=FEEDBACK, kind="env")],
        run_config(),
    )
    export("chat")
    row = read_rows(source / "datasets" / "chat" / "chat.jsonl")[0]
    assert row["candidate_id"] == 0  # a target: not every call failed
    export("chat", options={"per_turn": True})
    second = read_rows(source / "datasets" / "chat" / "chat.jsonl")[-1]
    (answer,) = [m for m in second["messages"] if m.get("tool_call_id") == "call_0_1"]
    assert json.loads(answer["content"]) == {
        "target_robot_name": "panda",
        "error_flag": "bad_call",
        "message": "sw9 does not exist",
    }
