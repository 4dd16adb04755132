"""Fixtures shared by the whole suite: a real Redis server, flushed per test.

`GC_TEST_REDIS` chooses the server: unset or `embedded`, a private embedded one
started for the session (for each pytest-xdist worker); a `redis://` URL, that server,
whose database is flushed before and after every test that uses it (so only ever name a
database nobody else keeps data in; under xdist, worker gwN takes the one N below it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from gencoach.runtime.embedded_redis import EmbeddedRedis
from tests.support.agent_server import scripted_agent  # noqa: F401 - a shared fixture
from tests.support.controller import controller_factory  # noqa: F401 - a shared fixture
from tests.support.processes import STARTUP_S
from tests.support.restartable_redis import private_redis  # noqa: F401 - a shared fixture

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


def _worker_database(url: str) -> str:
    """The database of this pytest-xdist worker: the URL's for the first (or without
    xdist), one below it for the next, and so on (`redis://host/15`: gw0 15, gw1 14)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    offset = int(worker.removeprefix("gw") or 0)
    if offset == 0:
        return url
    parts = urlsplit(url)
    database = int(parts.path.strip("/") or 0) - offset
    if database < 0:
        raise pytest.UsageError(f"GC_TEST_REDIS {url} leaves no database for worker {worker}")
    return urlunsplit(parts._replace(path=f"/{database}"))


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a real Redis server for this test session."""
    mode = os.environ.get("GC_TEST_REDIS") or "embedded"
    if mode.startswith(("redis://", "unix://")):
        mode = _worker_database(mode)
        if not _answers(mode):
            raise pytest.UsageError(f"GC_TEST_REDIS names {mode}, which does not answer PING")
        yield mode
    elif mode == "embedded":
        folder = tmp_path_factory.mktemp("redis")
        with EmbeddedRedis(folder, persist=False, start_timeout_s=STARTUP_S) as server:
            assert server.url is not None
            yield server.url
    else:
        raise pytest.UsageError(
            f"GC_TEST_REDIS is {mode!r}: use `embedded` (the default) or a redis:// URL"
        )


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
