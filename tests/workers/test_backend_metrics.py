"""What a backend counts: each completion by outcome with its latency and tokens, and each
answer checked against its contract (against a scripted LLM on loopback)."""

from __future__ import annotations

import pytest

from gencoach.errors import BackendAnswerError, BackendUnavailable
from gencoach.metrics import MetricsRecorder
from gencoach.metrics.exposition import render
from gencoach.protocol.llm import FailureDiagnosisAnswer
from gencoach.workers.backends import ChatMessage, make_backend
from tests.support.backends import fast_retry, openai_settings
from tests.support.llm_server import ScriptedLLMServer, json_reply, reply
from tests.support.metrics import Samples, parse
from tests.support.processes import free_port

PROMPT = [ChatMessage.user("Which decision failed?")]
DIAGNOSIS = {"decision_index": 3, "reason": "grasped too early", "expected_decision": None}


def samples(recorder: MetricsRecorder) -> Samples:
    return parse(render(recorder.pending()).decode())


@pytest.mark.asyncio
async def test_an_answer_refused_then_accepted_counts_two_calls_and_both_checks(
    llm_server: ScriptedLLMServer,
) -> None:
    llm_server.script(reply("not json", usage=(100, 20)), json_reply(DIAGNOSIS, usage=(140, 25)))
    metrics = MetricsRecorder()
    settings = openai_settings(llm_server.endpoint)
    async with make_backend("coach", settings, metrics=metrics) as backend:
        await backend.ask(PROMPT, FailureDiagnosisAnswer)
    seen = samples(metrics)
    assert seen.value("gencoach_llm_calls_total", backend="coach", outcome="ok") == 2
    assert seen.by("gencoach_llm_answers_total", "outcome", backend="coach") == {
        "refused": 1,
        "accepted": 1,
    }
    assert seen.by("gencoach_llm_tokens_total", "kind", backend="coach") == {
        "prompt": 240,
        "completion": 45,
    }
    timed = "gencoach_llm_call_duration_seconds_count"
    assert seen.value(timed, backend="coach", outcome="ok") == 2


@pytest.mark.asyncio
async def test_an_answer_refused_twice_counts_as_refused_answers(
    llm_server: ScriptedLLMServer,
) -> None:
    llm_server.script(reply("no"), reply("still no"))
    metrics = MetricsRecorder()
    async with make_backend("coach", openai_settings(llm_server.endpoint), metrics=metrics) as b:
        with pytest.raises(BackendAnswerError):
            await b.ask(PROMPT, FailureDiagnosisAnswer)
    seen = samples(metrics)
    assert seen.by("gencoach_llm_answers_total", "outcome", backend="coach") == {"refused": 2}


@pytest.mark.asyncio
async def test_an_unreachable_backend_counts_as_unavailable_with_its_wait() -> None:
    settings = openai_settings(
        f"http://127.0.0.1:{free_port()}/v1/chat/completions", max_retries=1, timeout_s=0.5
    )
    metrics = MetricsRecorder()
    async with make_backend("coach", settings, retry=fast_retry(), metrics=metrics) as backend:
        with pytest.raises(BackendUnavailable):
            await backend.complete(PROMPT, schema=None)
    seen = samples(metrics)
    assert seen.by("gencoach_llm_calls_total", "outcome", backend="coach") == {"unavailable": 1}
    timed = "gencoach_llm_call_duration_seconds_count"
    assert seen.value(timed, backend="coach", outcome="unavailable") == 1
    assert seen.total("gencoach_llm_tokens_total") == 0
