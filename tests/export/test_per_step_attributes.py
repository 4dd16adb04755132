"""Whole-run rows of runs whose situations open differently from step to step.

An adapter may put per-step state in a situation's attributes (a plan, the commands that
remain, the actions so far) or change its rules or tools. A whole-run row has one system
message and one tool list: a trained turn must see its own situation's, never a later
one's, which would hold its answer. The run below keeps its plan in the attributes:
`remaining` lists the buttons still to press, and every answer presses the first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gencoach.export.command import summary
from tests.support.exports import Export, read_rows
from tests.support.saved_runs import (
    FEEDBACK,
    PLAIN_MEMORY,
    PLAIN_TOOLS,
    TOOLS,
    Json,
    candidate,
    executed,
    press,
    situation,
    stage,
    write_run,
)

BUTTONS = ("sw0", "sw4", "sw9", "sw2")


def _attributes(remaining: list[str]) -> Json:
    return {"known_robots": ["panda"], "remaining": remaining}


def planned_run(
    plans: list[list[str]] | None = None,
    openings: list[Json] | None = None,
    *,
    last_only: bool = False,
) -> list[Any]:
    """A chain of one answer per situation: step `i` presses `BUTTONS[i]`, its situation's
    attributes hold `plans[i]` (by default the buttons from it on) and `openings[i]`
    replaces other parts of its input (`tools`, `memory`). Every answer is selected, or
    with `last_only` the last alone (the others score nothing, targets all the same), so
    the export writes the whole-run rows of that one example."""
    situations = []
    for index, button in enumerate(BUTTONS):
        last = index == len(BUTTONS) - 1
        plan = list(BUTTONS[index:]) if plans is None else plans[index]
        given: dict[str, Any] = {"tools": PLAIN_TOOLS, "memory": PLAIN_MEMORY}
        if openings is not None:
            given.update(openings[index])
        answer = candidate(
            index,
            press(button),
            "optimal" if last else "ongoing",
            {} if last_only and not last else {"stage_0": stage(1, 0, 0, 1)},
            links=[] if last else [(index + 1, "next")],
            execution=executed(button),
        )
        situations.append(
            situation(
                index,
                None if index == 0 else index - 1,
                [answer],
                content="press the buttons of your plan" if index == 0 else FEEDBACK,
                kind="user" if index == 0 else "env",
                attributes=_attributes(plan),
                **given,
            )
        )
    return situations


def _chat(source: Path, name: str) -> list[dict[str, Any]]:
    return read_rows(source / "datasets" / "chat" / name / "chat.jsonl")


def _pressed(message: dict[str, Any]) -> str:
    [call] = message["tool_calls"]
    return str(json.loads(call["function"]["arguments"])["id"])


def _shown(row: dict[str, Any]) -> dict[str, Any]:
    """The attributes the row's system message shows."""
    system = row["messages"][0]["content"]
    line = next(part for part in system.split("\n\n") if part.startswith("Attributes: "))
    shown: dict[str, Any] = json.loads(line.removeprefix("Attributes: "))
    return shown


def _trained(row: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in row["messages"] if m["role"] == "assistant" and m["trainable"]]


def _unmarked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k != "trainable"} for m in messages]


@pytest.mark.parametrize("dedupe", [True, False])
def test_each_trained_turn_sees_its_own_situations_attributes(
    export: Export, source: Path, dedupe: bool
) -> None:
    """Every answer presses the first button its plan names: in every row, each trained
    turn is the first of the plan the row's system message shows (the last situation's
    plan would hand earlier turns their answers), every turn is trained, once with
    `dedupe`, and the per-turn row ending at a trained turn is that row cut there."""
    write_run(source / "run", planned_run())
    name = "deduped" if dedupe else "repeated"
    export("chat", dedupe=dedupe, out=source / "datasets" / "chat" / name)
    rows = _chat(source, name)
    trained = []
    for row in rows:
        assert row["whole_run"] is True
        turns = _trained(row)
        assert turns, row
        assert {_pressed(turn) for turn in turns} == {_shown(row)["remaining"][0]}, row
        trained += [_pressed(turn) for turn in turns]
    if dedupe:
        assert sorted(trained) == sorted(BUTTONS)
    else:
        assert set(trained) == set(BUTTONS)
    export("chat", options={"per_turn": True}, out=source / "datasets" / "chat" / "turns")
    per_turn = {json.dumps(_unmarked(row["messages"])) for row in _chat(source, "turns")}
    for row in rows:
        for index, message in enumerate(row["messages"]):
            if message["trainable"]:
                assert json.dumps(_unmarked(row["messages"][: index + 1])) in per_turn


def test_turns_that_open_alike_share_a_row_and_the_export_says_it_split(
    export: Export, source: Path
) -> None:
    """A plan that changes and comes back: the turns under the first plan are trained in
    one row ending at the last of them, the turn under the other in a row of its own
    that ends there; the manifest and the summary count the whole-run row split."""
    first, other = ["sw0", "sw4", "sw9", "sw2"], ["sw4"]
    write_run(source / "run", planned_run(plans=[first, other, first, first], last_only=True))
    messages: list[str] = []
    outcome = export("chat", messages, out=source / "datasets" / "chat" / "rows")
    rows = _chat(source, "rows")
    assert [row["candidate_id"] for row in rows] == [1, 3]
    assert [[_pressed(turn) for turn in _trained(row)] for row in rows] == [
        ["sw4"],
        ["sw0", "sw9", "sw2"],
    ]
    assert [_shown(row)["remaining"] for row in rows] == [other, first]
    assert outcome.counts["split_rows"] == 1
    manifest = json.loads(
        (source / "datasets" / "chat" / "rows" / "export_manifest.json").read_text()
    )
    assert manifest["counts"]["split_rows"] == 1
    assert "1 whole-run row split where the system message or tools changed" in summary(outcome)


@pytest.mark.parametrize(
    "change",
    [
        {"memory": {"memory_list": ["press buttons in order", "hurry"], "turns": 1}},
        {"tools": TOOLS},
    ],
    ids=["rules", "tools"],
)
def test_rules_or_tools_that_change_split_the_row_too(
    export: Export, source: Path, change: Json
) -> None:
    """Rules and tools open a conversation as the attributes do: the last two turns,
    given other rules (or tools) than the first two, are trained in a row of their own."""
    plans, openings = [["sw0"]] * 4, [{}, {}, change, change]
    write_run(source / "run", planned_run(plans, openings, last_only=True))
    export("chat", out=source / "datasets" / "chat" / "rows")
    rows = _chat(source, "rows")
    assert [row["candidate_id"] for row in rows] == [1, 3]
    assert [[_pressed(turn) for turn in _trained(row)] for row in rows] == [
        ["sw0", "sw4"],
        ["sw9", "sw2"],
    ]
    assert len(rows[1]["tools"]) == len(change.get("tools", PLAIN_TOOLS))


def test_a_run_that_opens_alike_throughout_keeps_one_row(export: Export, source: Path) -> None:
    """Attributes that do not change: one whole-run row trains every turn, nothing split."""
    write_run(source / "run", planned_run(plans=[["sw0"]] * 4, last_only=True))
    outcome = export("chat", out=source / "datasets" / "chat" / "rows")
    [row] = _chat(source, "rows")
    assert [_pressed(turn) for turn in _trained(row)] == list(BUTTONS)
    assert outcome.counts["split_rows"] == 0
    assert "split where" not in summary(outcome)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_demos_whole_run_rows_train_what_each_turn_saw(
    demo_saves: Path, tmp_path: Path
) -> None:
    """A real run's world changes under its turns (the sorting task moves objects, which
    its attributes show): every trained turn of every whole-run row, with the context
    before it, is a per-turn row, which is built from that turn's own situation."""
    from gencoach.export import ExportSettings, run_export

    def export(out: str, **options: object) -> list[dict[str, Any]]:
        settings = ExportSettings(
            source=demo_saves,
            format="chat",
            out=tmp_path / out,
            dedupe=False,
            options={"reasoning": False, **options},  # type: ignore[dict-item]
        )
        outcome = run_export(settings)
        if out == "rows":
            assert outcome.counts["split_rows"] > 0
        return read_rows(tmp_path / out / "chat.jsonl")

    def pair(row: dict[str, Any], end: int) -> str:
        # The shuffles reorder the system message and the tools, not what they hold.
        given = sorted(
            str(row["messages"][0]["content"]) + json.dumps(row["tools"], sort_keys=True)
        )
        return json.dumps([given, _unmarked(row["messages"][1 : end + 1])])

    per_turn = {pair(row, len(row["messages"]) - 1) for row in export("turns", per_turn=True)}
    trained = [
        pair(row, index)
        for row in export("rows")
        for index, message in enumerate(row["messages"])
        if message["trainable"]
    ]
    assert trained
    assert [turn for turn in trained if turn not in per_turn] == []
