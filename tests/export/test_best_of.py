"""`best_of`: only examples that give a row are ranked; ties go to the env's reward, then
the newest run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.exports import Export, read_rows
from tests.support.saved_runs import (
    candidate,
    executed,
    press,
    run_config,
    single_situation,
    situation,
    stage,
    write_run,
)

BEST = {"stage_0": stage(1, 0, 0, 1)}  # 0.4
NEXT = {"stage_0": stage(1, 1, 0, 2)}  # 0.3, within 0.1 of the best


def _kept(source: Path) -> list[tuple[str, int]]:
    rows = read_rows(source / "datasets" / "chat" / "chat.jsonl")
    return sorted((str(row["target"]), int(row["candidate_id"])) for row in rows)


def _task(source: Path, name: str, *candidates: dict[str, Any]) -> None:
    """A save of task `name`: one root situation, asking for `name`, answered by `candidates`."""
    config = run_config(f"run-{name}", target=name)
    write_run(source / name, [situation(0, None, candidates, content=name)], config)


def test_a_task_whose_best_answer_failed_keeps_its_next_best(export: Export, source: Path) -> None:
    """Four tasks, `best_of` 1. In `sorting` the best-scored answer (c0, 0.4) pressed sw9
    and its call failed, so it is no training target: ranked before the filter it would
    take the task's only place and the task would lose its row; c1 (0.3) is kept."""
    for name in ("buttons", "text_question", "two_stage"):
        _task(source, name, candidate(0, press("sw0"), "optimal", BEST, execution=executed("sw0")))
    failed = candidate(0, press("sw9"), "optimal", BEST, execution=executed("sw9", "bad_call"))
    recovered = candidate(1, press("sw4"), "optimal", NEXT, execution=executed("sw4"))
    _task(source, "sorting", failed, recovered)
    export("chat", options={"best_of": 1})
    assert _kept(source) == [("buttons", 0), ("sorting", 1), ("text_question", 0), ("two_stage", 0)]


def test_between_equal_scores_the_higher_reward_is_kept_before_the_newer(
    export: Export, source: Path
) -> None:
    """Two runs of one task whose answers score 0.4: the older run's answer earned the env's
    reward 0.9, the newer one's 0.2, so `best_of` 1 keeps the older; with equal rewards
    the newer run wins."""
    older = {"started_at": "2026-12-01T10:00:00Z", "run_id": "run-old"}
    newer = {"started_at": "2026-12-01T11:00:00Z", "run_id": "run-new"}
    rewarded = {**executed("sw0"), "reward": 0.9}
    single_situation(
        source / "old", [candidate(0, press("sw0"), "optimal", BEST, execution=rewarded)], **older
    )
    less = {**executed("sw0"), "reward": 0.2}
    single_situation(
        source / "new", [candidate(0, press("sw0"), "optimal", BEST, execution=less)], **newer
    )
    export("chat", options={"best_of": 1})
    rows = read_rows(source / "datasets" / "chat" / "chat.jsonl")
    assert [row["run_id"] for row in rows] == ["run-old"]

    equal = {**executed("sw0"), "reward": 0.9}
    single_situation(
        source / "new", [candidate(0, press("sw0"), "optimal", BEST, execution=equal)], **newer
    )
    export("chat", options={"best_of": 1})
    rows = read_rows(source / "datasets" / "chat" / "chat.jsonl")
    assert [row["run_id"] for row in rows] == ["run-new"]


def test_identical_answers_take_one_place(export: Export, source: Path) -> None:
    """Two siblings press sw0 alike (0.4 each), a third presses sw4 (0.3): `best_of` 2
    ranks after duplicates are removed, so the task keeps one sw0 answer and the sw4 one,
    two rows, instead of two places for one decision that dedupe then trains once.
    Without dedupe the identical answers are two rows, and take both places."""
    same = [candidate(c, press("sw0"), "optimal", BEST, execution=executed("sw0")) for c in (0, 1)]
    other = candidate(2, press("sw4"), "optimal", NEXT, execution=executed("sw4"))
    _task(source, "buttons", *same, other)
    export("chat", options={"best_of": 2})
    assert _kept(source) == [("buttons", 1), ("buttons", 2)]
    export("full-history", options={"best_of": 2})
    rows = read_rows(source / "datasets" / "full-history" / "hr_data.json")
    assert sorted(row["metadata"]["candidate_id"] for row in rows) == [1, 2]
    export("chat", options={"best_of": 2}, dedupe=False)
    assert _kept(source) == [("buttons", 0), ("buttons", 1)]
