"""What the generator refuses before execution, and how it reads the agent's outputs."""

from __future__ import annotations

from typing import Any

import pytest

from gencoach.protocol import AgentDecision, AgentOutput
from gencoach.sim.agent_io import CALL_FAILED, Answer, invalid_reason
from tests.support.players import act, call


def decision(data: dict[str, Any]) -> AgentDecision:
    """An AgentDecision from plain data."""
    return AgentDecision.model_validate(data)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (act(call("press_button", id="sw0"), say="ok"), "either says something or calls tools"),
        (act(call("fly")), "tool call 1 (fly): no such tool; the tools are press_button"),
        (act(call("take_obj")), "tool call 1 (take_obj): missing argument 'obj'"),
        (
            act(call("cancel_current_action", now="1")),
            "unexpected argument 'now'; it takes no arguments",
        ),
        (act(call("depose", target=3)), "argument 'target' must be a string"),
        (
            act(call("press_button", id="sw0"), call("depose", where="bin")),
            "tool call 2 (depose): unexpected argument 'where'; it takes 'target'",
        ),
    ],
)
def test_contract_breaches_are_invalid(data: dict[str, Any], reason: str) -> None:
    """Say with tools, an unknown tool, or wrong arguments make the decision invalid."""
    found = invalid_reason(decision(data))
    assert found is not None
    assert reason in found


@pytest.mark.parametrize(
    "data",
    [
        act(call("press_button", robot="r2d2", id="sw0")),
        act(call("press_button", id="sw99")),
        act(call("depose", target="moon")),
        act(say="I am done."),
        act(),
        act(call("take_obj", obj="cube"), call("depose", target="red_bin")),
    ],
)
def test_world_references_and_silence_are_valid(data: dict[str, Any]) -> None:
    """Unknown robots, buttons or places, silence and multi-call decisions go to the world."""
    assert invalid_reason(decision(data)) is None


def test_an_output_keeps_the_agents_memory_and_steps() -> None:
    """An output becomes an answer with its memory and internal steps, judged for validity."""
    output = AgentOutput.model_validate(
        {
            "request_id": "r",
            "source_id": 0,
            "candidate_index": 0,
            "status": "completed",
            "memory": {"notes": ["x"]},
            "internal_steps": [{"thought": "press"}],
            "output": act(call("fly")),
        }
    )
    answer = Answer.of(output)
    assert answer.memory == {"notes": ["x"]}
    assert answer.internal_steps == [{"thought": "press"}]
    assert answer.invalid_reason is not None
    assert not answer.executable


def test_a_failed_call_keeps_the_inputs_memory() -> None:
    """A call that gave no answer is an error candidate carrying the memory it was asked with."""
    answer = Answer.failed("timed out", {"history": [1]})
    assert answer.status == "error"
    assert answer.error is not None
    assert answer.error.code == CALL_FAILED
    assert answer.memory == {"history": [1]}
