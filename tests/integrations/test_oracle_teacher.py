"""The oracle teacher: expected decisions with the oracle's arguments, and replays that
never share an env between concurrent jobs, through the real `python` backend."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from gencoach.config.settings import BackendSettings
from gencoach.protocol import AgentDecision, FailureDiagnosisAnswer
from gencoach.workers.backends import ChatMessage, PythonBackend

pytest.importorskip("gymnasium")
pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]


def _job(
    decision: dict[str, Any], adapter: dict[str, Any] | None = None, actions: Any = ()
) -> dict[str, Any]:
    """A failure job on the lake's situation after `actions` (seed 0)."""
    agent_input = {"id": 7, "instruction": {"type": "user", "content": "Walk to G."}}
    step = {"id": 1, "input": agent_input, "output": decision}
    state = {"adapter": adapter or {}, "seed": 0, "actions": list(actions)}
    return {"route": "failure", "trajectory": [step], "teacher_state": {"7": state}}


def _call(name: str) -> dict[str, Any]:
    return {"say": "", "tool_calls": [{"name": name, "target_robot_name": "agent"}]}


async def _ask(endpoint: str, jobs: list[dict[str, Any]]) -> list[FailureDiagnosisAnswer]:
    """Each job's diagnosis, all asked at once of one backend (threads, as in a worker)."""
    settings = BackendSettings.model_validate(
        {"type": "python", "endpoint": endpoint, "timeout_s": 60}
    )
    answers: list[Any] = [None] * len(jobs)
    async with PythonBackend("teacher", settings) as backend:

        async def one(index: int) -> None:
            messages = [ChatMessage.user("diagnose")]
            answer = await backend.ask(messages, FailureDiagnosisAnswer, context=jobs[index])
            answers[index] = answer.value

        async with anyio.create_task_group() as group:
            for index in range(len(jobs)):
                group.start_soon(one, index)
    return answers


async def test_sixteen_concurrent_jobs_over_an_env_that_is_not_thread_safe() -> None:
    """16 jobs at once over envs sharing module state, each replaying three steps and
    stepping two calls along the oracle: each gets the oracle's diagnosis (the teacher
    replays one job at a time), where concurrent replays raised IndexError."""
    two_calls = {
        "say": "",
        "tool_calls": [*_call("down")["tool_calls"], *_call("up")["tool_calls"]],
    }
    jobs = [_job(two_calls, actions=[1, 1, 2]) for _ in range(16)]
    answers = await _ask("tests.integrations.sharedlake:teacher", jobs)
    for answer in answers:
        assert answer.decision_index == 1
        assert (
            answer.reason == "Decision 1: call 2 (up) departs from the oracle's agent.right()."
        ), answer.reason


async def test_an_oracle_that_answers_a_whole_call_gives_its_arguments() -> None:
    """An oracle answering `self.call("walk", direction="down")` makes the expected
    decision that call, arguments included (it had empty arguments)."""
    answers = await _ask("tests.integrations.walklake:teacher", [_job(_walk("up"), {"walk": True})])
    [answer] = answers
    expected = answer.expected_decision
    assert isinstance(expected, AgentDecision)
    assert expected.model_dump(mode="json")["tool_calls"] == [
        {"name": "walk", "arguments": {"direction": "down"}, "target_robot_name": "agent"}
    ]


def _walk(direction: str) -> dict[str, Any]:
    call = {"name": "walk", "arguments": {"direction": direction}, "target_robot_name": "agent"}
    return {"say": "", "tool_calls": [call]}
