"""Chat JSONL files join the library: the exporter's own files, both trainable markers."""

from __future__ import annotations

import json
from pathlib import Path

from gencoach.export import ExportSettings, run_export
from gencoach.library import CanonicalDatasetAdapter, DatasetQuery, Outcome, Provenance
from gencoach.library.build import build_library
from tests.library.sources import chat_row, coached_save, trajectories, write_chat


def test_the_chat_exporters_file_is_read(tmp_path: Path) -> None:
    """Every row `gencoach export --format chat` writes becomes a trajectory with its
    assistant `trainable` flags and its top-level metadata as task and lineage."""
    coached_save(tmp_path / "saves" / "run-1")
    # The coached answer repeats an earlier decision: with `dedupe` on, its row is left out.
    settings = ExportSettings(
        source=tmp_path / "saves", format="chat", out=tmp_path / "out", dedupe=False
    )
    outcome = run_export(settings)
    chat = tmp_path / "out" / "chat.jsonl"
    rows = [json.loads(line) for line in chat.read_text().splitlines()]
    result = build_library([chat], tmp_path / "lib", "r1")
    assert result.accepted == sum(outcome.rows.values()) == len(rows)
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        records = trajectories(lib)
        for record, row in zip(sorted(records, key=lambda r: r.locator["line"]), rows, strict=True):
            flags = [m["trainable"] for m in row["messages"] if m["role"] == "assistant"]
            assert [event["trainable"] for event in record.decisions] == flags
            assert record.task["scenario"] == row["scenario"]
            assert record.locator["candidate_id"] == row["candidate_id"]
            assert record.outcome is Outcome.UNKNOWN  # a chat row does not say: unknown
            assert record.reward == row["score"]
            assert len(record.events) == len(row["messages"]) - 1  # the system message
        coached = [r for r in records if r.provenance is Provenance.COACHED_CORRECTION]
        assert [r.coaching["attempt_ids"] for r in coached] == [[1]]


def test_trainable_and_weight_markers_mean_the_same(tmp_path: Path) -> None:
    """`trainable: false` and the older `weight: 0` both make a decision a non-target."""
    new = write_chat(tmp_path / "new.jsonl", [chat_row("done", trainable=False)])
    old = write_chat(tmp_path / "old.jsonl", [chat_row("done", weight=0)])
    build_library([new, old], tmp_path / "lib", "r1")
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        records = trajectories(lib)
        assert len(records) == 1  # same content: one record, two contributors
        assert [event["trainable"] for event in records[0].decisions] == [False, True]
        assert [c.source_id for c in lib.get_trajectory(records[0].id).trajectory.contributors] == [
            "chat:new.jsonl",
            "chat:old.jsonl",
        ]


def test_top_level_metadata_and_outcomes(tmp_path: Path) -> None:
    """Metadata in top-level keys is read; an outcome given is kept, none stays unknown."""
    row = chat_row("done")
    metadata = row.pop("metadata")
    path = write_chat(tmp_path / "t.jsonl", [{**row, **metadata, "outcome": "success"}])
    build_library([path], tmp_path / "lib", "r1")
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        (record,) = trajectories(lib)
        assert record.task["target"] == "sw1"
        assert record.outcome is Outcome.SUCCESS
        assert lib.select(DatasetQuery(selection="successful"))[0].trajectory_id == record.id
        # The file states the outcome without evidence: not verified, so never "best".
        assert record.verification.strength.value == "reported"
        assert lib.select(DatasetQuery(selection="best")) == []


def test_a_file_with_a_bad_line_is_skipped_whole(tmp_path: Path) -> None:
    """One unreadable line skips the whole file, named with the line; nothing of it is kept."""
    good = write_chat(tmp_path / "good.jsonl", [chat_row("done")])
    bad = write_chat(tmp_path / "bad.jsonl", [chat_row("fine"), chat_row("ok"), "{not json"])
    messages: list[str] = []
    result = build_library([bad, good], tmp_path / "lib", "r1", say=messages.append)
    assert messages[0].startswith("skipped bad.jsonl: line 3: ")
    assert [skip.name for skip in result.skipped] == ["bad.jsonl"]
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        assert [row.source_id for row in lib.select()] == ["chat:good.jsonl"]
        assert lib.manifest.shards[0].records == 1


def test_a_row_without_a_role_is_refused_with_its_path(tmp_path: Path) -> None:
    """A message without a known role names the line and the message."""
    row = chat_row("done")
    row["messages"][1] = {"content": "hi"}
    path = write_chat(tmp_path / "x.jsonl", [chat_row("ok"), row])
    messages: list[str] = []
    build_library([path, write_chat(tmp_path / "y.jsonl", [chat_row("y")])], tmp_path / "lib",
                  "r1", say=messages.append)  # fmt: skip
    assert messages == [
        "skipped x.jsonl: line 2: messages.1 needs a role: system, user, assistant or tool"
    ]
