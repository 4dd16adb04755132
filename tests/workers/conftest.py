"""Fixtures for backend tests: scripted LLM servers, an async Redis client, a worker context."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import pytest_asyncio
import redis
import redis.asyncio

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


@pytest.fixture
def context(
    llm_server: ScriptedLLMServer, redis_url: str, redis_client: redis.Redis
) -> Iterator[WorkerContext]:
    """A worker context whose backend `coach` is the scripted LLM server, on an empty Redis
    (no controller hands a repair over here: a diagnosis waits for one briefly)."""
    settings = settings_for(llm_server.endpoint)
    with worker_context(settings, redis_url, follow_up_wait_s=0.2) as installed:
        yield installed
