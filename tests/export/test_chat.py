"""The `chat` format: OpenAI-style conversations, `trainable` marks, options, `datasets` loading."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gencoach.errors import ExportError
from tests.export.expected import (
    PRESS_TOOL,
    ROBOT,
    SYSTEM,
    feedback,
    marked,
    press_turn,
    recorded,
)
from tests.support.exports import Export, read_rows
from tests.support.saved_runs import (
    FEEDBACK,
    candidate,
    coached_run,
    executed,
    press,
    run_config,
    situation,
    stage,
    write_run,
)


def _chat(source: Path, name: str = "chat.jsonl") -> list[dict[str, Any]]:
    return read_rows(source / "datasets" / "chat" / name)


def test_a_row_is_an_openai_conversation_with_tools(export: Export, source: Path) -> None:
    """c5 of the coached run: system, user, tool feedback, assistant calls as JSON strings;
    c2's call, cut by its stage's end, is answered by the result its execution recorded
    before the next stage's instruction."""
    write_run(source / "run", coached_run(plain=True))
    export("chat", dedupe=False)
    rows = _chat(source)
    assert [row["candidate_id"] for row in rows] == [0, 2, 5, 6, 7]
    assert rows[2] == {
        "messages": [
            marked({"role": "system", "content": SYSTEM}, False),
            marked({"role": "user", "content": "press sw0, then sw4"}, False),
            marked(press_turn(0, "sw0"), True),
            marked(feedback(0), False),
            marked(press_turn(2, "sw4"), True),
            marked(recorded(2), False),
            marked({"role": "user", "content": "now say done"}, False),
            marked(press_turn(5, "sw0"), True),
        ],
        "tools": [PRESS_TOOL],
        "run_id": "run-1",
        "scenario": "buttons",
        "scenario_version": "unversioned",
        "generator": {"name": "gencoach", "version": "0.1.0"},
        "target": "sw0-sw4",
        "task_key": "buttons/sw0-sw4/ad2aa0c3a2a0",
        "situation_id": 2,
        "candidate_id": 5,
        "attempt_ids": [],
        "origin": "model",
        "agent_id": "reference-agent",
        "agent_version": "1.0.0",
        "decision_source": None,
        "score": 0.4,
        "coached": False,
        "whole_run": True,
    }


def test_lineage_stays_out_of_the_model_input(export: Export, source: Path) -> None:
    """Run, situation and attempt ids sit in top-level keys, never in messages or tools."""
    write_run(source / "run", coached_run(plain=True))
    export("chat", dedupe=False)
    coached = _chat(source)[-1]
    assert coached["origin"] == "coaching"
    assert coached["attempt_ids"] == [1]
    assert coached["coached"] is True
    assert coached["decision_source"] == "unknown"  # the save predates decision sources
    model_input = str(coached["messages"]) + str(coached["tools"])
    assert "run-1" not in model_input
    assert "coaching" not in model_input


def magma_summary(robot: str, flag: str) -> dict[str, Any]:
    """An execution in MAGMA-GEN's step-summary shape, one robot with `flag`."""
    return {
        "per_robot_status": [
            {
                "robot_name": robot,
                "mess": "" if flag == "none" else "wrong button",
                "result": flag == "none",
                "error_flag": flag,
                "mess_is_public": False,
            }
        ],
        "stage_success": 0,
        "stage_state": 0,
        "tool_calls": 1,
        "forgiven_tool_calls": 0,
        "failure_reason": None,
        "failure_diagnostics": None,
        "reward": None,
    }


def _recovery(folder: Path, execution: dict[str, Any] | None = None) -> None:
    """c0's call fails (bad call); the agent recovers with c1, which succeeds."""
    write_run(
        folder,
        [
            situation(
                0,
                None,
                [
                    candidate(
                        0,
                        press("sw9"),
                        "ongoing",
                        {"stage_0": stage(1, 0, 0, 1)},
                        links=[(1, "next")],
                        execution=execution or executed("sw9", "bad_call"),
                    )
                ],
            ),
            situation(
                1,
                0,
                [candidate(1, press("sw4"), "optimal", {"stage_0": stage(1, 0, 0, 1)})],
                content=FEEDBACK,
                kind="env",
            ),
        ],
    )


def test_a_turn_whose_calls_all_failed_is_never_a_target(export: Export, source: Path) -> None:
    """c0 is selected by its outcome, but its failed turn is not trainable and ends no row."""
    _recovery(source / "run")
    export("chat")
    (row,) = _chat(source)
    marks = [m["trainable"] for m in row["messages"] if m["role"] == "assistant"]
    assert marks == [False, True]
    assert all(m["trainable"] is False for m in row["messages"] if m["role"] != "assistant")
    assert row["candidate_id"] == 1


def test_a_magma_step_summary_with_every_call_failed_is_not_trainable(
    export: Export, source: Path
) -> None:
    """The "every call failed" rule reads MAGMA-GEN's `per_robot_status` execution too."""
    _recovery(source / "run", execution=magma_summary("panda", "bad_call"))
    export("chat")
    (row,) = _chat(source)
    marks = [m["trainable"] for m in row["messages"] if m["role"] == "assistant"]
    assert marks == [False, True]


def test_a_magma_step_summary_with_a_call_that_ran_stays_trainable(
    export: Export, source: Path
) -> None:
    """A MAGMA step summary whose robot reports `error_flag: none` keeps the turn a target."""
    _recovery(source / "run", execution=magma_summary("panda", "none"))
    export("chat", options={"per_turn": True})
    assert [row["candidate_id"] for row in _chat(source)] == [0, 1]


def test_the_axolotl_flavour_marks_messages_with_weight(export: Export, source: Path) -> None:
    """`flavour: axolotl` writes Axolotl's per-message `weight` and no `trainable` at all."""
    _recovery(source / "run")
    export("chat", options={"flavour": "axolotl"})
    (row,) = _chat(source)
    assert [m["weight"] for m in row["messages"]] == [0, 0, 0, 0, 1]
    assert not any("trainable" in m for m in row["messages"])


def test_an_unknown_flavour_is_refused(export: Export, source: Path) -> None:
    """A flavour name that no trainer has is refused with the known ones listed."""
    _recovery(source / "run")
    with pytest.raises(ExportError) as caught:
        export("chat", options={"flavour": "trl"})
    assert caught.value.reason == (
        "option 'flavour' of format 'chat' must be one of 'tinker', 'axolotl', got 'trl'"
    )


def test_per_turn_rows_end_at_each_target_turn_once(export: Export, source: Path) -> None:
    """One row per distinct target turn of the examples' paths; only its last turn trains."""
    write_run(source / "run", coached_run(plain=True))
    export("chat", options={"per_turn": True}, dedupe=False)
    rows = _chat(source)
    assert [row["candidate_id"] for row in rows] == [0, 2, 5, 6, 7]
    marks = [[m["trainable"] for m in row["messages"] if m["role"] == "assistant"] for row in rows]
    no, yes = False, True
    assert marks == [[yes], [no, yes], [no, no, yes], [no, no, no, yes], [no, yes]]


def test_per_turn_skips_failed_turns(export: Export, source: Path) -> None:
    """In the recovery run, per-turn rows end only at c1, the turn that did not fail."""
    _recovery(source / "run")
    export("chat", options={"per_turn": True})
    assert [row["candidate_id"] for row in _chat(source)] == [1]


def test_reasoning_becomes_thinking_parts_and_every_message_uses_parts(
    export: Export, source: Path
) -> None:
    """With `reasoning`, all contents are part lists; the agent's reasoning precedes its text."""
    steps = [{"component": "planner", "reasoning": "sw4 is next"}]
    records = [
        candidate(
            0,
            {"say": "ok", "tool_calls": []},
            "optimal",
            {"stage_0": stage(1, 0, 0, 1)},
            internal_steps=steps,
        )
    ]
    write_run(source / "run", [situation(0, None, records)])
    export("chat", options={"reasoning": True})
    (row,) = _chat(source)
    assert all(isinstance(m["content"], list) for m in row["messages"])
    assert row["messages"][-1]["content"] == [
        {"type": "thinking", "thinking": "sw4 is next"},
        {"type": "text", "text": "ok"},
    ]
    assert row["messages"][1]["content"] == [{"type": "text", "text": "press sw0, then sw4"}]


def test_min_score_keeps_the_best_examples_only(export: Export, source: Path) -> None:
    """`min_score` 0.45 keeps c2 (0.52) alone."""
    write_run(source / "run")
    export("chat", options={"min_score": 0.45})
    assert [row["candidate_id"] for row in _chat(source)] == [2]


def test_best_of_keeps_the_k_best_per_task_across_runs(export: Export, source: Path) -> None:
    """Two runs of one task, `best_of` 3: both c2 (0.52), then, of the runs' c5, c6 and c7
    (all 0.4), the newest answer of the newest run (started last): c7 of run-b; the other
    task keeps its c2, then c7 and c6."""
    write_run(source / "a", config=run_config("run-a", started_at="2026-12-01T10:00:00Z"))
    write_run(source / "b", config=run_config("run-b", started_at="2026-12-01T11:00:00Z"))
    write_run(source / "c", config=run_config("run-c", target="other"))
    export("chat", options={"best_of": 3}, dedupe=False)
    kept = [(row["run_id"], row["candidate_id"]) for row in _chat(source)]
    assert kept == [
        ("run-a", 2),
        ("run-b", 2),
        ("run-b", 7),
        ("run-c", 2),
        ("run-c", 6),
        ("run-c", 7),
    ]


def test_openai_shaped_tools_pass_through_with_the_robot_added(
    export: Export, source: Path
) -> None:
    """A tool already in OpenAI shape keeps its schema, plus the required robot parameter."""
    tool = {
        "type": "function",
        "function": {
            "name": "wave",
            "description": "Wave.",
            "parameters": {
                "type": "object",
                "properties": {"times": {"type": "integer"}},
                "required": ["times"],
            },
        },
    }
    records = [
        candidate(0, {"say": "hi", "tool_calls": []}, "optimal", {"stage_0": stage(1, 0, 0, 1)})
    ]
    write_run(source / "run", [situation(0, None, records, tools=[tool])])
    export("chat")
    (row,) = _chat(source)
    assert row["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "wave",
                "description": "Wave.",
                "parameters": {
                    "type": "object",
                    "properties": {"target_robot_name": ROBOT, "times": {"type": "integer"}},
                    "required": ["target_robot_name", "times"],
                },
            },
        }
    ]


@pytest.mark.parametrize(
    "options",
    [{}, {"per_turn": True}, {"reasoning": True}],
    ids=["default", "per turn", "reasoning"],
)
def test_chat_files_load_with_hugging_face_datasets(
    export: Export, source: Path, options: dict[str, Any]
) -> None:
    """`load_dataset("json")` reads every chat file without a schema error, rows intact."""
    datasets = pytest.importorskip("datasets")
    steps: list[dict[str, Any]] = [{"reasoning": "press the next one"}]
    situations = coached_run()
    situations[1].candidates[0].internal_steps.extend(steps)
    write_run(source / "a", situations)
    write_run(source / "b", config=run_config("run-b", target="other"))
    outcome = export("chat", options=options, validation_ratio=0.5, dedupe=False)
    folder = source / "datasets" / "chat"
    for name in ("chat.jsonl", "chat_train.jsonl", "chat_validation.jsonl"):
        loaded = datasets.load_dataset(
            "json", data_files=str(folder / name), split="train", cache_dir=str(source / "cache")
        )
        assert loaded.num_rows == len(read_rows(folder / name))
        assert {"messages", "tools", "run_id", "score", "coached"} <= set(loaded.column_names)
    loaded = datasets.load_dataset(
        "json",
        data_files=str(folder / "chat.jsonl"),
        split="train",
        cache_dir=str(source / "cache"),
    )
    assert loaded.num_rows == outcome.rows["chat"]
    assert loaded[0]["messages"][0]["role"] == "system"
