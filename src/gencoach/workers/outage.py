"""A worker whose Redis stops serving it waits for it instead of dying.

A dropped connection, `LOADING` and writes refused at `maxmemory` are all an outage
(`REDIS_AWAY`): `RedisOutage` waits one out for a running worker, `wait_writable` for one
that is starting. What operators see: docs/operations.md, "Redis restarts and persistence".
"""

from __future__ import annotations

import time
from typing import Final

import anyio
import redis
import redis.asyncio
import redis.exceptions

from gencoach.constants import QUEUE_DOORBELL
from gencoach.rq_adapter import DOORBELL_MAX, ring
from gencoach.runtime.logs import get_logger
from gencoach.runtime.retrying import REDIS_TRANSIENT, RetryPolicy, describe

log = get_logger("worker")

REDIS_AWAY = REDIS_TRANSIENT
# A worker waits as long as Redis is away (it has nothing else to do): 0.5 s doubling to
# 10 s between tries.
WAIT_FOR_REDIS: Final = RetryPolicy(timeout_s=None, wait_initial_s=0.5, wait_max_s=10.0)


def address_of(client: redis.Redis | redis.asyncio.Redis) -> str:
    """Where a client connects, as a URL without credentials."""
    options = client.connection_pool.connection_kwargs
    if "path" in options:
        return f"unix://{options['path']}"
    host, port = options.get("host", "localhost"), options.get("port", 6379)
    return f"redis://{host}:{port}/{options.get('db', 0)}"


def _unreachable(url: str, error: BaseException) -> None:
    log.warning(
        "worker.redis_unreachable",
        redis=url,
        error=describe(error),
        message=f"Redis at {url} does not take writes; this worker takes jobs again once it does",
    )


def wait_writable(client: redis.Redis) -> None:
    """Return once Redis takes a write, logging the wait if there is one (blocking: for a
    worker process's start, before RQ registers it)."""
    url = address_of(client)
    started = time.monotonic()
    failed = False
    for attempt in WAIT_FOR_REDIS.retrying():
        with attempt:
            try:
                ring(client)
            except REDIS_AWAY as error:
                if not failed:
                    _unreachable(url, error)
                failed = True
                raise
    if failed:
        log.info("worker.redis_back", redis=url, away_s=round(time.monotonic() - started, 1))


class RedisOutage:
    """Waits out one Redis's absences, saying so once at the start and once at the end;
    callers that find Redis away while a wait is under way join it.

    The wait tries a write (a token on the workers' doorbell list, which wakes one idle
    worker at most) through `WAIT_FOR_REDIS`, with no bound. Jobs in flight meanwhile
    cannot publish: their leases lapse and the controller retries their requests.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.outages = 0
        self._back: anyio.Event | None = None

    async def wait_until_back(self, client: redis.asyncio.Redis, error: Exception) -> bool:
        """Log that Redis is away (because of `error`), and return once it takes writes:
        True for the caller whose wait it was, False for one that joined it."""
        if self._back is not None:
            await self._back.wait()
            return False
        self._back = back = anyio.Event()
        try:
            await self._wait(client, error)
        finally:
            self._back = None
            back.set()
        return True

    async def _wait(self, client: redis.asyncio.Redis, error: Exception) -> None:
        self.outages += 1
        started = anyio.current_time()
        _unreachable(self.url, error)
        async for attempt in WAIT_FOR_REDIS.retrying():
            with attempt:
                if attempt.num == 1:
                    raise error  # the caller's failed call was the first try: wait, then ring
                async with client.pipeline(transaction=False) as pipe:
                    pipe.lpush(QUEUE_DOORBELL, b"1")
                    pipe.ltrim(QUEUE_DOORBELL, 0, DOORBELL_MAX - 1)
                    await pipe.execute()
        away_s = round(anyio.current_time() - started, 1)
        log.info("worker.redis_back", redis=self.url, away_s=away_s)
