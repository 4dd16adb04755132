"""MAGMA-GEN 2.0 saves: run config, situation and candidate records, scores and markers."""

from __future__ import annotations

from typing import Any

import pytest

from gencoach import protocol as p
from tests.protocol import examples as ex
from tests.protocol import records as rx
from tests.protocol.examples import expect_refusal


def _magma_candidate(id: int = 10) -> dict[str, Any]:
    """A candidate as a MAGMA save may hold it: empty score and coaching, no extras."""
    data = rx.candidate_record(id)
    data.update(score={}, coaching={}, coaching_source={}, coaching_attempt_ids=[], links=[])
    return data


def test_magma_save_without_producer_loads() -> None:
    """A config.json as MAGMA-GEN writes it (no producer, a data folder, an object task) loads."""
    data = {k: v for k, v in rx.run_config().items() if k != "producer"}
    data["data_folder"] = "output/run-1"
    data["task_description"] = {
        "task_description": "Serve the table.",
        "stages_description": [{"stage_name": "Grasp", "goal_description": "grasp the cup"}],
        "coaching_hint": None,
    }
    config = p.RunConfig.parse(data)
    assert config.producer is None
    assert config.data_folder == "output/run-1"


@pytest.mark.parametrize(
    "version", ["2", "2.0", "2.1", "2.0.3", "2.1.0rc1", "v2.0", "2.0.post1", "2.1.dev2"]
)
def test_generator_version_of_major_two_is_accepted(version: str) -> None:
    """Any PEP 440 version of major 2 is readable, as MAGMA-GEN's reader parses it."""
    assert p.RunConfig.parse({**rx.run_config(), "generator_version": version})


@pytest.mark.parametrize(
    ("version", "words"),
    [("3.0", "major 3"), ("1.9.2", "major 1"), ("two", "not a version"), ("2.x", "not a version")],
)
def test_generator_version_of_another_major_is_refused(version: str, words: str) -> None:
    """Another major, or no version at all, is refused with a reason that says which."""
    data = {**rx.run_config(), "generator_version": version}
    error = expect_refusal(lambda: p.RunConfig.parse(data), "generator_version")
    assert words in str(error)


def test_format_version_written_is_readable() -> None:
    """The version gencoach writes is of the major it reads."""
    assert p.GRAPH_FORMAT_VERSION.startswith(f"{p.GRAPH_FORMAT_MAJOR}.")
    assert p.RunConfig.parse({**rx.run_config(), "generator_version": p.GRAPH_FORMAT_VERSION})


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"export_complete": "true"}, "export_complete"),
        ({"roots": [0, "1"]}, "roots.1"),
        ({"roots": [0, -1]}, "roots.1"),
        ({"roots": [0, 4, 0]}, "roots.2"),
        ({"task_description": ["Serve"]}, "task_description"),
    ],
)
def test_run_config_refusals(change: dict[str, Any], field: str) -> None:
    """Wrong types, and roots that are negative or repeated, are refused."""
    expect_refusal(lambda: p.RunConfig.parse({**rx.run_config(), **change}), field)


def test_stage_score_uses_the_hyphenated_key() -> None:
    """The score's non-optimal count is `non-optimal` on disk, in and out."""
    score = p.StageScore.from_counts(optimal=1, non_optimal=2, unassessed=3)
    assert score.model_dump() == {"optimal": 1, "non-optimal": 2, "unassessed": 3, "total_child": 6}
    wrong = {**rx.stage_score(), "non_optimal": 1}
    del wrong["non-optimal"]
    expect_refusal(lambda: p.StageScore.parse(wrong), "non_optimal")


def test_stage_score_total_counts_failures_too() -> None:
    """Failed trajectories count in total_child only, so it may exceed the three counts."""
    assert p.StageScore.parse({**rx.stage_score(2, 1, 0), "total_child": 5}).total_child == 5
    assert p.StageScore.from_counts(2, 1, 0, total=5).total_child == 5


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"total_child": 2}, "total_child"),
        ({"optimal": -1, "total_child": 0}, "optimal"),
        ({"unassessed": 0.5}, "unassessed"),
    ],
    ids=["total-below-counts", "negative", "float"],
)
def test_stage_score_refusals(change: dict[str, Any], field: str) -> None:
    """Counts are non-negative integers and total_child at least their sum."""
    expect_refusal(lambda: p.StageScore.parse({**rx.stage_score(), **change}), field)


@pytest.mark.parametrize(
    ("score", "field"),
    [
        ({"stage_x": rx.stage_score()}, "score.stage_x"),
        ({"2": rx.stage_score()}, "score.2"),
        ({"stage_2": {**rx.stage_score(), "total_child": 1}}, "score.stage_2.total_child"),
    ],
)
def test_descendant_score_refusals(score: dict[str, Any], field: str) -> None:
    """Score keys must be `stage_<k>` and each entry a consistent stage score."""
    expect_refusal(
        lambda: p.CandidateRecord.parse({**rx.candidate_record(), "score": score}), field
    )


def test_empty_marker_loads_with_defaults() -> None:
    """A MAGMA save's `coaching: {}` loads as an uncoached marker."""
    marker = p.CandidateRecord.parse(_magma_candidate()).coaching
    assert marker == p.CoachingMarker()
    assert (marker.type_coaching, marker.diagnosed_as_faulty, marker.diagnostic_types) == (
        None,
        False,
        [],
    )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"type_coaching": "failure"}, "type_coaching"),
        ({"type_coaching": "Failure:Say"}, "type_coaching"),
        ({"coaching_role": "root_node"}, "coaching_role"),
        ({"diagnostic_types": "failure"}, "diagnostic_types"),
    ],
)
def test_marker_refusals(change: dict[str, Any], field: str) -> None:
    """A type not of the form `<event>:<focus>` or an unknown role is refused."""
    expect_refusal(lambda: p.CoachingMarker.parse({**rx.coaching_marker(), **change}), field)


@pytest.mark.parametrize(
    "change",
    [
        {"output": None},
        {"error": ex.agent_error()},
        {"response_status": "error"},
        {"response_status": "error", "output": None},
    ],
)
def test_candidate_status_must_match_its_content(change: dict[str, Any]) -> None:
    """Completed ⇔ an output and no error; error ⇔ an error and no output."""
    data = {**rx.candidate_record(), **change}
    expect_refusal(lambda: p.CandidateRecord.parse(data), "response_status")


def test_failed_candidate_loads() -> None:
    """A candidate whose agent failed holds the error and no output."""
    data = {
        **_magma_candidate(),
        "response_status": "error",
        "output": None,
        "error": ex.agent_error(),
    }
    assert p.CandidateRecord.parse(data).error is not None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"status": "great"}, "status"),
        ({"kind": "human"}, "kind"),
        ({"origin": "human"}, "origin"),
        ({"coaching_attempt_ids": ["3"]}, "coaching_attempt_ids.0"),
        (
            {"links": [rx.situation_link(), {"situation_id": 1, "kind": "alternative"}]},
            "links.1.situation_id",
        ),
        ({"links": [{"situation_id": 1, "kind": "previous"}]}, "links.0.kind"),
    ],
)
def test_candidate_refusals(change: dict[str, Any], field: str) -> None:
    """Unknown statuses, kinds and origins, and repeated links are refused."""
    expect_refusal(lambda: p.CandidateRecord.parse({**rx.candidate_record(), **change}), field)


def test_situation_candidates_have_unique_ids() -> None:
    """Two candidates of one situation with one id are refused at the second."""
    data = {**rx.situation_record(), "candidates": [_magma_candidate(10), _magma_candidate(10)]}
    expect_refusal(lambda: p.SituationRecord.parse(data), "candidates.1.id")


@pytest.mark.parametrize(("situation_parent", "candidate_parent"), [(None, 5), (7, None), (7, 0)])
def test_situation_candidates_share_its_parent(
    situation_parent: int | None, candidate_parent: int | None
) -> None:
    """As MAGMA-GEN reads saves, a candidate's parent_id is its situation's parent_id."""
    data = {**rx.situation_record(), "parent_id": situation_parent}
    data["candidates"] = [rx.candidate_record(10, candidate_parent)]
    expect_refusal(lambda: p.SituationRecord.parse(data), "candidates.0.parent_id")


def test_situation_candidates_answer_its_stage() -> None:
    """A candidate of another stage than its situation's is refused."""
    data = {**rx.situation_record(), "candidates": [{**rx.candidate_record(10), "stage_id": 3}]}
    expect_refusal(lambda: p.SituationRecord.parse(data), "candidates.0.stage_id")


def test_situation_below_a_candidate_loads() -> None:
    """A situation reached from candidate 10 holds candidates whose parent_id is 10."""
    data = {**rx.situation_record(), "id": 1, "parent_id": 10}
    data["candidates"] = [rx.candidate_record(20, 10), rx.candidate_record(21, 10)]
    record = p.SituationRecord.parse(data)
    assert [candidate.parent_id for candidate in record.candidates] == [10, 10]
