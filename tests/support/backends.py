"""LLM backends in the worker tests: an openai backend's settings, a retry policy fast
enough for tests, and the log events a backend call left."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from dataclasses import replace
from typing import Any

from gencoach.config.settings import BackendSettings
from gencoach.runtime.retrying import RetryPolicy
from gencoach.workers.backends.openai import BACKEND_RETRY


def fast_retry(**options: Any) -> RetryPolicy:
    """A backend retry policy with tiny, jitter-free waits, to keep tests fast."""
    defaults: dict[str, Any] = {"wait_initial_s": 0.01, "wait_max_s": 0.05, "wait_jitter_s": 0.0}
    return replace(BACKEND_RETRY, **{**defaults, **options})


def openai_settings(endpoint: str, **options: Any) -> BackendSettings:
    """An openai backend's settings for `endpoint`, with short timeouts by default."""
    values: dict[str, Any] = {
        "type": "openai",
        "endpoint": endpoint,
        "default_model": "coach-model",
        "timeout_s": 2.0,
        "max_retries": 2,
        **options,
    }
    return BackendSettings.model_validate(values)


def events(logs: Sequence[MutableMapping[str, Any]], name: str) -> list[MutableMapping[str, Any]]:
    """The captured log events called `name`, in order."""
    return [entry for entry in logs if entry["event"] == name]
