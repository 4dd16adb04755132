"""Job functions for the async worker's RQ tests: they wait on, count and record in Redis."""

from __future__ import annotations

import redis.asyncio


async def wait_for_gate(redis_url: str, gate: str, value: str) -> str:
    """Block until a token is pushed on the list `gate`, then return `value`."""
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        await client.blpop([gate], timeout=0)
    finally:
        await client.aclose()
    return value


async def flaky(redis_url: str, counter: str, failures: int) -> int:
    """Raise for the first `failures` calls (counted in `counter`), then return the count."""
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        calls = int(await client.incr(counter))
    finally:
        await client.aclose()
    if calls <= failures:
        raise ValueError(f"call {calls} fails on purpose")
    return calls


async def record(redis_url: str, log: str, label: str) -> None:
    """Append `label` to the list `log` (to see the order jobs ran in)."""
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        await client.rpush(log, label)
    finally:
        await client.aclose()


def blocking_sum(a: int, b: int) -> int:
    """A plain function: the async worker runs it in a thread."""
    return a + b
