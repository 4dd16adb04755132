"""The one retry policy, on stamina: whatever gencoach tries again goes through `RetryPolicy`.

`RetryPolicy` says how long and how often; `Retrying` and `Attempt` are one call's tries;
`REDIS_TRANSIENT` names the Redis answers every process waits out. Each retried thing
defines its policy where it is configured; docs/operations.md, "Retries", lists them all.
"""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Final, Protocol, TypeAlias

import anyio
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


class _Tries(Protocol):
    """stamina's tries of a block (`stamina.retry_context`), sync or async."""

    def __iter__(self) -> Iterator[stamina.Attempt]: ...

    def __aiter__(self) -> AsyncIterator[stamina.Attempt]: ...


class Retrying:
    """A policy's tries of one call: iterated once, sync or async (a second `async for`, in
    another task perhaps, carries on from the next try).

    The first try runs on its own: most calls succeed at once, and stamina's machinery costs
    about 90 µs of CPU a call. Only a first failure that will be tried again starts it, for
    the tries left, on the schedule the policy would have kept from the start."""

    def __init__(
        self, policy: RetryPolicy, on: Retryable, log_as: str | None, fields: dict[str, object]
    ) -> None:
        self.policy = policy
        self.on = on
        self.log_as = log_as
        self.fields = fields
        self.started = 0.0
        # The first try: not made (None), succeeded (False), or failed and to be tried
        # again after this wait.
        self._first: float | bool | None = None
        self._async: AsyncIterator[stamina.Attempt] | None = None

    def __iter__(self) -> Iterator[Attempt]:
        self.started = time.monotonic()
        yield Attempt(self, None)
        if not isinstance(self._first, float):
            return
        time.sleep(self._first)
        for tried in self._stamina():
            yield Attempt(self, tried)

    def __aiter__(self) -> Retrying:
        if not self.started:
            self.started = time.monotonic()
        return self

    async def __anext__(self) -> Attempt:
        if self._first is None:
            self._first = False  # until the attempt says it failed
            return Attempt(self, None)
        if self._async is None:
            if not isinstance(self._first, float):
                raise StopAsyncIteration
            await anyio.sleep(self._first)
            self._async = aiter(self._stamina())
        return Attempt(self, await anext(self._async))

    def _stamina(self) -> _Tries:
        """stamina's tries after the first: the tries and time left, each wait the one the
        whole schedule has there (its first wait, before the second try, was taken)."""
        policy = self.policy
        attempts = None if policy.attempts is None else policy.attempts - 1
        timeout = policy.timeout_s
        if timeout is not None:
            timeout -= time.monotonic() - self.started
            if timeout <= 0:  # the wait reached the bound: one last try, as stamina makes
                attempts, timeout = 1, None
        return stamina.retry_context(
            on=self.on,
            attempts=attempts,
            timeout=timeout,
            wait_initial=policy.wait_initial_s * 2,
            wait_max=policy.wait_max_s,
            wait_jitter=policy.wait_jitter_s,
        )

    def failed_first(self, error: BaseException) -> bool:
        """The first try failed with `error`: whether it is tried again (after which wait,
        noted for the next iteration)."""
        retried = self.retried(error, 1)
        if retried is False:
            return False
        policy = self.policy
        wait = policy.wait_initial_s + random.uniform(0, policy.wait_jitter_s)
        self._first = float(min(wait, policy.wait_max_s)) if retried is True else float(retried)
        return True

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
    """One try (`with attempt: ...`): a failure of any try but the first goes to stamina,
    logged first as the policy's event when it will be tried again."""

    __slots__ = ("_tried", "_tries")

    def __init__(self, tries: Retrying, tried: stamina.Attempt | None) -> None:
        self._tries = tries
        self._tried = tried

    @property
    def num(self) -> int:
        """Which try this is, from 1."""
        return 1 if self._tried is None else self._tried.num + 1

    @property
    def next_wait_s(self) -> float:
        """The wait before the next try should this one fail (jitter not included)."""
        if self._tried is None:
            return round(min(self._tries.policy.wait_initial_s, self._tries.policy.wait_max_s), 3)
        return round(self._tried.next_wait, 3)

    def __enter__(self) -> None:
        if self._tried is not None:
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
        if self._tried is not None:
            return self._tried.__exit__(kind, error, traceback)
        return error is not None and tries.failed_first(error)


# Redis away or refusing writes: a controller's loop waits for it as long as it runs.
UNTIL_REDIS_BACK: Final = RetryPolicy(timeout_s=None)
