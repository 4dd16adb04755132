"""Make the backend a config entry describes."""

from __future__ import annotations

import redis.asyncio

from gencoach.config.settings import BackendSettings
from gencoach.constants import Keys
from gencoach.metrics import MetricsRecorder
from gencoach.runtime.retrying import RetryPolicy
from gencoach.workers.backends.backend import DEFAULT_CONCURRENCY, Backend
from gencoach.workers.backends.openai import OpenAIBackend
from gencoach.workers.backends.python import PythonBackend
from gencoach.workers.backends.wakeups import SlotWakeups


def make_backend(
    name: str,
    settings: BackendSettings,
    redis: redis.asyncio.Redis | None = None,
    *,
    keys: Keys | None = None,
    retry: RetryPolicy | None = None,
    slot_wait_s: float = 300.0,
    concurrency: int = DEFAULT_CONCURRENCY,
    wakeups: SlotWakeups | None = None,
    metrics: MetricsRecorder | None = None,
) -> Backend:
    """The backend for `settings` (`openai`, which `ollama` aliases, or `python`), unopened.

    With `redis`, its concurrency cap is shared by every worker process, its slots kept
    under `keys` (the default prefix unless given); `retry` tunes the waits
    between an HTTP backend's tries (as many as the settings' `max_retries` allow);
    `concurrency` is the cap unless the settings set `max_concurrency`; `wakeups` is the
    process's subscription to slot releases; `metrics` counts its calls, latencies and
    tokens.
    """
    if settings.type == "python":
        return PythonBackend(
            name,
            settings,
            redis=redis,
            keys=keys,
            slot_wait_s=slot_wait_s,
            concurrency=concurrency,
            wakeups=wakeups,
            metrics=metrics,
        )
    return OpenAIBackend(
        name,
        settings,
        redis=redis,
        keys=keys,
        slot_wait_s=slot_wait_s,
        concurrency=concurrency,
        wakeups=wakeups,
        metrics=metrics,
        retry=retry,
    )
