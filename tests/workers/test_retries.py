"""Retries of the OpenAI-compatible client: what is retried, how long it waits, what it logs."""

from __future__ import annotations

import email.utils

import pytest
from structlog.testing import capture_logs

from gencoach.errors import BackendUnavailable
from gencoach.protocol.llm import FailureDiagnosisAnswer
from gencoach.workers.backends import ChatMessage, make_backend
from gencoach.workers.backends.retries import RetryPolicy, retry_after_s, retryable_status
from tests.support.llm_server import (
    ScriptedLLMServer,
    delayed,
    dropped,
    error,
    json_reply,
)
from tests.support.processes import free_port
from tests.workers.conftest import FakeSleep, events, fast_retry, openai_settings

PROMPT = [ChatMessage.user("Which decision failed?")]
DIAGNOSIS = {"decision_index": 1, "reason": "r", "expected_decision": None}


@pytest.mark.asyncio
async def test_429_waits_as_retry_after_says(
    llm_server: ScriptedLLMServer, fake_sleep: FakeSleep
) -> None:
    """A 429 with Retry-After: 7 waits exactly 7 s (not the backoff), logs it, then succeeds."""
    llm_server.script(error(429, "slow down", headers={"Retry-After": "7"}), json_reply(DIAGNOSIS))
    with capture_logs() as logs:
        async with make_backend(
            "coach", openai_settings(llm_server.endpoint), retry=fast_retry(fake_sleep)
        ) as backend:
            answer = await backend.ask(PROMPT, FailureDiagnosisAnswer)
    assert fake_sleep.waits == [7.0]
    assert answer.transcript[0].completion.attempts == 2
    (retry,) = events(logs, "backend.retry")
    assert retry["log_level"] == "warning"
    assert (retry["backend"], retry["attempt"], retry["status"], retry["wait_s"]) == (
        "coach",
        1,
        429,
        7.0,
    )
    assert events(logs, "backend.completed")[0]["attempts"] == 2


@pytest.mark.asyncio
async def test_429_retry_after_is_honoured_in_real_time(llm_server: ScriptedLLMServer) -> None:
    """With the real clock, the second request arrives no sooner than Retry-After allows."""
    llm_server.script(error(429, headers={"Retry-After": "1"}), json_reply(DIAGNOSIS))
    async with make_backend(
        "coach", openai_settings(llm_server.endpoint), retry=fast_retry()
    ) as backend:
        await backend.complete(PROMPT, schema=FailureDiagnosisAnswer)
    first, second = llm_server.requests
    assert 1.0 <= second.received_at - first.received_at < 3.0


@pytest.mark.asyncio
async def test_retry_after_as_an_http_date_and_capped(
    llm_server: ScriptedLLMServer, fake_sleep: FakeSleep
) -> None:
    """Retry-After as an HTTP date counts from now; a wait beyond the cap is cut to the cap."""
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 12, usegmt=True)
    llm_server.script(
        error(503, headers={"Retry-After": date}),
        error(429, headers={"Retry-After": "3600"}),
        json_reply(DIAGNOSIS),
    )
    retry = fast_retry(fake_sleep, now=lambda: now, retry_after_max_s=30.0)
    async with make_backend("coach", openai_settings(llm_server.endpoint), retry=retry) as backend:
        await backend.complete(PROMPT, schema=None)
    assert fake_sleep.waits == [12.0, 30.0]


@pytest.mark.asyncio
async def test_500_is_retried_with_exponential_backoff(
    llm_server: ScriptedLLMServer, fake_sleep: FakeSleep
) -> None:
    """500s are retried after waits that double up to the maximum, then the answer is used."""
    llm_server.script(error(500), error(502), error(500), json_reply(DIAGNOSIS))
    settings = openai_settings(llm_server.endpoint, max_retries=3)
    retry = fast_retry(fake_sleep, wait_initial_s=1.0, wait_max_s=3.0)
    with capture_logs() as logs:
        async with make_backend("coach", settings, retry=retry) as backend:
            completion = await backend.complete(PROMPT, schema=None)
    assert fake_sleep.waits == [1.0, 2.0, 3.0]
    assert completion.attempts == 4
    assert [(e["attempt"], e["status"]) for e in events(logs, "backend.retry")] == [
        (1, 500),
        (2, 502),
        (3, 500),
    ]


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
    assert retry["status"] is None
    assert "no answer within 1.0 s" in retry["cause"]


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
    """Retry-After reads delays and GMT dates; past dates wait 0; garbage is ignored."""
    now = 1_700_000_000.0
    assert retry_after_s("5", now) == 5.0
    assert retry_after_s(email.utils.formatdate(now + 30, usegmt=True), now) == 30.0
    assert retry_after_s(email.utils.formatdate(now - 30, usegmt=True), now) == 0.0
    assert retry_after_s("-3", now) == 0.0
    for odd in (None, "", "soon", "nan"):
        assert retry_after_s(odd, now) is None


def test_backoff_jitter_stays_in_bounds() -> None:
    """Backoff is the doubled base, capped, plus a jitter never above wait_jitter_s."""
    policy = RetryPolicy(wait_initial_s=1.0, wait_max_s=4.0, wait_jitter_s=0.5)
    for failures, base in ((1, 1.0), (2, 2.0), (3, 4.0), (9, 4.0)):
        for _ in range(20):
            assert base <= policy.backoff_s(failures) <= base + 0.5
