"""The injected one-shot tool failure: when it fires, what it does, how it is reported."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import ValidationError

from gencoach.sim import INJECTION_MESSAGE, Episode, Injection, StageEnd
from tests.sim.builders import act, press, sequence_of

Make = Callable[..., Episode]


def test_injected_failure_changes_nothing_and_shows_only_the_message(make_episode: Make) -> None:
    """The injected call fails with the retry message, flagged injection_error, world intact."""
    episode = make_episode("buttons", probability=1.0)
    first = sequence_of(episode)[0]
    before = episode.world.model_copy(deep=True)
    step = episode.step(act(press(first)))
    (result,) = step.results
    assert (result.result, result.error_flag, result.message) == (
        False,
        "injection_error",
        INJECTION_MESSAGE,
    )
    assert result.feedback_text == (
        "panda: press_button failed with message: temporary execution error. Please retry."
    )
    assert step.feedback["failure_reason"] == f"panda: {INJECTION_MESSAGE}"
    assert "injection" not in str(step.feedback)
    assert episode.world.press_log == before.press_log
    assert episode.world.buttons == before.buttons


def test_injection_is_one_shot_per_stage(make_episode: Make) -> None:
    """Even at probability 1 the retry succeeds, and the stage still ends optimal."""
    episode = make_episode("buttons", probability=1.0)
    first, _, second = sequence_of(episode)
    assert episode.step(act(press(first))).results[0].error_flag == "injection_error"
    step = episode.step(act(press(first), press(first), press(second)))
    assert [r.error_flag for r in step.results] == ["none", "none", "none"]
    assert step.outcome.stage_end == StageEnd(event="success", state="optimal")


def test_injected_call_is_not_counted_in_the_budget(make_episode: Make) -> None:
    """A call that failed by injection does not use the stage's budget."""
    episode = make_episode("buttons", probability=1.0)
    episode.step(act(press(sequence_of(episode)[0])))
    assert episode.tracker.state.used_tool_calls == 0


def test_injection_is_reported_as_an_active_error(make_episode: Make) -> None:
    """The injected failure is recorded as the stage's active error with its call."""
    episode = make_episode("buttons", probability=1.0)
    first = sequence_of(episode)[0]
    step = episode.step(act(press(first)))
    (error,) = step.active_errors
    assert error.code == "injection_error"
    assert error.description == INJECTION_MESSAGE
    assert error.details == {"robot": "panda", "tool": "press_button", "arguments": {"id": first}}
    assert episode.active_errors == step.active_errors


def test_refused_calls_and_cancel_draw_no_injection(make_episode: Make) -> None:
    """Only calls that would succeed can be injected: bad calls and cancel never are."""
    episode = make_episode("buttons", probability=1.0)
    cancel = {"name": "cancel_current_action", "arguments": {}, "target_robot_name": "panda"}
    step = episode.step(act(press("sw9"), cancel, press("sw1", robot="r2d2")))
    assert [r.error_flag for r in step.results] == ["bad_call", "none", "bad_call"]
    assert episode.world.injection.draws == 0
    assert step.active_errors == []


def test_each_stage_gets_its_own_shot_and_fresh_active_errors(make_episode: Make) -> None:
    """After a success the next stage is rearmed and starts with no active error."""
    episode = make_episode("two_stage", probability=1.0)
    for stage_id in (0, 1):
        plan = episode.optimal_plan()
        assert plan is not None
        injected = episode.step(plan.decision())
        assert injected.results[0].error_flag == "injection_error"
        assert len(episode.active_errors) == 1
        done = episode.step(plan.decision())
        assert (done.stage_id, done.outcome.status) == (stage_id, "optimal")
        assert len(done.active_errors) == 1
    assert episode.finished


def test_probability_zero_never_fires() -> None:
    """With probability 0 the injection never fires and draws nothing."""
    injection = Injection(probability=0.0, shots_per_stage=100, shots_left=100)
    assert not any(injection.fire() for _ in range(200))
    assert injection.draws == 0


def test_draws_follow_the_probability_and_the_seed() -> None:
    """Firing frequency matches the probability, and the same seed fires at the same draws."""

    def pattern(seed: int) -> list[bool]:
        injection = Injection(probability=0.3, seed=seed, shots_per_stage=10**6, shots_left=10**6)
        return [injection.fire() for _ in range(2000)]

    assert 0.25 < sum(pattern(1)) / 2000 < 0.35
    assert pattern(1) == pattern(1)
    assert pattern(1) != pattern(2)


def test_probability_outside_zero_one_is_refused() -> None:
    """A probability above 1 is not a valid setting."""
    with pytest.raises(ValidationError):
        Injection(probability=1.5)
