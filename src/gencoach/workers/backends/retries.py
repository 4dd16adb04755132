"""When an HTTP backend tries again: which failures, and how long to wait before the next try."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import httpx

# Failures worth another try: the request may not have reached the model, or the server
# dropped it (refused, reset or closed connections, timeouts). Misconfigurations such as
# an unsupported URL scheme are not among them.
RETRY_EXCEPTIONS: tuple[type[Exception], ...] = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
    TimeoutError,
)


def retryable_status(status: int) -> bool:
    """Whether an HTTP status is worth another try: 408, 429 and every 5xx."""
    return status in (408, 429) or 500 <= status <= 599


def retry_after_s(value: str | None, now: float) -> float | None:
    """Seconds a `Retry-After` header asks to wait (delay or HTTP date); None if absent or odd."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # RFC 9110 dates are GMT
            return None
        seconds = when.timestamp() - now
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait between tries: `Retry-After` when the server gives it (capped at
    `retry_after_max_s`), else exponential backoff from `wait_initial_s` up to `wait_max_s`
    plus up to `wait_jitter_s` of random jitter.

    `sleep` and `now` (the wall clock, for `Retry-After` dates) can be replaced in tests.
    """

    wait_initial_s: float = 0.5
    wait_max_s: float = 20.0
    wait_jitter_s: float = 0.5
    retry_after_max_s: float = 60.0
    sleep: Callable[[float], Awaitable[None]] = field(default=anyio.sleep, compare=False)
    now: Callable[[], float] = field(default=time.time, compare=False)

    def __post_init__(self) -> None:
        for name in ("wait_initial_s", "wait_max_s", "wait_jitter_s", "retry_after_max_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative (got {getattr(self, name)!r})")

    def backoff_s(self, failures: int) -> float:
        """The wait after the `failures`-th failed try, without a server's hint."""
        exponential = self.wait_initial_s * 2.0 ** min(failures - 1, 62)
        jitter = random.uniform(0.0, self.wait_jitter_s) if self.wait_jitter_s else 0.0
        return min(self.wait_max_s, exponential) + jitter

    def wait_s(self, failures: int, retry_after: str | None = None) -> float:
        """The wait before the next try: the server's `Retry-After` if usable, else backoff."""
        asked = retry_after_s(retry_after, self.now())
        if asked is not None:
            return min(asked, self.retry_after_max_s)
        return self.backoff_s(failures)
