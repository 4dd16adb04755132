"""Between equally scored candidates, the higher env reward (`execution.reward`) ranks first."""

from __future__ import annotations

from pathlib import Path

from gencoach.export.selection import select
from gencoach.graph import read_save
from tests.support.saved_runs import candidate, press, single_situation, stage


def test_equal_scores_are_ordered_by_the_envs_reward(tmp_path: Path) -> None:
    """Two candidates scoring 0.4: the one whose execution earned 0.9 comes before 0.2 and
    before one without a reward; scores still decide first."""
    same = {"stage_0": stage(1, 0, 0, 1)}
    graph = read_save(
        single_situation(
            tmp_path,
            [
                candidate(0, press("sw0"), "optimal", same),
                candidate(1, press("sw1"), "optimal", same, execution={"reward": 0.2}),
                candidate(2, press("sw2"), "optimal", same, execution={"reward": 0.9}),
            ],
        )
    )
    assert [example.candidate_id for example in select(graph)] == [2, 1, 0]
