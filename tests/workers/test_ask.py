"""`Backend.ask`: answers are validated, re-asked once with the error, then abandoned."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from gencoach.errors import BackendAnswerError
from gencoach.protocol.llm import FailureDiagnosisAnswer, SuboptimalDiagnosisAnswer
from gencoach.workers.backends import ChatMessage, Exchange, Usage, make_backend
from tests.support.backends import events, openai_settings
from tests.support.llm_server import ScriptedLLMServer, json_reply, reply

PROMPT = [ChatMessage.system("You diagnose."), ChatMessage.user("Which decision failed?")]
DIAGNOSIS = {"decision_index": 3, "reason": "grasped too early", "expected_decision": None}


@pytest.mark.asyncio
async def test_malformed_json_is_asked_again_with_the_error(
    llm_server: ScriptedLLMServer,
) -> None:
    """Malformed JSON is re-asked once, the second prompt naming the error; then it succeeds."""
    malformed = '{"decision_index": 3, "reason": "grasped too early",'
    llm_server.script(reply(malformed, usage=(100, 20)), json_reply(DIAGNOSIS, usage=(140, 25)))
    with capture_logs() as logs:
        async with make_backend("coach", openai_settings(llm_server.endpoint)) as backend:
            answer = await backend.ask(PROMPT, FailureDiagnosisAnswer)
    assert answer.value.decision_index == 3
    assert answer.usage == Usage(240, 45, 285)
    second = llm_server.requests[1].body["messages"]
    assert second[:2] == llm_server.requests[0].body["messages"]
    assert second[2] == {"role": "assistant", "content": malformed}
    assert second[3]["role"] == "user"
    assert "invalid JSON" in second[3]["content"]
    assert "FailureDiagnosisAnswer" in second[3]["content"]
    first, accepted = answer.transcript
    assert (first.answer, accepted.error) == (malformed, None)
    assert "invalid JSON" in (first.error or "")
    assert accepted.prompt == tuple(
        [*PROMPT, ChatMessage.assistant(malformed), ChatMessage.user(second[3]["content"])]
    )
    (refused,) = events(logs, "backend.answer_refused")
    assert (refused["round"], refused["raw_answer"]) == (1, malformed)


@pytest.mark.asyncio
async def test_a_contract_violation_is_asked_again_naming_the_field(
    llm_server: ScriptedLLMServer,
) -> None:
    """Valid JSON that breaks the contract is re-asked with the field it got wrong."""
    wrong = {"suboptimal": True, "decision_idx": None, "reason": "wasteful"}
    right = {"suboptimal": True, "decision_idx": 2, "reason": "wasteful"}
    llm_server.script(json_reply(wrong), reply(f"```json\n{json_reply(right).content}\n```"))
    async with make_backend("coach", openai_settings(llm_server.endpoint)) as backend:
        answer = await backend.ask(PROMPT, SuboptimalDiagnosisAnswer)
    assert answer.value.decision_idx == 2
    assert "decision_idx" in llm_server.requests[1].body["messages"][-1]["content"]


@pytest.mark.asyncio
async def test_twice_malformed_is_abandoned_with_both_answers(
    llm_server: ScriptedLLMServer,
) -> None:
    """A second bad answer raises BackendAnswerError with both raw answers, logged, no third ask."""
    llm_server.script(reply("I think decision 3."), reply('{"decision_index": 0}'))
    with capture_logs() as logs:
        async with make_backend("coach", openai_settings(llm_server.endpoint)) as backend:
            with pytest.raises(BackendAnswerError) as caught:
                await backend.ask(PROMPT, FailureDiagnosisAnswer)
    error = caught.value
    assert error.raw_answers == ["I think decision 3.", '{"decision_index": 0}']
    assert [exchange.answer for exchange in error.transcript] == error.raw_answers
    assert all(isinstance(e, Exchange) and e.error for e in error.transcript)
    assert (error.backend, error.attempts) == ("coach", 2)
    assert len(llm_server.requests) == 2
    (abandoned,) = events(logs, "backend.answer_abandoned")
    assert abandoned["log_level"] == "error"
    assert abandoned["raw_answers"] == error.raw_answers
    assert len(events(logs, "backend.answer_refused")) == 2
