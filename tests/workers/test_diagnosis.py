"""Diagnosis: the single-step rule, LLM answers mapped back to steps, ranges, declines, examples."""

from __future__ import annotations

from typing import Any

import pytest

from gencoach.errors import BackendAnswerError
from gencoach.protocol.jobs import Diagnosis
from gencoach.workers.backends import make_backend
from gencoach.workers.diagnosis import RULE_FIXES, STAGE_ENDS, Verdict, diagnose
from gencoach.workers.transcripts import Transcript
from tests.support.backends import openai_settings
from tests.support.llm_server import ScriptedLLMServer, json_reply
from tests.workers.builders import FAILURE_ANSWER, diagnosis_job, example, step

SINGLE = [step(11, "sw1", diagnosable=False), step(12, "sw9", flag="bad_call", reason="no sw9")]


async def _diagnose(server: ScriptedLLMServer, transcript: Transcript, **job: Any) -> Verdict:
    async with make_backend("coach", openai_settings(server.endpoint)) as backend:
        return await diagnose(diagnosis_job(**job), backend, transcript)


@pytest.mark.parametrize("route", ["failure", "no_action", "exceeded"])
@pytest.mark.asyncio
async def test_one_diagnosable_step_is_diagnosed_by_rule_without_the_llm(
    llm_server: ScriptedLLMServer, route: str
) -> None:
    """With one diagnosable step, that step is blamed with the failure reason; no LLM request."""
    transcript = Transcript()
    verdict = await _diagnose(llm_server, transcript, route=route, trajectory=SINGLE)
    assert verdict == Verdict(
        "done",
        Diagnosis(
            step_id=12,
            decision_index=1,
            explanation="panda: sw9 does not exist",
            expected_decision=RULE_FIXES[route],
            rule="single_step",
        ),
    )
    assert llm_server.requests == []
    (note,) = transcript.logs
    assert note.coaching_type == "diagnosis"
    assert "one diagnosable decision (step 12), no model call" in note.content


@pytest.mark.asyncio
async def test_the_rule_falls_back_to_the_stage_end_and_covers_suboptimal(
    llm_server: ScriptedLLMServer,
) -> None:
    """Without a failure reason the rule names the stage end; a suboptimal stage is blamed too."""
    idle = await _diagnose(
        llm_server, Transcript(), route="no_action", failure_reason=None, trajectory=SINGLE
    )
    assert idle.diagnosis is not None
    assert idle.diagnosis.explanation == STAGE_ENDS["no_action"]
    transcript = Transcript()
    long = await _diagnose(llm_server, transcript, route="suboptimal", trajectory=SINGLE)
    assert long.status == "done"
    assert long.diagnosis == Diagnosis(
        step_id=12,
        decision_index=1,
        explanation=STAGE_ENDS["suboptimal"],
        expected_decision=None,
        rule="single_step",
    )
    assert transcript.logs[0].coaching_type == "suboptimal_diagnosis"
    assert llm_server.requests == []


@pytest.mark.asyncio
async def test_a_multi_step_failure_maps_the_llm_decision_to_its_step(
    llm_server: ScriptedLLMServer,
) -> None:
    """Decision 2 of the LLM is the second diagnosable step (id 13), and the prompt shows it."""
    llm_server.script(json_reply(FAILURE_ANSWER))
    transcript = Transcript()
    verdict = await _diagnose(llm_server, transcript)
    assert verdict == Verdict(
        "done",
        Diagnosis(
            step_id=13,
            decision_index=2,
            explanation="pressed sw0 first",
            expected_decision='say("sw4")',
            rule="llm",
        ),
    )
    (request,) = llm_server.requests
    prompt = request.body["messages"][1]["content"]
    assert 'DECISION 2: panda.press_button({"id": "sw9"})' in prompt
    assert "ERROR_FLAG=bad_call; message=sw9 does not exist" in prompt
    assert request.body["response_format"]["json_schema"]["name"] == "FailureDiagnosisAnswer"
    (log,) = transcript.logs
    assert log.coaching_type == "diagnosis"
    assert '"decision_index": 2' in log.content
    assert "## user" in log.content
    assert transcript.usage.total_tokens == 15


@pytest.mark.asyncio
async def test_an_out_of_range_decision_is_asked_again_naming_the_range(
    llm_server: ScriptedLLMServer,
) -> None:
    """Decision 3 of 2 is refused like malformed JSON: re-asked once with the allowed range."""
    wrong = {**FAILURE_ANSWER, "decision_index": 3}
    llm_server.script(json_reply(wrong), json_reply({**FAILURE_ANSWER, "decision_index": 1}))
    transcript = Transcript()
    verdict = await _diagnose(llm_server, transcript)
    assert verdict.diagnosis is not None
    assert verdict.diagnosis.step_id == 12
    reask = llm_server.requests[1].body["messages"][-1]["content"]
    assert "there is no decision 3: choose a decision numbered 1 to 2" in reask
    assert [log.coaching_type for log in transcript.logs] == ["diagnosis", "diagnosis"]
    assert "Refused: invalid FailureDiagnosisAnswer: decision_index: there is no decision 3" in (
        transcript.logs[0].content
    )


@pytest.mark.asyncio
async def test_an_out_of_range_decision_twice_is_abandoned_with_both_answers(
    llm_server: ScriptedLLMServer,
) -> None:
    """Two answers naming missing decisions raise BackendAnswerError; both are logged."""
    llm_server.script(
        json_reply({**FAILURE_ANSWER, "decision_index": 3}),
        json_reply({**FAILURE_ANSWER, "decision_index": 9}),
    )
    transcript = Transcript()
    with pytest.raises(BackendAnswerError):
        await _diagnose(llm_server, transcript)
    first, second = (log.content for log in transcript.logs)
    assert '"decision_index": 3' in first
    assert '"decision_index": 9' in second


@pytest.mark.asyncio
async def test_a_suboptimal_verdict_names_the_step(llm_server: ScriptedLLMServer) -> None:
    """`suboptimal: true` with decision_idx 1 blames the first diagnosable step (id 12)."""
    answer = {"suboptimal": True, "decision_idx": 1, "reason": "sw0 was not needed"}
    llm_server.script(json_reply(answer))
    transcript = Transcript()
    verdict = await _diagnose(llm_server, transcript, route="suboptimal")
    assert verdict == Verdict(
        "done",
        Diagnosis(step_id=12, decision_index=1, explanation="sw0 was not needed"),
    )
    assert transcript.logs[0].coaching_type == "suboptimal_diagnosis"


@pytest.mark.asyncio
async def test_a_suboptimal_decline_carries_the_reason(llm_server: ScriptedLLMServer) -> None:
    """`suboptimal: false` declines with the LLM's reason and no diagnosis."""
    answer = {"suboptimal": False, "decision_idx": None, "reason": "every step was needed"}
    llm_server.script(json_reply(answer))
    verdict = await _diagnose(llm_server, Transcript(), route="suboptimal")
    assert verdict == Verdict("declined", reason="every step was needed")


@pytest.mark.asyncio
async def test_few_examples_go_into_the_prompt_without_a_selection(
    llm_server: ScriptedLLMServer,
) -> None:
    """Up to three examples are all offered, in one request."""
    llm_server.script(json_reply(FAILURE_ANSWER))
    cases = [example(n).model_dump() for n in (1, 2, 3)]
    await _diagnose(llm_server, Transcript(), examples=cases)
    (request,) = llm_server.requests
    prompt = request.body["messages"][1]["content"]
    assert all(f"CASE {n}\nSTAGE GOAL\ngoal {n}" in prompt for n in (1, 2, 3))


@pytest.mark.asyncio
async def test_many_examples_are_selected_first(llm_server: ScriptedLLMServer) -> None:
    """With five examples the LLM first picks cases; the chosen ones, renumbered, are offered."""
    llm_server.script(json_reply([5, 2, 9]), json_reply(FAILURE_ANSWER))
    transcript = Transcript()
    cases = [example(n).model_dump() for n in range(1, 6)]
    verdict = await _diagnose(llm_server, transcript, examples=cases)
    assert verdict.status == "done"
    selection, diagnosis = (r.body["messages"][1]["content"] for r in llm_server.requests)
    assert "CASE 5\nSTAGE GOAL\ngoal 5" in selection
    assert "CASE 1\nSTAGE GOAL\ngoal 5\n" in diagnosis
    assert "CASE 2\nSTAGE GOAL\ngoal 2\n" in diagnosis
    assert "goal 1\n" not in diagnosis
    assert "CASE 3" not in diagnosis
    assert [log.coaching_type for log in transcript.logs] == ["case_selection", "diagnosis"]
    assert transcript.usage.total_tokens == 30
