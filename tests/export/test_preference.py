"""The `preference` format: proven answers against the ones they replaced or outlived."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gencoach.protocol import SituationRecord
from tests.export.expected import PRESS_TOOL, SYSTEM, feedback, press_turn
from tests.support.exports import Export, read_rows
from tests.support.saved_runs import FEEDBACK, coached_run, write_run


def _pairs(source: Path) -> list[dict[str, Any]]:
    return read_rows(source / "datasets" / "preference" / "preference.jsonl")


def test_the_coached_answer_is_chosen_over_the_faulty_one(export: Export, source: Path) -> None:
    """S1 and its coached copy S4 form one situation: c7 (proven) against c3 (faulty)."""
    write_run(source / "run", coached_run(plain=True))
    outcome = export("preference")
    assert outcome.rows == {"preference": 1}
    (row,) = _pairs(source)
    assert row == {
        "prompt": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "press sw0, then sw4"},
            press_turn(0, "sw0"),
            feedback(0),
        ],
        "chosen": [press_turn(7, "sw4")],
        "rejected": [press_turn(3, "sw9")],
        "tools": [PRESS_TOOL],
        "metadata": {
            "run_id": "run-1",
            "scenario": "buttons",
            "target": "sw0-sw4",
            "agent_id": "reference-agent",
            "agent_version": "1.0.0",
            "chosen": {
                "situation_id": 4,
                "candidate_id": 7,
                "attempt_ids": [1],
                "origin": "coaching",
                "decision_source": "unknown",  # the save predates decision sources
                "status": "optimal",
                "score": 0.4,
            },
            "rejected": {
                "situation_id": 1,
                "candidate_id": 3,
                "attempt_ids": [],
                "origin": "model",
                "decision_source": None,
                "status": "error",
                "score": 0.0,
                "reason": "diagnosed_faulty",
            },
        },
    }
    assert row["prompt"][-1]["content"] == FEEDBACK


def test_a_failed_sibling_is_rejected_even_undiagnosed(export: Export, source: Path) -> None:
    """Without the faulty mark, c3 is still rejected: every trajectory below it failed."""
    situations = coached_run(plain=True)
    situations[1].candidates[1].coaching.diagnosed_as_faulty = False
    write_run(source / "run", situations)
    export("preference")
    (row,) = _pairs(source)
    assert row["metadata"]["rejected"]["candidate_id"] == 3
    assert row["metadata"]["rejected"]["reason"] == "failed"


def test_uncoached_answers_are_chosen_when_coached_only_is_off(
    export: Export, source: Path
) -> None:
    """`coached_only: false` lets c2 (a model answer that succeeded) face c3 as well."""
    write_run(source / "run", coached_run(plain=True))
    export("preference", options={"coached_only": False})
    chosen = [
        (row["metadata"]["chosen"]["candidate_id"], row["metadata"]["rejected"]["candidate_id"])
        for row in _pairs(source)
    ]
    assert chosen == [(2, 3), (7, 3)]


def test_no_coaching_means_no_pairs(export: Export, source: Path) -> None:
    """Without a coached copy nothing is proven: the files are written, empty."""
    situations = [s for s in coached_run(plain=True) if s.id != 4]
    situations[0].candidates[0].links.pop()
    write_run(source / "run", situations)
    outcome = export("preference")
    assert outcome.rows == {"preference": 0}
    assert (source / "datasets" / "preference" / "preference.jsonl").read_text() == ""


def test_an_unproven_coached_answer_is_not_chosen(export: Export, source: Path) -> None:
    """A coached answer whose stage saw no success below it proves nothing."""
    situations = coached_run(plain=True)
    coached = situations[4].candidates[0]
    coached.score["stage_0"] = coached.score["stage_0"].from_counts(0, 0, 0, 1)
    write_run(source / "run", situations)
    assert export("preference").rows == {"preference": 0}


def _made_by(situations: list[SituationRecord], candidate_id: int, source: str) -> None:
    """Make the candidate a correction whose decision came from `source`."""
    for situation in situations:
        for candidate in situation.candidates:
            if candidate.id == candidate_id:
                candidate.origin = "coaching"
                candidate.coaching_source = {"request_id": "r1", "decision_source": source}


def test_both_sides_name_where_their_decision_came_from(export: Export, source: Path) -> None:
    """The chosen correction's `decision_source` is in its metadata; the rejected model
    answer, which is no correction, says null."""
    situations = coached_run(plain=True)
    _made_by(situations, 7, "expected_decision")
    write_run(source / "run", situations)
    export("preference")
    (row,) = _pairs(source)
    assert row["metadata"]["chosen"]["decision_source"] == "expected_decision"
    assert row["metadata"]["rejected"]["decision_source"] is None


@pytest.mark.parametrize(
    ("fallback", "left"),
    [(7, [(2, 3)]), (3, [])],
    ids=["chosen", "rejected"],
)
def test_exclude_fallbacks_leaves_out_pairs_with_a_fallback_made_answer(
    export: Export, source: Path, fallback: int, left: list[tuple[int, int]]
) -> None:
    """With `exclude_fallbacks`, a fallback-made correction is neither chosen (c7) nor
    rejected (c3): the pairs holding it go, the others stay; without it, both sides say
    `fallback` where it is one."""
    situations = coached_run(plain=True)
    _made_by(situations, fallback, "fallback")
    write_run(source / "run", situations)

    def pairs(**options: Any) -> list[tuple[int, int]]:
        export("preference", options={"coached_only": False, **options})
        rows = _pairs(source)
        return [
            (r["metadata"]["chosen"]["candidate_id"], r["metadata"]["rejected"]["candidate_id"])
            for r in rows
        ]

    assert pairs() == [(2, 3), (7, 3)]
    side = "chosen" if fallback == 7 else "rejected"
    sources = {
        r["metadata"][side]["candidate_id"]: r["metadata"][side]["decision_source"]
        for r in _pairs(source)
    }
    assert sources[fallback] == "fallback"
    assert pairs(exclude_fallbacks=True) == left
