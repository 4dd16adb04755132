"""A stream consumer waits a Redis outage out as long as it runs, and a stop ends the wait."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis
from structlog.testing import capture_logs

from gencoach.service.store.consumer import ConsumerOptions, Entry, StreamConsumer
from tests.support.restartable_redis import RestartableRedis

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

STREAM, GROUP = "test:outage", "controllers"


async def _until(done: Callable[[], bool], what: str, timeout_s: float = 20) -> None:
    with anyio.move_on_after(timeout_s):
        while not done():  # noqa: ASYNC110 - log records and the running flag signal nothing
            await anyio.sleep(0.05)
        return
    pytest.fail(f"not within {timeout_s:g} s: {what}")


def _retries(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [event for event in logs if event["event"] == "stream.redis_unavailable"]


async def test_a_consumer_waits_redis_out_and_reads_on(private_redis: RestartableRedis) -> None:
    """Redis killed under a running consumer: each retry is logged with its wait; once
    Redis is back (empty) the group is made again and what arrives is handled."""
    client = Redis.from_url(private_redis.url)
    handled: list[bytes] = []

    async def handle(entries: Sequence[Entry]) -> None:
        handled.extend(fields[b"n"] for _, fields in entries)
        await client.xack(STREAM, GROUP, *(entry_id for entry_id, _ in entries))

    consumer = StreamConsumer(client, ConsumerOptions(STREAM, GROUP, "me", block_ms=100), handle)
    try:
        with capture_logs() as logs:
            async with anyio.create_task_group() as tg:
                await tg.start(consumer.run)
                private_redis.kill()
                await _until(lambda: len(_retries(logs)) >= 2, "two retries logged")
                await anyio.to_thread.run_sync(private_redis.start)
                await client.xadd(STREAM, {"n": "after"})
                await _until(lambda: handled == [b"after"], "the entry handled")
                consumer.stop()
        first, second = _retries(logs)[:2]
        assert (first["attempt"], second["attempt"]) == (1, 2)
        assert 0 < first["retry_in_s"] < second["retry_in_s"] <= 5
        assert first["stream"] == STREAM
    finally:
        await client.aclose()


async def test_a_stop_during_an_outage_ends_the_consumer(private_redis: RestartableRedis) -> None:
    """Stopped while Redis is away, the consumer returns at its next try instead of
    waiting for Redis forever."""
    client = Redis.from_url(private_redis.url)

    async def handle(entries: Sequence[Entry]) -> None:
        return None

    consumer = StreamConsumer(client, ConsumerOptions(STREAM, GROUP, "me", block_ms=100), handle)
    try:
        with capture_logs() as logs:
            async with anyio.create_task_group() as tg:
                await tg.start(consumer.run)
                private_redis.kill()
                await _until(lambda: bool(_retries(logs)), "a retry logged")
                consumer.stop()
                await _until(lambda: not consumer.running, "the consumer stopped", 15)
    finally:
        await client.aclose()
