"""Stage endings, budget accounting and stage succession, through whole decisions."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gencoach.errors import ContractError
from gencoach.sim import Episode, EpisodeOverError, Outcome, Stage, StageEnd
from tests.sim.builders import act, press, sequence_of

Make = Callable[..., Episode]


def test_success_within_target_is_optimal(make_episode: Make) -> None:
    """Doing the sequence in exactly the target number of calls ends success/optimal."""
    episode = make_episode("buttons")
    first, _, second = sequence_of(episode)
    assert episode.step(act(press(first))).outcome == Outcome()
    episode.step(act(press(first)))
    step = episode.step(act(press(second)))
    assert step.outcome.stage_end == StageEnd(event="success", state="optimal")
    assert step.outcome.status == "optimal"
    assert episode.finished


def test_success_beyond_target_is_suboptimal(make_episode: Make) -> None:
    """A wasted call before the sequence makes the success acceptable and the status suboptimal."""
    episode = make_episode("buttons")
    episode.step(act(press("sw9")))
    step = episode.step(act(*(press(b) for b in sequence_of(episode))))
    assert step.outcome.stage_end == StageEnd(event="success", state="acceptable")
    assert step.outcome.status == "suboptimal"


def test_wrong_button_fails_the_stage(make_episode: Make) -> None:
    """Pressing a button out of sequence ends the stage with failure and status finished."""
    episode = make_episode("buttons")
    first, _, second = sequence_of(episode)
    wrong = next(b for b in episode.world.buttons if b not in (first, second))
    step = episode.step(act(press(wrong)))
    assert step.outcome.stage_end == StageEnd(event="failure", state="optimal")
    assert step.outcome.status == "finished"
    assert step.outcome.reason == f"press 1 was {wrong}, expected {first}"
    assert episode.finished


def test_spending_the_budget_ends_exceeded(make_episode: Make) -> None:
    """Bad calls use the budget; the call that spends it ends the stage exceeded."""
    episode = make_episode("buttons")
    budget = episode.stage.max_tool_calls
    for _ in range(budget - 1):
        assert episode.step(act(press("sw9"))).outcome.stage_end is None
    step = episode.step(act(press("sw9")))
    assert step.outcome.stage_end == StageEnd(event="exceeded", state="exceeded")
    assert step.outcome.status == "finished"
    assert step.outcome.reason.startswith(f"budget of {budget} tool calls spent")


def test_answering_without_acting_ends_no_action(make_episode: Make) -> None:
    """A decision without tool calls on an action stage ends the stage with no_action."""
    episode = make_episode("sorting")
    step = episode.step(act(say="I will sort them now."))
    assert step.outcome.stage_end == StageEnd(event="no_action", state="optimal")
    assert step.outcome.status == "finished"
    assert step.results == []


def test_budget_counts_failed_calls_and_cancel(make_episode: Make) -> None:
    """Every executed call counts against the budget, refused ones and cancel included."""
    episode = make_episode("sorting")
    cancel = {"name": "cancel_current_action", "arguments": {}, "target_robot_name": "ur5"}
    depose = {"name": "depose", "arguments": {"target": "table"}, "target_robot_name": "panda"}
    episode.step(act(cancel, depose, press("sw1", robot="r2d2")))
    assert episode.tracker.state.used_tool_calls == 3
    assert episode.tracker.state.decisions == 1


def test_calls_after_the_stage_ends_are_skipped(make_episode: Make) -> None:
    """Once a call completes the stage, the decision's remaining calls are not executed."""
    episode = make_episode("buttons")
    calls = [press(b) for b in sequence_of(episode)] + [press("sw5"), press("sw5")]
    step = episode.step(act(*calls))
    assert step.outcome.stage_end == StageEnd(event="success", state="optimal")
    assert (len(step.results), step.skipped_calls) == (3, 2)
    assert len(episode.world.press_log) == 3


def test_text_question_correct_answer_succeeds(make_episode: Make) -> None:
    """The exact answer with say ends a text-only stage success/optimal."""
    episode = make_episode("text_question")
    plan = episode.optimal_plan()
    assert plan is not None
    assert plan.tool_calls == ()
    step = episode.step(act(say=plan.say))
    assert step.outcome.stage_end == StageEnd(event="success", state="optimal")


@pytest.mark.parametrize("say", ["", "purple", "It is red."])
def test_text_question_other_answers_fail(make_episode: Make, say: str) -> None:
    """An empty or inexact answer fails a text-only stage."""
    step = make_episode("text_question").step(act(say=say))
    assert step.outcome.stage_end is not None
    assert step.outcome.stage_end.event == "failure"


def test_text_question_refuses_tool_calls_without_executing_them(make_episode: Make) -> None:
    """Calling tools on a text-only stage fails it and the calls are not executed."""
    episode = make_episode("text_question")
    before = episode.world.to_json()
    plan = episode.optimal_plan()
    assert plan is not None
    step = episode.step(act(press("sw0"), say=plan.say))
    assert step.outcome.stage_end is not None
    assert step.outcome.stage_end.event == "failure"
    assert (step.results, step.skipped_calls) == ([], 1)
    assert episode.world.to_json() == before


def test_linked_second_stage_follows_a_success(make_episode: Make) -> None:
    """Success on the first stage of two begins the linked second one with a fresh budget."""
    episode = make_episode("two_stage")
    first, second = episode.stages
    assert (first.linked_to_prev, second.linked_to_prev) == (False, True)
    plan = episode.optimal_plan()
    assert plan is not None
    step = episode.step(plan.decision())
    assert (step.stage_id, step.next_stage_id) == (0, 1)
    assert step.outcome.status == "optimal"
    assert not episode.finished
    assert episode.instruction() == second.instruction
    assert episode.instruction().startswith("Now put it in the ")
    assert episode.tracker.state.used_tool_calls == 0
    plan = episode.optimal_plan()
    assert plan is not None
    step = episode.step(plan.decision())
    assert (step.stage_id, step.next_stage_id, step.outcome.status) == (1, None, "optimal")
    assert episode.finished


def test_a_finished_episode_refuses_more_decisions(make_episode: Make) -> None:
    """Stepping an ended episode raises instead of silently playing on."""
    episode = make_episode("sorting")
    episode.step(act())
    with pytest.raises(EpisodeOverError):
        episode.step(act())
    assert episode.optimal_plan() is None


def test_a_malformed_decision_is_a_contract_error(make_episode: Make) -> None:
    """A decision whose shape is broken is refused with the offending field named."""
    episode = make_episode("buttons")
    with pytest.raises(ContractError) as caught:
        episode.step({"say": "", "tool_calls": [{"name": 3, "arguments": {}}]})
    assert caught.value.fields == ["tool_calls.0.name"]
    assert episode.tracker.state.decisions == 0


@pytest.mark.parametrize(
    ("event", "state", "status"),
    [
        ("success", "optimal", "optimal"),
        ("success", "acceptable", "suboptimal"),
        ("failure", "optimal", "finished"),
        ("no_action", "acceptable", "finished"),
        ("exceeded", "exceeded", "finished"),
    ],
)
def test_stage_end_maps_to_candidate_status(event: str, state: str, status: str) -> None:
    """Each stage end gives the documented candidate status."""
    assert StageEnd.model_validate({"event": event, "state": state}).status == status


def test_stage_budget_must_cover_the_target() -> None:
    """A stage whose target exceeds its budget cannot be defined."""
    with pytest.raises(ValueError, match="target_tool_calls"):
        Stage(0, "go", "gone", "", (), target_tool_calls=3, max_tool_calls=2)
    with pytest.raises(ValueError, match="text-only"):
        Stage(0, "say", "said", "", (), target_tool_calls=0, max_tool_calls=1, text_only=True)


def test_stage_describes_itself_in_the_event_shape(make_episode: Make) -> None:
    """`describe` gives exactly the fields of the situation event's stage object."""
    described = make_episode("buttons").stage.describe()
    assert set(described) == {
        "id",
        "goal",
        "hint",
        "text_only",
        "target_tool_calls",
        "max_tool_calls",
        "linked_to_prev",
    }
    assert (described["target_tool_calls"], described["max_tool_calls"]) == (3, 6)
