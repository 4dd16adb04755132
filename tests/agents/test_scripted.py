"""The scripted policy: solves every reference scenario, and makes each mistake on demand."""

from __future__ import annotations

from typing import Any

import pytest

from gencoach.agents.reference import MISTAKES, MistakeRates, ReferenceOptions, reference_app
from gencoach.sim import SCENARIOS, Episode
from tests.agents.play import ask, play, situation_input
from tests.support.agent_server import Serve


def _agent(serve: Serve, seed: int = 0, **rates: float) -> str:
    return serve(reference_app(ReferenceOptions(rates=MistakeRates(**rates), seed=seed)))


@pytest.mark.asyncio
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
async def test_solves_every_scenario_optimally_without_mistakes(
    serve: Serve, scenario: str
) -> None:
    """With zero mistake rates, every stage of every scenario ends in optimal success."""
    url = _agent(serve)
    for seed in range(4):
        played = await play(url, scenario, seed)
        assert played.finished
        ends = [o.stage_end for o in played.outcomes if o.stage_end is not None]
        assert ends, played
        assert all(end.event == "success" and end.state == "optimal" for end in ends), ends
        assert len(ends) == len(Episode.start(scenario, seed).stages)


async def _first(url: str, scenario: str, seed: int = 1) -> dict[str, Any]:
    episode = Episode.start(scenario, seed)
    item = situation_input(episode, {"type": "user", "content": episode.instruction()}, {})
    output = await ask(url, item)
    assert output.output is not None
    return output.output.model_dump(mode="json")


@pytest.mark.asyncio
async def test_wrong_argument_fails_the_stage(serve: Serve) -> None:
    """A wrong button id ends the buttons stage in failure."""
    played = await play(_agent(serve, wrong_argument=1.0), "buttons", 1)
    assert played.last.stage_end is not None
    assert played.last.stage_end.event == "failure"
    assert "press 1 was" in played.last.reason


@pytest.mark.asyncio
async def test_skipped_prerequisite_deposes_before_taking(serve: Serve) -> None:
    """Sorting starts by deposing an object no robot took."""
    decision = await _first(_agent(serve, skipped_prerequisite=1.0), "sorting")
    [call] = decision["tool_calls"]
    assert call["name"] == "depose"
    episode = Episode.start("sorting", 1)
    step = episode.step(decision)
    assert step.results[0].message == "nothing is held"


@pytest.mark.asyncio
async def test_malformed_answers_mix_words_and_calls_or_misname_tools(serve: Serve) -> None:
    """Malformed answers either say words with calls or call a tool that does not exist."""
    url = _agent(serve, malformed=1.0)
    kinds = set()
    for seed in range(8):
        decision = await _first(url, "buttons", seed)
        names = {call["name"] for call in decision["tool_calls"]}
        if decision["say"] and decision["tool_calls"]:
            kinds.add("both")
        elif names - {"press_button"}:
            kinds.add("unknown tool")
    assert kinds == {"both", "unknown tool"}


@pytest.mark.asyncio
async def test_a_detour_makes_the_stage_suboptimal(serve: Serve) -> None:
    """One needless call per stage: the stage succeeds beyond its target."""
    played = await play(_agent(serve, detour=1.0), "buttons", 2)
    assert played.decisions[0].tool_calls[0].name == "cancel_current_action"
    assert played.last.stage_end is not None
    assert (played.last.stage_end.event, played.last.stage_end.state) == ("success", "acceptable")
    assert played.last.status == "suboptimal"


@pytest.mark.asyncio
async def test_no_action_answers_words_alone(serve: Serve) -> None:
    """An answer without action ends an action stage with no_action."""
    played = await play(_agent(serve, no_action=1.0), "two_stage", 0)
    assert played.decisions[0].tool_calls == []
    assert played.last.stage_end is not None
    assert played.last.stage_end.event == "no_action"


@pytest.mark.asyncio
async def test_mistakes_are_reproducible_per_seed(serve: Serve) -> None:
    """Two agents with the same seed answer alike; another seed answers otherwise."""
    rates = dict.fromkeys(MISTAKES, 0.3)
    first, again = _agent(serve, seed=7, **rates), _agent(serve, seed=7, **rates)
    other = _agent(serve, seed=8, **rates)
    answers = [await _first(first, "sorting", seed) for seed in range(8)]
    assert answers == [await _first(again, "sorting", seed) for seed in range(8)]
    assert answers != [await _first(other, "sorting", seed) for seed in range(8)]


def test_rates_outside_zero_one_are_refused() -> None:
    """A rate above 1 fails at start-up, naming the rate and the value."""
    with pytest.raises(ValueError, match=r"detour must be within \[0, 1\], got 1.5"):
        MistakeRates(detour=1.5)
