"""`chat` options of the seed: reasoning defaults, per-turn thinking, `as`, tool failure
predicates, the prompt/completion shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gencoach.errors import ExportError
from gencoach.export import ExportSettings, run_export
from gencoach.export.tool_failures import ToolFailures
from tests.support.exports import Export, read_rows
from tests.support.saved_runs import (
    FEEDBACK,
    candidate,
    executed,
    press,
    run_config,
    say,
    situation,
    stage,
    write_run,
)

OK = {"stage_0": stage(1, 0, 0, 1)}


def _chat(source: Path) -> list[dict[str, Any]]:
    return read_rows(source / "datasets" / "chat" / "chat.jsonl")


def _thinking_run(folder: Path) -> None:
    """Two turns, each with its reasoning: press sw0 ("first sw0"), then say done."""
    first = candidate(
        0, press("sw0"), "ongoing", OK, links=[(1, "next")], execution=executed("sw0"),
        internal_steps=[{"reasoning": "first sw0"}],
    )  # fmt: skip
    second = candidate(1, say("done"), "optimal", OK, internal_steps=[{"thinking": "all done"}])
    write_run(
        folder,
        [situation(0, None, [first]), situation(1, 0, [second], content=FEEDBACK, kind="env")],
    )


def _parts(message: dict[str, Any]) -> list[str]:
    return [part["type"] for part in message["content"]]


def test_reasoning_is_on_by_default_as_thinking_parts(export: Export, source: Path) -> None:
    """A trainer of a reasoning model learns the reasoning behind each answer: by default
    it is a thinking part before the text, every message of the file using parts; a
    call-only answer has no text part."""
    _thinking_run(source / "run")
    export("chat")
    last = _chat(source)[-1]
    assistants = [m for m in last["messages"] if m["role"] == "assistant"]
    assert [_parts(m) for m in assistants] == [["thinking"], ["thinking", "text"]]
    assert assistants[0]["content"][0] == {"type": "thinking", "thinking": "first sw0"}
    assert all(isinstance(m["content"], list) for row in _chat(source) for m in row["messages"])


def test_without_reasoning_content_stays_text(export: Export, source: Path) -> None:
    """`reasoning: false` leaves the reasoning out and keeps string contents."""
    _thinking_run(source / "run")
    export("chat", options={"reasoning": False})
    assert all(isinstance(m["content"], str) for row in _chat(source) for m in row["messages"])


def test_per_turn_rows_drop_the_thinking_of_earlier_answers(export: Export, source: Path) -> None:
    """Harnesses do not send earlier reasoning back: only each row's last answer thinks."""
    _thinking_run(source / "run")
    export("chat", options={"per_turn": True})
    rows = _chat(source)
    assert [row["whole_run"] for row in rows] == [False, False]
    second = rows[1]["messages"]
    assert second[2]["tool_calls"]
    assert _parts(second[2]) == []  # the call-only answer, without its thinking
    assert second[-1]["content"][0] == {"type": "thinking", "thinking": "all done"}


def test_a_file_mixing_rows_with_and_without_reasoning_uses_parts_everywhere(
    export: Export, source: Path
) -> None:
    """One save thinks, the other does not: Arrow needs one type, so both use parts."""
    _thinking_run(source / "thinks")
    plain = candidate(0, say("hello"), "optimal", OK)
    write_run(source / "plain", [situation(0, None, [plain])], run_config("run-plain"))
    export("chat")
    rows = _chat(source)
    assert len(rows) == 3
    assert all(isinstance(m["content"], list) for row in rows for m in row["messages"])


def test_as_writes_the_rows_for_another_agent(export: Export, source: Path) -> None:
    """The child's instructions open the system message, its transform thinks, and the
    rows name it, the save's producer as their source."""
    _thinking_run(source / "run")
    target = {
        "agent_id": "child-agent",
        "agent_version": "2.0.0",
        "instructions": "You are the child.",
        "reasoning_transform": "tests.export.hooks:shout",
    }
    export("chat", options={"as": target})
    row = _chat(source)[-1]
    system = row["messages"][0]["content"][0]["text"]
    assert system.startswith("You are the child.\n\nAttributes: ")
    assert row["messages"][-1]["content"][0] == {"type": "thinking", "thinking": "ALL DONE"}
    assert (row["agent_id"], row["agent_version"]) == ("child-agent", "2.0.0")
    assert (row["source_agent_id"], row["source_agent_version"]) == ("reference-agent", "1.0.0")


CHILD_TOOL = {
    "name": "press_button",
    "description": "Press one button; the child's own wording.",
    "arguments": {"id": {"description": "button id", "type": "str"}},
}


def test_as_writes_the_rows_with_the_targets_tools(export: Export, source: Path) -> None:
    """`as` with `tools`: every row offers the child's tools, not the save's."""
    _thinking_run(source / "run")
    export("chat", options={"as": {"agent_id": "child-agent", "tools": [CHILD_TOOL]}})
    rows = _chat(source)
    assert rows
    for row in rows:
        (tool,) = row["tools"]
        assert tool["type"] == "function"
        assert tool["function"]["description"] == "Press one button; the child's own wording."
        assert set(tool["function"]["parameters"]["properties"]) == {"target_robot_name", "id"}


def test_a_row_calling_a_tool_the_target_lacks_fails_with_the_reason(
    export: Export, source: Path
) -> None:
    """A child offered no `press_button` cannot be taught a conversation that calls it:
    each row holding such a call is an export failure naming the tool."""
    _thinking_run(source / "run")
    say_only = {"name": "say_only", "description": "Speak."}
    outcome = export("chat", options={"as": {"agent_id": "child", "tools": [say_only]}})
    reasons = {failure["error"] for failure in outcome.failures}
    assert reasons == {"the row calls press_button, which option 'as' does not offer"}
    assert not outcome.complete


@pytest.mark.parametrize("tools", [{"name": "x"}, [{"description": "no name"}], ["press"]])
def test_as_tools_that_are_not_a_list_of_named_tools_are_refused(
    export: Export, source: Path, tools: object
) -> None:
    """`as.tools` must be a list of tools with names: anything else stops the export."""
    _thinking_run(source / "run")
    with pytest.raises(ExportError, match="option 'as': tools"):
        export("chat", options={"as": {"agent_id": "child", "tools": tools}})


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("shout", "the reasoning transform 'shout' must be written module:function"),
        (
            "tests.export.nowhere:shout",
            "the reasoning transform 'tests.export.nowhere:shout' cannot be imported: "
            "No module named 'tests.export.nowhere'",
        ),
        (
            "tests.export.hooks:whisper",
            "the reasoning transform 'tests.export.hooks:whisper': module "
            "'tests.export.hooks' has no attribute 'whisper'",
        ),
        (
            "tests.export.hooks:NOT_A_FUNCTION",
            "the reasoning transform 'tests.export.hooks:NOT_A_FUNCTION' is a str, not a callable",
        ),
    ],
)
def test_a_bad_reasoning_transform_is_named(
    export: Export, source: Path, reference: str, message: str
) -> None:
    """A reference that does not name a callable stops the export with what is wrong."""
    _thinking_run(source / "run")
    with pytest.raises(ExportError) as caught:
        export("chat", options={"as": {"agent_id": "child", "reasoning_transform": reference}})
    assert caught.value.reason == message
    assert not (source / "datasets" / "chat").exists()


def test_a_transform_that_returns_no_string_fails_the_row(export: Export, source: Path) -> None:
    """The row is listed as a failure with the reason; the export is not complete."""
    _thinking_run(source / "run")
    target = {"agent_id": "child", "reasoning_transform": "tests.export.hooks:number"}
    outcome = export("chat", options={"as": target})
    assert outcome.failures
    assert outcome.failures[0]["error"] == ("the reasoning transform returned a int, not a string")


def _rejected_run(folder: Path) -> None:
    """c0's press ran without an executor error, but the simulator rejected its input."""
    result = executed("sw9")
    result["panda"]["failure_reason"] = "rejected: sw9 is not a button"
    first = candidate(
        0, press("sw9"), "ongoing", OK, links=[(1, "next")], execution=result,
    )  # fmt: skip
    second = candidate(1, press("sw4"), "optimal", OK, execution=executed("sw4"))
    write_run(
        folder,
        [situation(0, None, [first]), situation(1, 0, [second], content=FEEDBACK, kind="env")],
    )


def _marks(row: dict[str, Any]) -> list[bool]:
    return [m["trainable"] for m in row["messages"] if m["role"] == "assistant"]


@pytest.mark.parametrize(
    "declared",
    [
        "^rejected",
        {"pattern": "not a button$"},
        {"callable": "tests.export.hooks:rejected"},
    ],
)
def test_a_tool_failure_predicate_makes_a_step_failed(
    export: Export, source: Path, declared: object
) -> None:
    """Without a predicate c0 is a target; with one recognising its result it is not, in
    whole-run and per-turn rows alike."""
    _rejected_run(source / "run")
    export("chat", options={"reasoning": False})
    assert [_marks(row) for row in _chat(source)] == [[True], [False, True]]
    options = {"reasoning": False, "tool_failures": {"press_button": declared}}
    export("chat", options=options)
    assert [_marks(row) for row in _chat(source)] == [[False, True]]
    export("chat", options={**options, "per_turn": True})
    assert [_marks(row) for row in _chat(source)] == [[False, True]]


def test_the_integration_declares_predicates_in_python(source: Path) -> None:
    """`ExportSettings.tool_failures` takes callables directly."""
    _rejected_run(source / "run")
    failures = ToolFailures({"press_button": lambda result: "rejected" in result})
    settings = ExportSettings(
        source=source, format="chat", options={"reasoning": False}, tool_failures=failures
    )
    run_export(settings)
    assert [_marks(row) for row in _chat(source)] == [[False, True]]


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        (
            "(a)\\1",
            "failure pattern of tool 'press_button' '(a)\\\\1' is not a linear-time (RE2) "
            "regular expression: invalid escape sequence: \\1",
        ),
        (
            "(?=rejected)",
            "failure pattern of tool 'press_button' '(?=rejected)' is not a linear-time "
            "(RE2) regular expression: invalid perl operator: (?=",
        ),
        (
            {"regex": "x"},
            "option 'tool_failures' must be an object of tool name → \"pattern\", "
            '{"pattern": str} or {"callable": "module:function"}; got {\'regex\': \'x\'} '
            "for 'press_button'",
        ),
    ],
)
def test_a_bad_failure_predicate_is_named(
    export: Export, source: Path, declared: object, message: str
) -> None:
    """Backreferences and lookaround (not linear time) and unknown shapes are refused."""
    _rejected_run(source / "run")
    with pytest.raises(ExportError) as caught:
        export("chat", options={"tool_failures": {"press_button": declared}})
    assert caught.value.reason == message


def test_the_prompt_completion_shape_is_one_row_per_target_turn(
    export: Export, source: Path
) -> None:
    """TRL's conversational prompt/completion rows: the context, then the answer alone,
    no training marks; failed turns end no row."""
    _rejected_run(source / "run")
    export(
        "chat",
        options={"shape": "prompt_completion", "tool_failures": {"press_button": "^rejected"}},
    )
    (row,) = _chat(source)
    assert [m["role"] for m in row["prompt"]] == ["system", "user", "assistant", "tool"]
    assert [m["role"] for m in row["completion"]] == ["assistant"]
    assert row["completion"][0]["tool_calls"][0]["function"]["name"] == "press_button"
    assert "messages" not in row
    assert all("trainable" not in m for m in [*row["prompt"], *row["completion"]])
    assert row["whole_run"] is False
