"""Training views: the full trajectory with its loss mask, and causal assistant turns."""

from __future__ import annotations

import json

import pytest

from gencoach.library import (
    AssistantTurnExample,
    CanonicalDatasetAdapter,
    DatasetQuery,
    FullTrajectoryExample,
    QueryError,
    TrainingView,
)
from tests.library.sources import trajectories


def _full(library: CanonicalDatasetAdapter) -> list[FullTrajectoryExample]:
    examples = list(library.iter_examples(view=TrainingView.FULL_TRAJECTORY))
    assert all(isinstance(example, FullTrajectoryExample) for example in examples)
    return examples  # type: ignore[return-value]


def _turns(library: CanonicalDatasetAdapter) -> list[AssistantTurnExample]:
    examples = list(library.iter_examples(view="turn"))
    assert all(isinstance(example, AssistantTurnExample) for example in examples)
    return examples  # type: ignore[return-value]


def test_full_view_mask_is_aligned_and_assistant_only(library: CanonicalDatasetAdapter) -> None:
    """The loss mask has one bit per message, set only on trainable assistant messages."""
    for example in _full(library):
        assert len(example.loss_mask) == len(example.model_input) == len(example.event_ids)
        for message, bit, event_id in zip(
            example.model_input, example.loss_mask, example.event_ids, strict=True
        ):
            if bit:
                assert message["role"] == "assistant"
                assert event_id in example.target_event_ids
        pairs = zip(example.event_ids, example.loss_mask, strict=True)
        assert example.target_event_ids == [event_id for event_id, bit in pairs if bit]


def test_failed_steps_are_not_trained(library: CanonicalDatasetAdapter) -> None:
    """The blamed decision whose call failed is in the messages with a zero mask bit."""
    record = next(
        r
        for r in trajectories(library, DatasetQuery(targets="sw0-sw4"))
        if r.locator["candidate_ids"] == [0, 3]
    )
    full = next(e for e in _full(library) if e.trajectory_id == record.id)
    assert full.loss_mask == [0, 0, 1, 0, 0]  # system, user, sw0 press, feedback, sw9 press


def test_outcomes_stay_out_of_the_model_input(library: CanonicalDatasetAdapter) -> None:
    """Outcome, reward and tier are in metadata; no message mentions them."""
    for example in _full(library):
        assert example.metadata["outcome"] in {"success", "failure", "ongoing", "unknown"}
        text = json.dumps(example.model_input)
        assert "quality_tier" not in text
        assert "outcome" not in text
        assert "stage_end" not in text


def test_turns_see_only_what_came_before(library: CanonicalDatasetAdapter) -> None:
    """Each turn's context is the prefix of the full conversation up to its target."""
    full = {example.trajectory_id: example for example in _full(library)}
    for turn in _turns(library):
        whole = full[turn.trajectory_id]
        assert turn.target_index == len(turn.context)
        assert turn.context == whole.model_input[: turn.target_index]
        assert turn.supervised_target == whole.model_input[turn.target_index]
        assert turn.target_event_id == whole.event_ids[turn.target_index]
        assert "outcome" not in json.dumps(turn.context)
        assert turn.model_input == turn.context


def test_both_views_share_split_lineage_and_targets(library: CanonicalDatasetAdapter) -> None:
    """Per record, the turn examples' targets are exactly the full view's targets, with the
    same split and lineage."""
    full = {example.trajectory_id: example for example in _full(library)}
    turns: dict[str, list[AssistantTurnExample]] = {}
    for turn in _turns(library):
        turns.setdefault(turn.trajectory_id, []).append(turn)
    assert set(turns) == set(full)
    for trajectory_id, whole in full.items():
        mine = turns[trajectory_id]
        assert [turn.target_event_id for turn in mine] == whole.target_event_ids
        assert {turn.split for turn in mine} == {whole.split}
        for turn in mine:
            lineage = {k: v for k, v in turn.metadata["lineage"].items() if k != "turn_id"}
            assert lineage == {
                k: v for k, v in whole.metadata["lineage"].items() if k != "turn_ids"
            }
        assert whole.metadata["lineage"]["turn_ids"] == whole.target_event_ids


def test_a_bad_view_name_is_refused(library: CanonicalDatasetAdapter) -> None:
    """An unknown view names the field and the accepted values."""
    with pytest.raises(QueryError, match=r"^view: unknown value 'sideways'"):
        list(library.iter_examples(view="sideways"))


def test_batches_are_bounded_lists(library: CanonicalDatasetAdapter) -> None:
    """Batches hold at most `size` examples and together every example, in order."""
    flat = [example.sample_id for example in library.iter_examples(view="turn")]
    batches = list(library.iter_batches(4, view="turn"))
    assert all(1 <= len(batch) <= 4 for batch in batches)
    assert [example.sample_id for batch in batches for example in batch] == flat
