"""The one retry policy, on stamina: whatever gencoach tries again goes through `RetryPolicy`.

`RetryPolicy` says how long and how often; `Retrying` and `Attempt` are one call's tries;
`REDIS_TRANSIENT` names the Redis answers every process waits out. Each retried thing
defines its policy where it is configured; docs/operations.md, "Retries", lists them all.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Final, TypeAlias

import redis
import redis.exceptions
import stamina
from redis.backoff import NoBackoff
from redis.retry import Retry

from gencoach.runtime.logs import get_logger

log = get_logger("retrying")

# What to retry: error types, or a predicate on the error that may return, instead of
# True, the seconds to wait before the next try (stamina's backoff hook).
Retryable: TypeAlias = (
    type[Exception] | tuple[type[Exception], ...] | Callable[[Exception], bool | float]
)

# What a Redis call may raise that a later call may not: "the same call may work in a
# while", and every process that talks to Redis treats these alike. The connection
# dropped or was refused (Redis restarting), or timed out; `BusyLoadingError`, a
# restarted Redis still loading its append-only file (redis-py makes it a
# ConnectionError); `OutOfMemoryError`, Redis refusing writes at its `maxmemory` until
# keys expire or an operator raises it (reads still work).
REDIS_TRANSIENT: Final = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.OutOfMemoryError,
)


def no_client_retries() -> Retry:
    """A redis-py `retry=` that retries nothing: the policy here is the only one, so its
    bound holds (redis-py's own default retries a sync call up to 10 times)."""
    return Retry(NoBackoff(), 0)


def server_busy(error: BaseException) -> bool:
    """Whether Redis answered but cannot serve the call yet (loading, or at maxmemory):
    the server is there, unlike at a wrong address."""
    return isinstance(error, redis.exceptions.BusyLoadingError | redis.exceptions.OutOfMemoryError)


def describe(error: BaseException) -> str:
    """The error as an operator reads it: what Redis is doing, then its own words."""
    if isinstance(error, redis.exceptions.OutOfMemoryError):
        return f"Redis refuses writes: it is at its maxmemory ({error})"
    if isinstance(error, redis.exceptions.BusyLoadingError):
        return f"Redis is loading its data set ({error})"
    return str(error) or type(error).__name__


@dataclass(frozen=True)
class RetryPolicy:
    """How long and how often a call is tried again: backoff from `wait_initial_s`
    doubling to `wait_max_s` (plus up to `wait_jitter_s`), for up to `timeout_s` (None: no
    bound, as long as its caller runs) and `attempts` (None: no count).

    Once the bound is reached, the last error goes through for the caller to name. A
    predicate may instead return the wait an error asks for (a server's `Retry-After`).
    """

    timeout_s: float | None = 30.0
    attempts: int | None = None
    wait_initial_s: float = 0.1
    wait_max_s: float = 5.0
    wait_jitter_s: float = 1.0

    def retrying(
        self, on: Retryable = REDIS_TRANSIENT, *, log_as: str | None = None, **fields: object
    ) -> Retrying:
        """The tries of one call (`for attempt in ...: with attempt: ...`, or `async for`),
        retrying what `on` names (error types, or a predicate on the error, which may
        return the wait instead of True). With `log_as`, each failure that will be tried
        again is logged as that warning, with the wait and `fields`."""
        return Retrying(self, on, log_as, fields)


class Retrying:
    """A policy's tries of one call, on stamina: iterated once, sync or async (a second
    `async for`, in another task perhaps, carries on from the next try)."""

    def __init__(
        self, policy: RetryPolicy, on: Retryable, log_as: str | None, fields: dict[str, object]
    ) -> None:
        self.policy = policy
        self.on = on
        self.log_as = log_as
        self.fields = fields
        self.started = 0.0
        self._tries = stamina.retry_context(
            on=on,
            attempts=policy.attempts,
            timeout=policy.timeout_s,
            wait_initial=policy.wait_initial_s,
            wait_max=policy.wait_max_s,
            wait_jitter=policy.wait_jitter_s,
        )
        self._async: AsyncIterator[stamina.Attempt] | None = None

    def __iter__(self) -> Iterator[Attempt]:
        self.started = time.monotonic()
        return (Attempt(self, tried) for tried in self._tries)

    def __aiter__(self) -> Retrying:
        if self._async is None:
            self.started = time.monotonic()
            self._async = aiter(self._tries)
        return self

    async def __anext__(self) -> Attempt:
        assert self._async is not None, "iterated with async for"
        return Attempt(self, await anext(self._async))

    def retried(self, error: BaseException, num: int) -> bool | float:
        """Whether stamina tries again after attempt `num` failed with `error`: False, True
        (after the policy's backoff), or the seconds `on` asked to wait."""
        policy = self.policy
        if policy.attempts is not None and num >= policy.attempts:
            return False
        if policy.timeout_s is not None and time.monotonic() - self.started >= policy.timeout_s:
            return False
        on = self.on
        if isinstance(on, tuple | type):
            return isinstance(error, on)
        return isinstance(error, Exception) and on(error)


class Attempt:
    """One try (`with attempt: ...`): a failure goes to stamina, logged first as the
    policy's event when it will be tried again."""

    __slots__ = ("_tried", "_tries")

    def __init__(self, tries: Retrying, tried: stamina.Attempt) -> None:
        self._tries = tries
        self._tried = tried

    @property
    def num(self) -> int:
        """Which try this is, from 1."""
        return self._tried.num

    @property
    def next_wait_s(self) -> float:
        """The wait before the next try should this one fail (jitter not included)."""
        return round(self._tried.next_wait, 3)

    def __enter__(self) -> None:
        self._tried.__enter__()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        tries = self._tries
        if error is not None and tries.log_as is not None:
            retried = tries.retried(error, self.num)
            if retried is not False:
                log.warning(
                    tries.log_as,
                    error=describe(error),
                    attempt=self.num,
                    retry_in_s=self.next_wait_s if retried is True else round(retried, 3),
                    **tries.fields,
                )
        return self._tried.__exit__(kind, error, traceback)


# Redis away or refusing writes: a controller's loop waits for it as long as it runs.
UNTIL_REDIS_BACK: Final = RetryPolicy(timeout_s=None)
