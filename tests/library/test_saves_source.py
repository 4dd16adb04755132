"""Saves become one canonical trajectory per root-to-leaf path, in both save dialects."""

from __future__ import annotations

from pathlib import Path

from gencoach.library import (
    CanonicalDatasetAdapter,
    DatasetQuery,
    Outcome,
    Provenance,
    QualityTier,
)
from gencoach.library.build import build_library
from gencoach.library.sources.canonical import description_text
from tests.library.sources import coached_save, human_save, magma_save, trajectories


def _open(tmp_path: Path, *folders: Path) -> CanonicalDatasetAdapter:
    build_library(list(folders), tmp_path / "lib", "r1")
    return CanonicalDatasetAdapter(tmp_path / "lib")


def test_every_root_to_leaf_path_is_a_trajectory(tmp_path: Path) -> None:
    """The coached run's five leaves give five trajectories, each ending at its leaf."""
    with _open(tmp_path, coached_save(tmp_path / "run-1")) as lib:
        records = trajectories(lib)
        leaves = sorted(record.locator["candidate_ids"][-1] for record in records)
        assert leaves == [1, 3, 4, 6, 7]
        by_leaf = {record.locator["candidate_ids"][-1]: record for record in records}
        assert by_leaf[6].locator["candidate_ids"] == [0, 2, 5, 6]
        assert by_leaf[7].locator["situation_ids"] == [0, 4]
        assert by_leaf[6].outcome is Outcome.SUCCESS
        assert by_leaf[6].quality_tier is QualityTier.OPTIMAL
        assert by_leaf[4].quality_tier is QualityTier.ACCEPTABLE
        assert by_leaf[3].outcome is Outcome.FAILURE
        assert by_leaf[1].outcome is Outcome.FAILURE  # an invalid answer ends the path
        assert by_leaf[6].source_id == "save:run-1"
        assert by_leaf[6].agent == {"id": "reference-agent", "version": "1.0.0", "model": "unknown"}
        assert by_leaf[6].task["description"] == "press sw0, then sw4; then say done"


def test_events_carry_decisions_feedback_and_stage_ends(tmp_path: Path) -> None:
    """A path's events: instruction, decision with tool calls, tool feedback, stage end;
    the call that ended stage 0 is answered by its recorded result before the stage end."""
    with _open(tmp_path, coached_save(tmp_path / "run-1")) as lib:
        record = next(r for r in trajectories(lib) if r.locator["candidate_ids"][-1] == 6)
        kinds = [event["kind"] for event in record.events]
        assert kinds == [
            "instruction", "decision", "tool_feedback", "decision", "tool_feedback", "stage_end",
            "instruction", "decision", "tool_feedback", "decision", "stage_end",
        ]  # fmt: skip
        assert record.events[4]["message"]["tool_call_id"] == "call_2_0"
        assert record.eligibility["structural"] is True
        call = record.events[1]["message"]["tool_calls"][0]
        assert call["function"] == {
            "name": "press_button",
            "arguments": '{"target_robot_name": "panda", "id": "sw0"}',
        }
        assert record.events[2]["message"]["tool_call_id"] == call["id"]
        assert record.events[5] == {
            "id": "e5", "kind": "stage_end", "stage_id": 0, "result": "success", "state": "optimal"
        }  # fmt: skip


def test_blamed_and_failed_decisions_are_not_trainable(tmp_path: Path) -> None:
    """The decision a diagnosis blamed (all its calls failed) is kept but never a target."""
    with _open(tmp_path, coached_save(tmp_path / "run-1")) as lib:
        record = next(r for r in trajectories(lib) if r.locator["candidate_ids"][-1] == 3)
        assert [event["trainable"] for event in record.decisions] == [True, False]
        assert record.eligibility["training"] is False
        assert "ended in failure" in record.eligibility["reasons"]


def test_coached_path_carries_its_lineage(tmp_path: Path) -> None:
    """The coached alternative's path is a coached correction with its attempt id."""
    with _open(tmp_path, coached_save(tmp_path / "run-1")) as lib:
        record = next(r for r in trajectories(lib) if r.locator["candidate_ids"][-1] == 7)
        assert record.provenance is Provenance.COACHED_CORRECTION
        assert record.coaching["attempt_ids"] == [1]
        assert record.decisions[-1]["provenance"] == "coached_correction"


def test_human_correction_lineage_route_and_diagnosis(tmp_path: Path) -> None:
    """A person's correction is `human_correction`, with its request, route and diagnosis."""
    with _open(tmp_path, human_save(tmp_path / "human-1")) as lib:
        rows = lib.select(DatasetQuery(demonstration_provenance="human_correction"))
        assert len(rows) == 1
        record = lib.get_trajectory(rows[0].trajectory_id).trajectory
        assert record.coaching == {
            "request_ids": ["req-9"],
            "attempt_ids": [4],
            "routes": ["failure"],
            "diagnoses": ["the label says sw0"],
        }
        assert lib.routes(record.id) == ["failure"]
        assert [row.trajectory_id for row in lib.select(DatasetQuery(routes="failure"))] == [
            record.id
        ]


def test_magma_gen_shapes_are_read(tmp_path: Path) -> None:
    """An object task description, a `finished` status and a step-summary execution load."""
    with _open(tmp_path, magma_save(tmp_path / "magma-1")) as lib:
        records = {r.locator["candidate_ids"][-1]: r for r in trajectories(lib)}
        assert records[0].task["description"] == "press the one button"
        assert records[0].outcome is Outcome.SUCCESS
        assert records[0].quality_tier is QualityTier.OPTIMAL
        assert records[0].environment["generator"] == "magma-gen"
        assert records[1].decisions[0]["trainable"] is False  # per_robot_status: bad_call
        assert records[1].outcome is Outcome.FAILURE
        assert records[1].events[-1] == {
            "id": "e2", "kind": "stage_end", "stage_id": 0, "result": "failure", "state": "exceeded"
        }  # fmt: skip


def test_same_task_text_in_either_shape_is_one_task(tmp_path: Path) -> None:
    """The task key reads the text from a string or from MAGMA-GEN's object alike."""
    with _open(tmp_path, magma_save(tmp_path / "magma-1")) as lib:
        key = lib.select()[0].task_key
    assert key.startswith("buttons/sw7/")


def test_a_task_without_text_is_named_by_its_stage_goals() -> None:
    """MAGMA-GEN's object with no task text gives its stage goals, in order, as the text."""
    described = {
        "task_description": None,
        "stages_description": [{"goal_description": "press sw0"}, {"goal_description": "say"}],
        "coaching_hint": None,
    }
    assert description_text(described) == "press sw0 / say"
    assert description_text({"task_description": "press", "stages_description": []}) == "press"
    assert description_text("press sw0") == "press sw0"
