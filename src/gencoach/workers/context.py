"""What a worker process knows: its settings, its Redis URL and key names, set once at start-up.

The worker process sets it before it starts working: the async worker's jobs run in
that process, and a forking worker's work-horses inherit it, so it never travels in the
payload. Tests set it with `worker_context`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from gencoach.config.settings import Settings
from gencoach.constants import Keys
from gencoach.followups import FOLLOW_UP_WAIT_S


@dataclass(frozen=True)
class WorkerContext:
    """The settings a worker was started with and the Redis server it serves."""

    settings: Settings
    redis_url: str
    follow_up_wait_s: float = FOLLOW_UP_WAIT_S
    """How long a job waits for the repair of the diagnosis it published (`gencoach.followups`)."""

    @property
    def keys(self) -> Keys:
        """Key and stream names under the configured prefix."""
        return Keys(self.settings.redis.key_prefix)

    @property
    def job_timeout_s(self) -> float:
        """How long one job may run before it gives up and reports an error."""
        return self.settings.workers.job_timeout_s


_current: WorkerContext | None = None


def set_context(context: WorkerContext | None) -> None:
    """Install the context of this process (None forgets it)."""
    global _current
    _current = context


def current_context() -> WorkerContext:
    """The context of this process, or RuntimeError when the worker never set one."""
    if _current is None:
        raise RuntimeError(
            "no worker context: call gencoach.workers.context.set_context() before running jobs"
        )
    return _current


@contextmanager
def worker_context(
    settings: Settings, redis_url: str, *, follow_up_wait_s: float = FOLLOW_UP_WAIT_S
) -> Iterator[WorkerContext]:
    """Install a context for the block, then restore the previous one (for tests and tools)."""
    previous = _current
    context = WorkerContext(settings, redis_url, follow_up_wait_s)
    set_context(context)
    try:
        yield context
    finally:
        set_context(previous)
