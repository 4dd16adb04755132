"""Retries of the OpenAI-compatible client: what is retried, how long it waits, what it logs."""

from __future__ import annotations

import email.utils
import time

import pytest
from structlog.testing import capture_logs

from gencoach.errors import BackendUnavailable
from gencoach.protocol.llm import FailureDiagnosisAnswer
from gencoach.workers.backends import ChatMessage, make_backend
from gencoach.workers.backends.openai import RETRY_AFTER_MAX_S, retry_after_s, retryable_status
from tests.support.backends import events, fast_retry, openai_settings
from tests.support.llm_server import (
    ScriptedLLMServer,
    delayed,
    dropped,
    error,
    json_reply,
)
from tests.support.processes import free_port

PROMPT = [ChatMessage.user("Which decision failed?")]
DIAGNOSIS = {"decision_index": 1, "reason": "r", "expected_decision": None}


@pytest.mark.asyncio
async def test_429_waits_as_retry_after_says(llm_server: ScriptedLLMServer) -> None:
    """A 429 with Retry-After: 1 waits 1 s (not the 0.01 s backoff), logs it, then succeeds."""
    llm_server.script(error(429, "slow down", headers={"Retry-After": "1"}), json_reply(DIAGNOSIS))
    with capture_logs() as logs:
        async with make_backend(
            "coach", openai_settings(llm_server.endpoint), retry=fast_retry()
        ) as backend:
            answer = await backend.ask(PROMPT, FailureDiagnosisAnswer)
    first, second = llm_server.requests
    assert 1.0 <= second.received_at - first.received_at < 3.0
    assert answer.transcript[0].completion.attempts == 2
    (retry,) = events(logs, "backend.retry")
    assert retry["log_level"] == "warning"
    assert (retry["backend"], retry["attempt"], retry["retry_in_s"]) == ("coach", 1, 1.0)
    assert retry["error"] == "HTTP 429: slow down"
    assert events(logs, "backend.completed")[0]["attempts"] == 2


@pytest.mark.asyncio
async def test_retry_after_as_an_http_date_counts_from_now(llm_server: ScriptedLLMServer) -> None:
    """Retry-After as an HTTP date two seconds ahead waits until then: the date's whole
    seconds less the time since it was written (at most 2 s, and less by as long as the
    answer took to come and be read: up to a second on a loaded machine)."""
    sent = time.time()
    until = int(sent + 2)  # the date has whole seconds
    date = email.utils.formatdate(sent + 2, usegmt=True)
    llm_server.script(error(503, headers={"Retry-After": date}), json_reply(DIAGNOSIS))
    with capture_logs() as logs:
        async with make_backend(
            "coach", openai_settings(llm_server.endpoint), retry=fast_retry()
        ) as backend:
            await backend.complete(PROMPT, schema=None)
    first, second = llm_server.requests
    (retry,) = events(logs, "backend.retry")
    assert until - sent - 1.0 <= retry["retry_in_s"] <= until - sent
    assert retry["retry_in_s"] - 0.1 <= second.received_at - first.received_at < 3.0


@pytest.mark.asyncio
async def test_500_is_retried_with_exponential_backoff(llm_server: ScriptedLLMServer) -> None:
    """500s are retried after waits that double up to the maximum, then the answer is used."""
    llm_server.script(error(500), error(502), error(500), json_reply(DIAGNOSIS))
    settings = openai_settings(llm_server.endpoint, max_retries=3)
    retry = fast_retry(wait_initial_s=0.1, wait_max_s=0.3)
    with capture_logs() as logs:
        async with make_backend("coach", settings, retry=retry) as backend:
            completion = await backend.complete(PROMPT, schema=None)
    assert completion.attempts == 4
    retries = events(logs, "backend.retry")
    assert [(e["attempt"], e["retry_in_s"]) for e in retries] == [(1, 0.1), (2, 0.2), (3, 0.3)]
    assert [e["error"][:8] for e in retries] == ["HTTP 500", "HTTP 502", "HTTP 500"]
    received = [request.received_at for request in llm_server.requests]
    assert received[-1] - received[0] >= 0.6


@pytest.mark.asyncio
async def test_500s_exhaust_the_retries(llm_server: ScriptedLLMServer) -> None:
    """After max_retries + 1 failing tries, BackendUnavailable names status, cause and tries."""
    llm_server.script(*[error(500, "model crashed")] * 3)
    async with make_backend(
        "coach", openai_settings(llm_server.endpoint, max_retries=2), retry=fast_retry()
    ) as backend:
        with pytest.raises(BackendUnavailable) as caught:
            await backend.complete(PROMPT, schema=None)
    assert (caught.value.attempts, caught.value.status) == (3, 500)
    assert "model crashed" in str(caught.value)
    assert llm_server.endpoint in str(caught.value)
    assert len(llm_server.requests) == 3


@pytest.mark.asyncio
async def test_a_timeout_is_retried(llm_server: ScriptedLLMServer) -> None:
    """A server slower than timeout_s is given up on and asked again; the retry is logged."""
    llm_server.script(delayed(10.0), json_reply(DIAGNOSIS))
    settings = openai_settings(llm_server.endpoint, timeout_s=1.0)
    with capture_logs() as logs:
        async with make_backend("coach", settings, retry=fast_retry()) as backend:
            completion = await backend.complete(PROMPT, schema=None)
    assert completion.attempts == 2
    assert 1.0 <= completion.latency_s < 5.0
    (retry,) = events(logs, "backend.retry")
    assert "no answer within 1.0 s" in retry["error"]


@pytest.mark.asyncio
async def test_timeouts_exhaust_the_retries(llm_server: ScriptedLLMServer) -> None:
    """A server that never answers in time leaves BackendUnavailable after every try."""
    llm_server.script(*[delayed(10.0)] * 2)
    settings = openai_settings(llm_server.endpoint, timeout_s=0.5, max_retries=1)
    async with make_backend("coach", settings, retry=fast_retry()) as backend:
        with pytest.raises(BackendUnavailable, match=r"no answer within 0\.5 s") as caught:
            await backend.complete(PROMPT, schema=None)
    assert caught.value.attempts == 2
    assert caught.value.status is None


@pytest.mark.asyncio
async def test_connection_refused_is_retried_then_unavailable() -> None:
    """Nothing listening: max_retries + 1 tries, each logged, then BackendUnavailable."""
    endpoint = f"http://127.0.0.1:{free_port()}/v1/chat/completions"
    with capture_logs() as logs:
        async with make_backend(
            "coach", openai_settings(endpoint, max_retries=3), retry=fast_retry()
        ) as backend:
            with pytest.raises(BackendUnavailable, match="cannot connect") as caught:
                await backend.complete(PROMPT, schema=None)
    assert caught.value.attempts == 4
    assert caught.value.backend == "coach"
    assert caught.value.endpoint == endpoint
    assert [e["attempt"] for e in events(logs, "backend.retry")] == [1, 2, 3]
    (gave_up,) = events(logs, "backend.gave_up")
    assert (gave_up["attempt"], gave_up["log_level"]) == (4, "error")


@pytest.mark.asyncio
async def test_a_dropped_connection_is_retried(llm_server: ScriptedLLMServer) -> None:
    """A server that hangs up without answering is asked again."""
    llm_server.script(dropped(), json_reply(DIAGNOSIS))
    async with make_backend(
        "coach", openai_settings(llm_server.endpoint), retry=fast_retry()
    ) as backend:
        completion = await backend.complete(PROMPT, schema=None)
    assert completion.attempts == 2


def test_retried_statuses() -> None:
    """408, 429 and 5xx are retried; other statuses are not."""
    statuses = (200, 400, 401, 404, 408, 409, 422, 429, 500, 503, 599)
    assert [s for s in statuses if retryable_status(s)] == [408, 429, 500, 503, 599]


def test_retry_after_parsing() -> None:
    """Retry-After reads delays and GMT dates; past dates wait 0, long ones the cap (60 s);
    garbage is ignored."""
    now = 1_700_000_000.0
    assert retry_after_s("5", now) == 5.0
    assert retry_after_s(email.utils.formatdate(now + 30, usegmt=True), now) == 30.0
    assert retry_after_s(email.utils.formatdate(now - 30, usegmt=True), now) == 0.0
    assert retry_after_s("-3", now) == 0.0
    assert retry_after_s("3600", now) == RETRY_AFTER_MAX_S == 60.0
    for odd in (None, "", "soon", "nan"):
        assert retry_after_s(odd, now) is None
