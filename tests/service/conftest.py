"""Fixtures for the controller: real processes on the test Redis, killed after each test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import pytest_asyncio
import redis
from redis.asyncio import Redis as AsyncRedis

from gencoach.constants import Keys
from gencoach.service.store.graphstore import GraphStore
from tests.support.controller import ControllerProcess
from tests.support.llm_server import ScriptedLLMServer, scripted_llm_servers


@pytest.fixture
def controller(controller_factory: Callable[..., ControllerProcess]) -> ControllerProcess:
    """A running controller."""
    process = controller_factory()
    process.start()
    return process


@pytest_asyncio.fixture
async def async_redis(redis_url: str, redis_client: redis.Redis) -> AsyncIterator[AsyncRedis]:
    """An asyncio client on the same (empty) database as `redis_client`."""
    client = AsyncRedis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest_asyncio.fixture
async def store(async_redis: AsyncRedis) -> GraphStore:
    """A graph store on the test database."""
    return GraphStore(async_redis, Keys())


@pytest.fixture
def llm() -> Iterator[ScriptedLLMServer]:
    """A scripted OpenAI-compatible server on loopback."""
    with scripted_llm_servers() as start:
        yield start()
