"""Fixtures shared by the whole suite: a real Redis server, flushed per test.

`GC_TEST_REDIS` chooses the server: `auto` (default) uses the one at
127.0.0.1:6379 when it answers, else starts an embedded one; `embedded` always
starts an embedded one; a `redis://` URL uses that server.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis

from gencoach.embedded_redis import EmbeddedRedis
from tests.support.agent_server import scripted_agent  # noqa: F401 - a shared fixture

SYSTEM_REDIS = "redis://127.0.0.1:6379/15"

# The interop suite runs MAGMA's code in its own Python 3.12 venv (`make interop`).
collect_ignore = ["interop"]


def _answers(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a real Redis server for this test session."""
    mode = os.environ.get("GC_TEST_REDIS", "auto")
    if mode.startswith(("redis://", "unix://")):
        yield mode
    elif mode == "auto" and _answers(SYSTEM_REDIS):
        yield SYSTEM_REDIS
    else:
        with EmbeddedRedis(tmp_path_factory.mktemp("redis"), persist=False) as server:
            assert server.url is not None
            yield server.url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A client on an empty database, emptied again after the test."""
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--chaos` runs the chaos suite (minutes of killed processes), skipped otherwise."""
    parser.addoption("--chaos", action="store_true", help="run the tests marked chaos")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that talks to the Redis server, so CI can rerun them on another one;
    skip the chaos suite unless `--chaos` asks for it."""
    skip_chaos = pytest.mark.skip(reason="the chaos suite runs with --chaos (make chaos)")
    for item in items:
        if "redis_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.redis)
        if "chaos" in item.keywords and not config.getoption("--chaos"):
            item.add_marker(skip_chaos)
