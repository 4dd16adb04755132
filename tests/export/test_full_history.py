"""The `full-history` format: MAGMA's row shape, history, shuffles, one call per robot."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from gencoach.export import ExportError
from gencoach.export.command import summary
from tests.support.exports import Export, read_rows
from tests.support.saved_runs import (
    FEEDBACK,
    PLAIN_TOOLS,
    candidate,
    coached_run,
    press,
    run_config,
    situation,
    stage,
    write_run,
)

OPTIMAL = {"stage_0": stage(1, 0, 0, 1)}


def test_a_row_has_the_magma_full_history_shape(export: Export, source: Path) -> None:
    """c2 of the coached run: JSON-string fields, the rebuilt history, the action by robot."""
    write_run(source / "run", coached_run(plain=True))
    export("full-history")
    rows = read_rows(source / "datasets" / "full-history" / "hr_data.json")
    # c7 answers the coached copy of c2's situation as c2 did: a duplicate, left out.
    assert [row["metadata"]["candidate_id"] for row in rows] == [0, 2, 5, 6]
    assert rows[1] == {
        "persistent_rules": '["press buttons in order"]',
        "attributes": '{"known_robots": ["panda"]}',
        "tools": json.dumps(PLAIN_TOOLS),
        "history": (
            '[{"author": "USER", "content": "press sw0, then sw4"}, {"author": "MODEL", '
            '"content": "{\\"panda\\": {\\"name\\": \\"press_button\\", \\"arguments\\": '
            '{\\"id\\": \\"sw0\\"}}}"}]'
        ),
        "memory": '{"turns": 1}',
        "instruction": FEEDBACK,
        "instruction_role": "ENV",
        "output": (
            '{"say": "", "action": {"panda": {"name": "press_button", "arguments": {"id": "sw4"}}}}'
        ),
        "metadata": {
            "run_id": "run-1",
            "scenario": "buttons",
            "scenario_version": "unversioned",
            "generator": {"name": "gencoach", "version": "0.1.0"},
            "target": "sw0-sw4",
            "task_key": "buttons/sw0-sw4/ad2aa0c3a2a0",
            "situation_id": 1,
            "candidate_id": 2,
            "attempt_ids": [],
            "origin": "model",
            "agent_id": "reference-agent",
            "agent_version": "1.0.0",
            "decision_source": None,
            "score": 0.52,
        },
    }


def test_the_coached_answer_carries_its_lineage(export: Export, source: Path) -> None:
    """c7 answers the coached copy S4: origin coaching, attempt 1, history through c0."""
    write_run(source / "run", coached_run(plain=True))
    export("full-history", dedupe=False)
    row = read_rows(source / "datasets" / "full-history" / "hr_data.json")[-1]
    assert row["metadata"] == {
        "run_id": "run-1",
        "scenario": "buttons",
        "scenario_version": "unversioned",
        "generator": {"name": "gencoach", "version": "0.1.0"},
        "target": "sw0-sw4",
        "task_key": "buttons/sw0-sw4/ad2aa0c3a2a0",
        "situation_id": 4,
        "candidate_id": 7,
        "attempt_ids": [1],
        "origin": "coaching",
        "agent_id": "reference-agent",
        "agent_version": "1.0.0",
        "decision_source": "unknown",  # the save predates decision sources
        "score": 0.4,
    }
    assert [entry["author"] for entry in json.loads(row["history"])] == ["USER", "MODEL"]


def test_the_history_of_the_last_stage_runs_from_the_root(export: Export, source: Path) -> None:
    """c6 sees four earlier turns; words and actions are written as MAGMA's history does."""
    write_run(source / "run", coached_run(plain=True))
    export("full-history")
    row = read_rows(source / "datasets" / "full-history" / "hr_data.json")[3]
    action = '{"panda": {"name": "press_button", "arguments": {"id": "%s"}}}'
    assert json.loads(row["history"]) == [
        {"author": "USER", "content": "press sw0, then sw4"},
        {"author": "MODEL", "content": action % "sw0"},
        {"author": "ENV", "content": FEEDBACK},
        {"author": "MODEL", "content": action % "sw4"},
        {"author": "USER", "content": "now say done"},
        {"author": "MODEL", "content": action % "sw0"},
    ]
    assert row["output"] == '{"say": "done", "action": {}}'


def test_the_agents_own_history_is_used_when_its_memory_keeps_one(
    export: Export, source: Path
) -> None:
    """`memory.history` becomes the history field as it is, and leaves the memory field."""
    kept = [{"author": "USER", "content": "earlier", "timestamp": 1.5}]
    memory = {"history": kept, "memory_list": ["a rule"], "notes": "x"}
    record = candidate(0, press("sw0"), "optimal", OPTIMAL)
    write_run(source / "run", [situation(0, None, [record], memory=memory)])
    export("full-history")
    (row,) = read_rows(source / "datasets" / "full-history" / "hr_data.json")
    assert json.loads(row["history"]) == kept
    assert row["memory"] == '{"notes": "x"}'
    assert row["persistent_rules"] == '["a rule"]'


def test_words_and_an_action_together(export: Export, source: Path) -> None:
    """An answer that speaks and acts keeps both in `output`."""
    decision = {**press("sw0"), "say": "pressing"}
    write_run(source / "run", [situation(0, None, [candidate(0, decision, "optimal", OPTIMAL)])])
    export("full-history")
    (row,) = read_rows(source / "datasets" / "full-history" / "hr_data.json")
    assert json.loads(row["output"]) == {
        "say": "pressing",
        "action": {"panda": {"name": "press_button", "arguments": {"id": "sw0"}}},
    }


def test_two_calls_to_one_robot_are_a_failure_not_a_row(export: Export, source: Path) -> None:
    """A MAGMA action holds one call per robot: the example is reported, the export incomplete."""
    twice = {"say": "", "tool_calls": press("sw0")["tool_calls"] + press("sw4")["tool_calls"]}
    records = [
        candidate(0, twice, "optimal", OPTIMAL),
        candidate(1, press("sw0"), "optimal", OPTIMAL),
    ]
    write_run(source / "run", [situation(0, None, records)])
    outcome = export("full-history")
    datasets = source / "datasets" / "full-history"
    assert [row["metadata"]["candidate_id"] for row in read_rows(datasets / "hr_data.json")] == [1]
    assert json.loads((datasets / "export_failures.json").read_text()) == [
        {
            "source": "run",
            "example": "0:0",
            "error": "a full-history row holds one call per robot; "
            "the answer sends several calls to 'panda'",
        }
    ]
    assert not outcome.complete
    assert json.loads((datasets / "export_manifest.json").read_text())["complete"] is False


def test_orders_are_shuffled_per_example_and_reproducibly(export: Export, source: Path) -> None:
    """Tools, attributes and rules change order across examples, never content; seeds replay."""
    for index in range(8):
        write_run(source / f"run-{index}", config=run_config(f"run-{index}"))

    def orders(seed: int) -> list[tuple[str, str, str]]:
        export("full-history", shuffle_seed=seed, dedupe=False)
        rows = read_rows(source / "datasets" / "full-history" / "hr_data.json")
        return [(row["tools"], row["attributes"], row["persistent_rules"]) for row in rows]

    first = orders(1)
    assert orders(1) == first
    assert orders(2) != first
    for field in range(3):
        variants = Counter(entry[field] for entry in first)
        assert len(variants) == 2
        contents = {json.dumps(sorted(map(json.dumps, _items(text)))) for text in variants}
        assert len(contents) == 1


def test_rows_that_repeat_an_earlier_pair_are_left_out(export: Export, source: Path) -> None:
    """Two runs of one conversation: each (context, output) pair is a row once, whatever
    the shuffles did to the second run's orders; c7, answering the coached copy of c2's
    situation as c2 did, is a repeat too. The manifest counts them; dedupe off keeps all."""
    write_run(source / "a", config=run_config("run-a"))
    write_run(source / "b", config=run_config("run-b"))
    outcome = export("full-history")
    folder = source / "datasets" / "full-history"
    rows = read_rows(folder / "hr_data.json")
    kept = [(row["metadata"]["run_id"], row["metadata"]["candidate_id"]) for row in rows]
    assert kept == [("run-a", 0), ("run-a", 2), ("run-a", 5), ("run-a", 6)]
    assert outcome.counts == {"duplicate_rows": 6}
    manifest = json.loads((folder / "export_manifest.json").read_text())
    assert manifest["counts"] == {"duplicate_rows": 6}
    assert summary(outcome).endswith("; 6 duplicate rows left out")
    export("full-history", dedupe=False)
    assert len(read_rows(folder / "hr_data.json")) == 10


def _items(text: str) -> list[object]:
    value = json.loads(text)
    return list(value.items()) if isinstance(value, dict) else list(value)


def test_an_empty_split_is_an_empty_json_array(export: Export, source: Path) -> None:
    """With one task, `hr_data_validation.json` is `[]`, still valid JSON."""
    write_run(source / "run")
    export("full-history")
    assert (
        json.loads((source / "datasets" / "full-history" / "hr_data_validation.json").read_text())
        == []
    )


def test_options_the_format_does_not_know_are_refused(export: Export) -> None:
    """A misspelt option stops the export with its name and the known ones."""
    with pytest.raises(ExportError) as caught:
        export("full-history", options={"min_scor": 0.2})
    assert caught.value.reason == (
        "unknown option 'min_scor' for format 'full-history'; "
        "known options: best_of, dedupe, exclude_fallbacks, min_score"
    )
