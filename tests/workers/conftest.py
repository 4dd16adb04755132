"""Fixtures for backend tests: scripted LLM servers, an async Redis client, fake sleeps."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, MutableMapping, Sequence
from typing import Any

import pytest
import pytest_asyncio
import redis
import redis.asyncio

from gencoach.config.settings import BackendSettings
from gencoach.workers.backends import RetryPolicy
from gencoach.workers.context import WorkerContext, worker_context
from tests.support.llm_server import ScriptedLLMServer, scripted_llm_servers
from tests.workers.builders import settings_for


@pytest.fixture
def llm_server_factory() -> Iterator[Callable[..., ScriptedLLMServer]]:
    """Start scripted OpenAI-compatible servers; every one is stopped after the test."""
    with scripted_llm_servers() as start:
        yield start


@pytest.fixture
def llm_server(llm_server_factory: Callable[..., ScriptedLLMServer]) -> ScriptedLLMServer:
    """One running scripted server."""
    return llm_server_factory()


@pytest_asyncio.fixture
async def aredis(redis_url: str, redis_client: redis.Redis) -> AsyncIterator[redis.asyncio.Redis]:
    """An asyncio client on the test Redis, whose database `redis_client` empties."""
    client = redis.asyncio.Redis.from_url(redis_url)
    yield client
    await client.aclose()


class FakeSleep:
    """Records the waits a retry policy asks for instead of sleeping through them."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def fake_sleep() -> FakeSleep:
    """A sleep that returns at once and remembers how long it was asked to wait."""
    return FakeSleep()


def fast_retry(sleep: FakeSleep | None = None, **options: Any) -> RetryPolicy:
    """A policy with tiny, jitter-free waits (or recorded ones), to keep tests fast."""
    defaults: dict[str, Any] = {"wait_initial_s": 0.01, "wait_max_s": 0.05, "wait_jitter_s": 0.0}
    if sleep is not None:
        defaults["sleep"] = sleep
    return RetryPolicy(**{**defaults, **options})


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


@pytest.fixture
def context(
    llm_server: ScriptedLLMServer, redis_url: str, redis_client: redis.Redis
) -> Iterator[WorkerContext]:
    """A worker context whose backend `coach` is the scripted LLM server, on an empty Redis."""
    with worker_context(settings_for(llm_server.endpoint), redis_url) as installed:
        yield installed
