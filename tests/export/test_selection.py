"""Selection arithmetic: descendant scores, the 0.1 thresholds, eligibility, origin-blindness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gencoach.export.selection import select
from gencoach.graph import read_save
from tests.support.saved_runs import candidate, press, single_situation, stage, write_run


def _selected(folder: Path, *candidates: dict[str, object]) -> dict[int, float]:
    graph = read_save(single_situation(folder, candidates))
    return {example.candidate_id: example.score for example in select(graph)}


def test_score_adds_discounted_stage_ratios_in_stage_order(tmp_path: Path) -> None:
    """Depth 1 is the first stage below, weighted 0.4; depth 2 0.16; non-optimal counts half."""
    score = {"stage_0": stage(2, 0, 0, 2), "stage_1": stage(0, 2, 0, 4)}
    assert _selected(tmp_path, candidate(0, press("sw0"), "ongoing", score)) == {
        0: pytest.approx(0.4 * 1 + 0.16 * (0.5 * 2) / 4)
    }


def test_stages_are_ordered_by_number_not_by_name(tmp_path: Path) -> None:
    """`stage_10` comes after `stage_2`, so it is the one discounted at depth 2."""
    score = {"stage_10": stage(0, 0, 0, 1), "stage_2": stage(1, 0, 0, 1)}
    assert _selected(tmp_path, candidate(0, press("sw0"), "ongoing", score)) == {
        0: pytest.approx(0.4)
    }


def test_failed_trajectories_dilute_through_the_total(tmp_path: Path) -> None:
    """total_child counts failures too: 1 optimal + 1 non-optimal out of 4 scores 0.4 * 1.5/4."""
    score = {"stage_0": stage(1, 1, 0, 4)}
    assert _selected(tmp_path, candidate(0, press("sw0"), "optimal", score)) == {
        0: pytest.approx(0.15)
    }


def test_a_situation_whose_best_is_exactly_0_1_gives_nothing(tmp_path: Path) -> None:
    """A best score of 0.1 (1 optimal in 4 at depth 1) is not enough: the threshold is > 0.1."""
    score = {"stage_0": stage(1, 0, 0, 4)}
    assert _selected(tmp_path, candidate(0, press("sw0"), "optimal", score)) == {}


def test_a_best_just_above_0_1_is_kept(tmp_path: Path) -> None:
    """3 optimal in 10 scores 0.12, above the threshold."""
    score = {"stage_0": stage(3, 0, 0, 10)}
    assert _selected(tmp_path, candidate(0, press("sw0"), "optimal", score)) == {
        0: pytest.approx(0.12)
    }


def test_candidates_within_0_1_of_the_best_are_kept_and_others_dropped(tmp_path: Path) -> None:
    """Best 0.4: 0.3 is within 0.1 (despite 0.4 - 0.3 > 0.1 in floats), 0.28 is not."""
    chosen = _selected(
        tmp_path,
        candidate(0, press("sw0"), "optimal", {"stage_0": stage(1, 0, 0, 1)}),
        candidate(1, press("sw4"), "optimal", {"stage_0": stage(3, 0, 0, 4)}),
        candidate(2, press("sw9"), "optimal", {"stage_0": stage(7, 0, 0, 10)}),
    )
    assert chosen == {0: pytest.approx(0.4), 1: pytest.approx(0.3)}


def test_a_candidate_diagnosed_faulty_is_never_selected(tmp_path: Path) -> None:
    """The faulty best answer is excluded, so the next one becomes the best and is kept."""
    chosen = _selected(
        tmp_path,
        candidate(0, press("sw0"), "optimal", {"stage_0": stage(1, 0, 0, 1)}, faulty=True),
        candidate(1, press("sw4"), "optimal", {"stage_0": stage(1, 0, 0, 2)}),
    )
    assert chosen == {1: pytest.approx(0.2)}


@pytest.mark.parametrize(
    "overrides",
    [
        {"kind": "simulation_resume"},
        {"finished": False},
    ],
    ids=["simulation resume", "execution unfinished"],
)
def test_only_finished_agent_answers_are_eligible(
    tmp_path: Path, overrides: dict[str, Any]
) -> None:
    """A resume by the simulator, or an answer not executed to the end, is never an example."""
    score = {"stage_0": stage(1, 0, 0, 1)}
    record = candidate(0, press("sw0"), "optimal", score, **overrides)
    assert _selected(tmp_path, record) == {}


def test_an_error_response_is_not_eligible(tmp_path: Path) -> None:
    """An answer that did not complete has no decision to learn, whatever its score."""
    assert _selected(tmp_path, candidate(0, None, "invalid", {"stage_0": stage(1, 0, 0, 1)})) == {}


def test_origin_never_changes_a_score(tmp_path: Path) -> None:
    """A coached and a model answer with the same outcomes score the same and are both kept."""
    score = {"stage_0": stage(1, 1, 0, 2)}
    chosen = _selected(
        tmp_path,
        candidate(0, press("sw0"), "optimal", score, origin="model"),
        candidate(1, press("sw0"), "optimal", score, origin="coaching", attempts=[3]),
    )
    assert chosen == {0: pytest.approx(0.3), 1: pytest.approx(0.3)}


def test_the_coached_run_selects_the_hand_worked_examples(tmp_path: Path) -> None:
    """In the coached run: c0, c2, c5, c6 and the coached c7; c4 trails c5 by 0.2, c3 is faulty."""
    graph = read_save(write_run(tmp_path / "run"))
    chosen = [(e.situation_id, e.candidate_id, round(e.score, 9)) for e in select(graph)]
    assert chosen == [(0, 0, 0.32), (1, 2, 0.52), (2, 5, 0.4), (3, 6, 0.4), (4, 7, 0.4)]


def test_min_score_drops_examples_below_it(tmp_path: Path) -> None:
    """With a minimum of 0.45, only c2 (0.52) of the coached run remains."""
    graph = read_save(write_run(tmp_path / "run"))
    assert [e.candidate_id for e in select(graph, min_score=0.45)] == [2]
