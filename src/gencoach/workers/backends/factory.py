"""Make the backend a config entry describes."""

from __future__ import annotations

import redis.asyncio

from gencoach.config.settings import BackendSettings
from gencoach.constants import Keys
from gencoach.workers.backends.base import Backend
from gencoach.workers.backends.openai import OpenAIBackend
from gencoach.workers.backends.python import PythonBackend
from gencoach.workers.backends.retries import RetryPolicy


def make_backend(
    name: str,
    settings: BackendSettings,
    redis: redis.asyncio.Redis | None = None,
    *,
    keys: Keys | None = None,
    retry: RetryPolicy | None = None,
    slot_wait_s: float = 300.0,
) -> Backend:
    """The backend for `settings` (`openai`, which `ollama` aliases, or `python`), unopened.

    With `redis`, its concurrency cap is shared by every worker process and its token
    usage summed under `keys` (the default prefix unless given); `retry` tunes the waits
    between an HTTP backend's tries.
    """
    if settings.type == "python":
        return PythonBackend(name, settings, redis=redis, keys=keys, slot_wait_s=slot_wait_s)
    return OpenAIBackend(
        name, settings, redis=redis, keys=keys, slot_wait_s=slot_wait_s, retry=retry
    )
