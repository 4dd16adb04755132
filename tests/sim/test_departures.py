"""Judging one decision against the optimal plans from the state it was taken in."""

from __future__ import annotations

from gencoach.protocol import AgentDecision
from gencoach.sim import Episode
from gencoach.sim.departures import judge
from tests.sim.trajectories import sequence
from tests.support.players import act, call

A, _, B = sequence()


def decision(*calls: dict[str, object], say: str = "") -> AgentDecision:
    """An AgentDecision of these calls."""
    return AgentDecision.model_validate(act(*calls, say=say))


def test_an_injected_failure_is_no_departure() -> None:
    """A call that failed by injection spent nothing and changed nothing: it stays on plan."""
    state = Episode.start("buttons", 0, injection_probability=1.0).snapshot()
    judgement = judge(state, decision(call("press_button", id=A)))
    assert judgement is not None
    assert not judgement.departs


def test_one_decision_completing_the_stage_optimally_stays_on_plan() -> None:
    """Three presses in one decision complete the stage with exactly the plan's calls."""
    state = Episode.start("buttons", 0).snapshot()
    presses = [call("press_button", id=button) for button in (A, A, B)]
    judgement = judge(state, decision(*presses))
    assert judgement is not None
    assert not judgement.departs
    assert judgement.expected_text == f'panda.press_button(id="{A}")'


def test_no_decision_departs() -> None:
    """A step without a decision (an agent error) departs, with the expected decision."""
    judgement = judge(Episode.start("buttons", 0).snapshot(), None)
    assert judgement is not None
    assert judgement.departs
    assert judgement.why == "the agent gave no decision"


def test_a_lost_stage_has_no_plan_to_judge_against() -> None:
    """Once the stage has failed there is no plan left: no judgement."""
    episode = Episode.start("buttons", 0)
    episode.step(act(call("press_button", id="sw5" if A != "sw5" else "sw4")))
    assert judge(episode.snapshot(), decision(call("press_button", id=A))) is None
