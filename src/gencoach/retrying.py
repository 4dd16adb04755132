"""One retry policy for calls to Redis (and to the controller's HTTP API), on stamina.

Three answers from Redis mean "the same call may work in a while", and every process
that talks to Redis treats them alike:

- the connection dropped or was refused (Redis restarting), or timed out;
- `BusyLoadingError`: a restarted Redis still loading its append-only file (redis-py
  makes it a `ConnectionError`);
- `OutOfMemoryError`: Redis refusing writes at its `maxmemory` until keys expire or an
  operator raises it (reads still work).

A `RetryPolicy` waits them out with exponential backoff (0.1 s, doubling, at most 5 s
apart, with jitter) for up to `timeout_s`, then lets the last error through for the
caller to name. The generators' reporters and order readers use their
`retry_timeout_s` (30 s); worker processes wait without a bound (`timeout_s=None`),
since a worker has nothing else to do (docs/operations.md, "Redis restarts and
persistence").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias

import redis
import redis.exceptions
import stamina
from redis.backoff import NoBackoff
from redis.retry import Retry

if TYPE_CHECKING:
    from stamina._core import _RetryContextIterator

# What to retry: error types, or a predicate on the error.
Retryable: TypeAlias = type[Exception] | tuple[type[Exception], ...] | Callable[[Exception], bool]

# What a Redis call may raise that a later call may not (BusyLoadingError is a
# ConnectionError).
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
    """How long and how often a call is tried again: backoff from `wait_initial_s` to
    `wait_max_s`, for up to `timeout_s` (None: no bound) and `attempts` (None: no count)."""

    timeout_s: float | None = 30.0
    attempts: int | None = None
    wait_initial_s: float = 0.1
    wait_max_s: float = 5.0

    def retrying(self, on: Retryable = REDIS_TRANSIENT) -> _RetryContextIterator:
        """A stamina retry context (`for attempt in ...: with attempt: ...`, or `async for`)
        retrying what `on` names (error types, or a predicate on the error)."""
        return stamina.retry_context(
            on=on,
            attempts=self.attempts,
            timeout=self.timeout_s,
            wait_initial=self.wait_initial_s,
            wait_max=self.wait_max_s,
        )
