"""Generators ride out a Redis restarting from its AOF: a reporter or an order reader that
starts (or is running) while Redis answers LOADING waits for it, within its bound."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import redis
import redis.asyncio

from gencoach.constants import Keys
from gencoach.reporting.client import AsyncReporter, Reporter, ReportError
from gencoach.reporting.orders import OrderReader
from tests.support.graphs import RUN_STARTED
from tests.support.processes import STARTUP_S
from tests.support.slow_loading import SlowLoadingRedis
from tests.support.streams import entries

pytestmark = pytest.mark.slow

# Padding keys: each loads 1 ms late, so a restart answers LOADING for about 5 s.
PADDING_KEYS = 5000


@pytest.fixture
def loading_redis(tmp_path: Path) -> Iterator[SlowLoadingRedis]:
    """A Redis that loads its AOF for a few seconds after each restart."""
    server = SlowLoadingRedis(tmp_path / "redis")
    server.start()
    server.pad(PADDING_KEYS)
    yield server
    server.kill()


def _events(server: SlowLoadingRedis) -> list[bytes]:
    client = server.client()
    try:
        return [fields[b"event"] for _, fields in entries(client, Keys().events)]
    finally:
        client.close()


def test_an_async_reporter_starting_while_redis_loads_sends_once_it_has_loaded(
    loading_redis: SlowLoadingRedis,
) -> None:
    """A generator's first batch, sent while Redis loads, arrives once loading ends, and
    so does its teacher state and its order reader's registration."""
    loading_redis.restart()
    assert loading_redis.loading()

    async def generator() -> None:
        async with AsyncReporter("starting", redis_url=loading_redis.url) as reporter:
            await reporter.save_teacher_state(1, {"seed": 3})
            await reporter.emit("run.started", **RUN_STARTED)
            await reporter.flush()
        client = redis.asyncio.Redis.from_url(loading_redis.url)
        send, receive = anyio.create_memory_object_stream[object](1)
        with send, receive:
            await OrderReader(client, group="g").register("starting", send)
        await client.aclose()

    anyio.run(generator)
    assert len(_events(loading_redis)) == 1
    client = loading_redis.client()
    assert client.hget(Keys().teacher_state("starting"), "1") == b'{"seed":3}'
    assert client.xinfo_groups(Keys().branches("starting"))[0]["name"] == b"g"
    client.close()


def test_a_running_reporter_rides_out_an_outage_longer_than_six_attempts(
    loading_redis: SlowLoadingRedis,
) -> None:
    """A running async reporter (the reference generator's) whose Redis is away for 6 s
    and then loads its AOF keeps sending for its whole `retry_timeout_s` (30 s), not for
    six quick attempts (about 4.5 s)."""
    comeback = threading.Timer(6.0, loading_redis.start)

    async def generator() -> None:
        async with AsyncReporter("running", redis_url=loading_redis.url) as reporter:
            await reporter.emit("run.started", **RUN_STARTED)
            await reporter.flush()
            loading_redis.kill()
            comeback.start()
            await reporter.emit("run.finished")
            await reporter.flush()

    try:
        anyio.run(generator)
    finally:
        comeback.join(STARTUP_S)
    assert len(_events(loading_redis)) == 2


def test_a_reporter_gives_up_after_its_retry_timeout_naming_the_loading(
    loading_redis: SlowLoadingRedis,
) -> None:
    """Past `retry_timeout_s` the error names what Redis was doing, and the batch is kept."""
    loading_redis.restart()
    reporter = Reporter("impatient", redis_url=loading_redis.url, retry_timeout_s=0.5)
    reporter.emit("run.started", **RUN_STARTED)
    with pytest.raises(ReportError) as raised:
        reporter.flush()
    assert str(raised.value).startswith(
        "could not send 1 events of run impatient after 0.5 s of retries: "
        "Redis is loading its data set"
    )
    loading_redis.wait_loaded()
    reporter.close()
    assert len(_events(loading_redis)) == 1
