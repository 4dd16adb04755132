"""The privileged teacher names the faulty decision and the expected one, from the saved states."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio

from gencoach.config.settings import BackendSettings, Settings
from gencoach.constants import Keys
from gencoach.protocol.agent import AgentDecision
from gencoach.protocol.decision_text import format_decision
from gencoach.protocol.jobs import DiagnosisJob
from gencoach.protocol.llm import (
    CaseSelectionAnswer,
    FailureDiagnosisAnswer,
    SuboptimalDiagnosisAnswer,
)
from gencoach.sim import Answer, Holding, ObjectsIn
from gencoach.sim.teacher import diagnose
from gencoach.workers.backends import make_backend
from gencoach.workers.context import worker_context
from gencoach.workers.diagnosis import diagnose as worker_diagnose
from gencoach.workers.prompts import RewriteAnswer
from gencoach.workers.teacher_state import job_context
from gencoach.workers.transcripts import Transcript
from tests.sim.trajectories import (
    Played,
    bins,
    diagnosis_context,
    play,
    rewrite_context,
    sequence,
)
from tests.support.players import act, call

RUN = "teach"
A, _, B = sequence()
BINS = bins()
WRONG_BIN = {
    obj: next(b for b in ("red_bin", "blue_bin") if b != right) for obj, right in BINS.items()
}


def _text(decision: AgentDecision | str | None) -> str | None:
    """The expected decision in the one-line convention, for short assertions."""
    return format_decision(decision) if isinstance(decision, AgentDecision) else decision


def press(button: str, robot: str = "panda") -> dict[str, Any]:
    """A decision pressing one button."""
    return act(call("press_button", robot=robot, id=button))


def other_button(button: str) -> str:
    """A button that is not this one."""
    return "sw5" if button != "sw5" else "sw4"


@pytest.fixture
def states(redis_url: str, redis_client: redis.Redis) -> Iterator[redis.Redis]:
    """The test Redis, installed as the worker's, where trajectories save their states."""
    with worker_context(Settings(), redis_url):
        yield redis_client


def failure(route: str, played: Played) -> FailureDiagnosisAnswer:
    """Ask the teacher the failure contract about a played trajectory."""
    schema = FailureDiagnosisAnswer.model_json_schema()
    text = diagnose([], schema=schema, model=None, context=diagnosis_context(RUN, route, played))
    return FailureDiagnosisAnswer.parse_json(text)


def suboptimal(played: Played) -> SuboptimalDiagnosisAnswer:
    """Ask the teacher the suboptimal contract about a played trajectory."""
    schema = SuboptimalDiagnosisAnswer.model_json_schema()
    context = diagnosis_context(RUN, "suboptimal", played)
    return SuboptimalDiagnosisAnswer.parse_json(diagnose([], schema=schema, context=context))


def test_buttons_wrong_argument(states: redis.Redis) -> None:
    """A wrong button is the faulty decision; the expected one presses the right button."""
    played = play(states, RUN, "buttons", [press(A), press(other_button(A))])
    assert played.last_event == "failure"
    answer = failure("failure", played)
    assert answer.decision_index == 2
    assert _text(answer.expected_decision) == f'panda.press_button(id="{A}")'
    assert f"press 2 was {other_button(A)}, expected {A}" in answer.reason


def test_buttons_detour(states: redis.Redis) -> None:
    """A needless cancel is the first decision off every optimal plan of a suboptimal success."""
    cancel = act(call("cancel_current_action"))
    played = play(states, RUN, "buttons", [press(A), cancel, press(A), press(B)])
    assert played.last_event == "success"
    answer = suboptimal(played)
    assert answer.suboptimal is True
    assert answer.decision_idx == 2
    assert "no closer" in answer.reason


def test_an_optimal_trajectory_on_another_robot_is_not_suboptimal(states: redis.Redis) -> None:
    """Any robot an optimal plan could use is accepted: nothing departs, the teacher declines."""
    played = play(states, RUN, "buttons", [press(A, "ur5"), press(A), press(B, "ur5")])
    answer = suboptimal(played)
    assert answer.suboptimal is False
    assert answer.decision_idx is None


def test_sorting_missing_prerequisite(states: redis.Redis) -> None:
    """Deposing before taking is the faulty decision; the expected one takes the object."""
    decisions = [
        act(call("depose", target=BINS["cube"])),
        act(call("take_obj", obj="cube")),
        act(call("depose", target=WRONG_BIN["cube"])),
    ]
    played = play(states, RUN, "sorting", decisions)
    assert played.last_event == "failure"
    answer = failure("failure", played)
    assert answer.decision_index == 1
    assert _text(answer.expected_decision) == 'panda.take_obj(obj="cube")'
    assert "nothing is held" in answer.reason


def test_sorting_wrong_argument(states: redis.Redis) -> None:
    """A wrong bin is the faulty decision; the expected one deposes in the bin of the colour."""
    decisions = [act(call("take_obj", obj="cube")), act(call("depose", target=WRONG_BIN["cube"]))]
    answer = failure("failure", play(states, RUN, "sorting", decisions))
    assert answer.decision_index == 2
    assert _text(answer.expected_decision) == f'panda.depose(target="{BINS["cube"]}")'


def test_sorting_detour(states: redis.Redis) -> None:
    """Putting an object on the shelf on its way to its bin is the detour."""
    decisions = [act(call("take_obj", obj="cube")), act(call("depose", target="shelf"))]
    for obj in ("cube", "ball", "cone"):
        decisions += [act(call("take_obj", obj=obj)), act(call("depose", target=BINS[obj]))]
    played = play(states, RUN, "sorting", decisions)
    assert played.last_event == "success"
    answer = suboptimal(played)
    assert (answer.suboptimal, answer.decision_idx) == (True, 2)


def test_linked_stage_missing_prerequisite(states: redis.Redis) -> None:
    """In the linked stage the robot holding nothing deposes: that stage's decision 1 is blamed."""
    holding, placing = play(None, RUN, "two_stage", []).episode.stages
    assert isinstance(holding.goals[0], Holding)
    assert isinstance(placing.goals[0], ObjectsIn)
    obj, bin_id = placing.goals[0].targets[0]
    wrong = act(call("depose", robot="ur5", target=bin_id))
    decisions = [act(call("take_obj", obj=obj)), wrong, wrong, wrong]
    played = play(states, RUN, "two_stage", decisions, diagnosable_from=1)
    assert played.last_event == "exceeded"
    answer = failure("exceeded", played)
    assert answer.decision_index == 1
    assert _text(answer.expected_decision) == f'panda.depose(target="{bin_id}")'


def test_text_question_wrong_answer_and_rewrite(states: redis.Redis) -> None:
    """A wrong colour is blamed with the exact expected answer, which the rewrite also gives."""
    played = play(states, RUN, "text_question", [act(say="green")])
    goal = played.episode.stage.goals[0]
    assert isinstance(goal, Answer)
    colour = goal.text
    answer = failure("failure", played)
    assert _text(answer.expected_decision) == f'say("{colour}")'
    schema = RewriteAnswer.model_json_schema()
    text = diagnose([], schema=schema, context=rewrite_context(RUN, played, "green"))
    assert RewriteAnswer.parse_json(text).say == colour


def test_without_states_the_last_decision_is_named(states: redis.Redis) -> None:
    """With no saved state for the run, the teacher names the last decision and says why."""
    played = play(None, RUN, "buttons", [press(A), press(other_button(A))])
    answer = failure("failure", played)
    assert answer.decision_index == 2
    assert "no state is saved for run teach" in answer.reason
    assert suboptimal(played).suboptimal is False


def test_without_teacher_state_in_the_context_the_teacher_still_answers() -> None:
    """A context without `teacher_state` gives a valid answer that says it had no state."""
    played = play(None, RUN, "buttons", [press(A), press(A), press(other_button(B))])
    context = diagnosis_context(RUN, "failure", played)
    del context["teacher_state"]
    schema = FailureDiagnosisAnswer.model_json_schema()
    answer = FailureDiagnosisAnswer.parse_json(diagnose([], schema=schema, context=context))
    assert answer.decision_index == 3
    assert "the context carries no teacher state" in answer.reason


def test_case_selection_picks_the_first_cases() -> None:
    """Asked to select cases, the teacher picks the first ones, up to the stated limit."""
    cases = "\n\n".join(f"CASE {number}\nSTAGE GOAL\ng" for number in range(1, 6))
    messages = [{"role": "user", "content": f"{cases}\nReturn at most 3 numbers."}]
    schema = CaseSelectionAnswer.model_json_schema()
    assert json.loads(diagnose(messages, schema=schema)) == [1, 2, 3]


@pytest.mark.asyncio
async def test_the_teacher_serves_as_a_python_backend(states: redis.Redis, redis_url: str) -> None:
    """Behind the worker's diagnosis, with the teacher states the worker reads from Redis, the
    teacher's answer maps to the faulty step's id."""
    played = play(states, RUN, "buttons", [press(A), press(other_button(A))])
    job_json = diagnosis_context(RUN, "failure", played)
    del job_json["teacher_state"]
    job = DiagnosisJob.parse(job_json)
    settings = BackendSettings.model_validate(
        {"type": "python", "endpoint": "gencoach.sim.teacher:diagnose"}
    )
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        context = await job_context(client, Keys(), job, [s.input.id for s in job.trajectory])
    finally:
        await client.aclose()
    teacher_state = context["teacher_state"]
    assert isinstance(teacher_state, dict)
    assert set(teacher_state) == {str(step.input.id) for step in played.steps}
    async with make_backend("teacher", settings) as backend:
        verdict = await worker_diagnose(job, backend, Transcript(), context)
    assert verdict.status == "done"
    assert verdict.diagnosis is not None
    assert verdict.diagnosis.step_id == played.steps[1].id
    assert verdict.diagnosis.expected_decision == f'panda.press_button(id="{A}")'
