"""A RetryPolicy retries what it names, logs each retry it will make, and can be carried on."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
import redis.exceptions
import stamina
from structlog.testing import capture_logs

from gencoach.runtime.retrying import REDIS_TRANSIENT, Retryable, RetryPolicy

FAST = RetryPolicy(timeout_s=None, attempts=3, wait_initial_s=0.01, wait_jitter_s=0)


def _failing(
    error: Exception, tried: list[int], on: Retryable = REDIS_TRANSIENT, **fields: object
) -> None:
    """A call that fails every try with `error`, noting each try's number."""
    for attempt in FAST.retrying(on, log_as="thing.retry", **fields):
        with attempt:
            tried.append(attempt.num)
            raise error


def test_each_retry_is_logged_but_not_the_last_failure() -> None:
    """Three failing tries: the first two are logged as the event (with the try, the wait
    and the fields), the third is raised, not announced as retried."""
    tried: list[int] = []
    down = redis.exceptions.ConnectionError("down")
    with capture_logs() as logs, pytest.raises(redis.exceptions.ConnectionError):
        _failing(down, tried, run_id="r1")
    retries = [event for event in logs if event["event"] == "thing.retry"]
    assert tried == [1, 2, 3]
    assert [event["attempt"] for event in retries] == [1, 2]
    assert [event["retry_in_s"] for event in retries] == [0.01, 0.02]
    assert {event["run_id"] for event in retries} == {"r1"}
    assert retries[0]["error"] == "down"


def test_an_error_it_does_not_name_is_raised_at_once_unlogged() -> None:
    """A predicate refusing the error: one try, no retry event."""
    tried: list[int] = []
    with capture_logs() as logs, pytest.raises(ValueError, match="wrong"):
        _failing(ValueError("wrong"), tried, on=lambda error: False)
    assert tried == [1]
    assert not [event for event in logs if event["event"] == "thing.retry"]


@pytest.mark.asyncio
async def test_async_tries_carried_on_from_another_task_continue_the_count() -> None:
    """The tries of one call, begun in one task and iterated again in another, go on from
    the next try (the save loop retries a failed save in its own task so)."""
    tries = FAST.retrying(on=Exception)
    seen: list[int] = []

    async def carry_on() -> None:
        async for attempt in tries:
            with attempt:
                seen.append(attempt.num)
                if attempt.num < 3:
                    raise OSError("disk full")

    first = await anext(aiter(tries))
    with first:
        seen.append(first.num)
        raise OSError("disk full")
    async with anyio.create_task_group() as tg:
        tg.start_soon(carry_on)
    assert seen == [1, 2, 3]


def test_a_wait_the_predicate_returns_is_slept_and_logged_beyond_wait_max() -> None:
    """A predicate answering 0.3 (a server's Retry-After) makes the next try wait 0.3 s,
    past the policy's 0.01 s longest backoff, and the retry is logged with that wait."""
    started: list[float] = []
    policy = RetryPolicy(timeout_s=None, attempts=2, wait_initial_s=0.01, wait_max_s=0.01)
    with capture_logs() as logs:
        for attempt in policy.retrying(on=lambda error: 0.3, log_as="thing.retry"):
            with attempt:
                started.append(time.monotonic())
                if attempt.num == 1:
                    raise OSError("busy")
    (retry,) = [event for event in logs if event["event"] == "thing.retry"]
    assert retry["retry_in_s"] == 0.3
    assert started[1] - started[0] >= 0.3


@pytest.fixture
def stamina_started(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The options of each `stamina.retry_context` started from now on, in order."""
    started: list[dict[str, Any]] = []
    real = stamina.retry_context

    def recorded(**options: Any) -> Any:
        started.append(options)
        return real(**options)

    monkeypatch.setattr(stamina, "retry_context", recorded)
    return started


@pytest.mark.asyncio
async def test_a_first_try_that_succeeds_never_starts_stamina(
    stamina_started: list[dict[str, Any]],
) -> None:
    """Most calls succeed at once: their one try runs without stamina's machinery (about
    90 µs of CPU a call), sync and async; a failing first try starts it for the rest."""
    started = stamina_started
    for attempt in FAST.retrying():
        with attempt:
            pass
    async for tried in FAST.retrying():
        with tried:
            pass
    assert started == []
    tried_nums: list[int] = []
    with pytest.raises(redis.exceptions.ConnectionError):
        _failing(redis.exceptions.ConnectionError("down"), tried_nums)
    assert tried_nums == [1, 2, 3]
    (rest,) = started
    assert rest["attempts"] == 2  # the tries left after the first
    assert rest["wait_initial"] == 0.02  # the schedule's second wait


def test_the_time_bound_holds_across_the_first_try_and_the_rest(
    stamina_started: list[dict[str, Any]],
) -> None:
    """A policy bounded to 0.3 s that fails every try gives up once its bound has passed:
    stamina, started after the first try and its wait, gets only the time left of the
    bound, not the whole of it again."""
    policy = RetryPolicy(timeout_s=0.3, wait_initial_s=0.05, wait_max_s=0.05, wait_jitter_s=0)
    tried: list[int] = []

    def busy() -> None:
        for attempt in policy.retrying(on=OSError):
            with attempt:
                tried.append(attempt.num)
                raise OSError("busy")

    began = time.monotonic()
    with pytest.raises(OSError, match="busy"):
        busy()
    assert time.monotonic() - began >= 0.3
    assert len(tried) >= 2
    (rest,) = stamina_started
    assert rest["timeout"] is None or rest["timeout"] <= 0.3 - 0.05
