"""Fixtures for backend tests: scripted LLM servers, an async Redis client, fast retries."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, MutableMapping, Sequence
from dataclasses import replace
from typing import Any

import pytest
import pytest_asyncio
import redis
import redis.asyncio

from gencoach.config.settings import BackendSettings
from gencoach.retrying import RetryPolicy
from gencoach.workers.backends.openai import BACKEND_RETRY
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


@pytest.fixture
def context(
    llm_server: ScriptedLLMServer, redis_url: str, redis_client: redis.Redis
) -> Iterator[WorkerContext]:
    """A worker context whose backend `coach` is the scripted LLM server, on an empty Redis."""
    with worker_context(settings_for(llm_server.endpoint), redis_url) as installed:
        yield installed
