"""Exports of a real `gencoach demo` run's saves: best_of, row fields, counts, dedupe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gencoach.export import ExportSettings, run_export
from gencoach.export.history import is_target
from gencoach.export.selection import select
from gencoach.graph import read_save
from tests.support.exports import read_rows

# The demo runs once per session (about 20 s on two busy cores) inside the first test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _export(source: Path, out: Path, **settings: object) -> list[dict[str, object]]:
    run_export(ExportSettings(source=source, format="chat", out=out, **settings))  # type: ignore[arg-type]
    return read_rows(out / "chat.jsonl")


def test_every_save_records_when_its_run_started(demo_saves: Path) -> None:
    """`producer.started_at` (what `since`, `limit` and ties read) is in each config.json."""
    for config in demo_saves.glob("*/config.json"):
        started = json.loads(config.read_text())["producer"]["started_at"]
        assert isinstance(started, float)
        assert started > 1.7e9


def test_best_of_one_keeps_a_row_for_every_task(demo_saves: Path, tmp_path: Path) -> None:
    """Four tasks, `best_of` 1: one example each, the best-scored training target of its
    task. Its whole-run row ends the task's rows; the world the sorting and two-stage
    tasks change splits it, the rows before it ending earlier in the same run
    (test_per_step_attributes.py). (The demo's ties happen to fall on targets;
    test_best_of.py has a task whose best-scored answer failed.)"""
    rows = _export(demo_saves, tmp_path / "best", options={"best_of": 1})
    by_task: dict[str, list[dict[str, object]]] = {}
    for row in rows:
        by_task.setdefault(str(row["scenario"]), []).append(row)
    assert sorted(by_task) == ["buttons", "sorting", "text_question", "two_stage"]
    assert all(len({row["run_id"] for row in task}) == 1 for task in by_task.values())
    for *_, row in by_task.values():
        graph = read_save(demo_saves / str(row["run_id"]))
        best = max(example.score for example in select(graph))
        targets = [e for e in select(graph) if is_target(graph.candidates[e.candidate_id])]
        assert row["score"] == round(max(e.score for e in targets), 6)
        assert row["score"] <= best


def test_rows_name_their_agent_and_shape_and_the_manifest_counts_agents(
    demo_saves: Path, tmp_path: Path
) -> None:
    """Every row has `agent_id`, `agent_version` and `whole_run`; the manifest counts the
    runs graded and kept per agent."""
    out = tmp_path / "chat"
    rows = _export(demo_saves, out)
    assert {(row["agent_id"], row["agent_version"], row["whole_run"]) for row in rows} == {
        ("gencoach-reference", "0.1.0", True)
    }
    manifest = json.loads((out / "export_manifest.json").read_text())
    assert manifest["agents"] == [
        {"agent_id": "gencoach-reference", "agent_version": "0.1.0", "graded": 4, "kept": 4}
    ]


def test_dedupe_trains_each_decision_once(demo_saves: Path, tmp_path: Path) -> None:
    """Whole-run rows repeat their early decisions; by default each (context, target) pair
    is trainable once, the manifest counting the repeats; `dedupe` off keeps them all."""

    def trainable(rows: list[dict[str, object]]) -> int:
        return sum(bool(m["trainable"]) for row in rows for m in row["messages"])  # type: ignore[attr-defined]

    deduped = _export(demo_saves, tmp_path / "deduped")
    repeated = _export(demo_saves, tmp_path / "repeated", dedupe=False)
    counts = json.loads((tmp_path / "deduped" / "export_manifest.json").read_text())["counts"]
    assert counts["duplicate_turns"] > 0
    assert trainable(deduped) + counts["duplicate_turns"] == trainable(repeated)
    assert len(deduped) + counts["duplicate_rows"] == len(repeated)
    pairs = set()
    for row in deduped:
        messages = row["messages"]
        assert isinstance(messages, list)
        shown = [_decision(m) for m in messages]
        # The shuffles reorder the system message and the tools, not what they hold.
        given = sorted(str(messages[0]["content"]) + json.dumps(row["tools"], sort_keys=True))
        for index, message in enumerate(messages):
            if message["trainable"]:
                pairs.add(json.dumps([given, shown[1 : index + 1]]))
    assert len(pairs) == trainable(deduped)


def _decision(message: dict[str, object]) -> object:
    """What a message says, call ids and marks aside."""
    calls = message.get("tool_calls") or []
    assert isinstance(calls, list)
    return [message["role"], message["content"], [call["function"] for call in calls]]


def test_a_library_of_the_demo_and_its_chat_export_has_no_unanswered_call(
    demo_saves: Path, tmp_path: Path
) -> None:
    """The demo's saves (the two-stage task among them) and their default chat export in
    one library: no record is refused for a tool call left unanswered, some call cut by a
    stage end is answered before the next stage's instruction, and each task has one
    benchmark and one environment across both sources. (After the test, the row
    validator reads every record and example of the library, and every exported row.)"""
    from gencoach.library import CanonicalDatasetAdapter
    from gencoach.library.build import build_library

    _export(demo_saves, tmp_path / "chat")
    _export(demo_saves, tmp_path / "turns", options={"per_turn": True})
    run_export(ExportSettings(source=demo_saves, format="preference", out=tmp_path / "pairs"))
    build_library([demo_saves, tmp_path / "chat" / "chat.jsonl"], tmp_path / "lib", "r1")
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        records = [record.trajectory for record in lib.iter_records()]
        by_task: dict[str, set[tuple[str, str]]] = {}
        for row in lib.select():
            by_task.setdefault(row.task_key, set()).add((row.benchmark, row.environment_key))
    reasons = [reason for r in records for reason in r.eligibility["reasons"]]
    assert not [reason for reason in reasons if "answer" in reason]
    kinds = [[event["kind"] for event in r.events] for r in records]
    assert any(
        k[i : i + 3] == ["tool_feedback", "stage_end", "instruction"]
        for k in kinds
        for i in range(len(k))
    )
    assert len(by_task) == 4
    assert all(len(found) == 1 for found in by_task.values()), by_task
