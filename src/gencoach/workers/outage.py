"""A worker whose Redis stops answering waits for it instead of dying.

The first failure logs one warning naming the Redis (host, port and database); the worker
then pings with a growing pause (up to `MAX_PAUSE_S`) and logs one line when Redis
answers again, with how long it was away. Jobs in flight meanwhile cannot publish: their
leases lapse and the controller retries their requests.
"""

from __future__ import annotations

import anyio
import redis
import redis.asyncio
import redis.exceptions

from gencoach.logs import get_logger

log = get_logger("worker")

REDIS_AWAY = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
FIRST_PAUSE_S = 0.5
MAX_PAUSE_S = 10.0


def address_of(client: redis.Redis | redis.asyncio.Redis) -> str:
    """Where a client connects, as a URL without credentials."""
    options = client.connection_pool.connection_kwargs
    if "path" in options:
        return f"unix://{options['path']}"
    host, port = options.get("host", "localhost"), options.get("port", 6379)
    return f"redis://{host}:{port}/{options.get('db', 0)}"


class RedisOutage:
    """Waits out one Redis's absences, saying so once at the start and once at the end."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.outages = 0

    async def wait_until_back(self, client: redis.asyncio.Redis, error: Exception) -> None:
        """Log that Redis is away (because of `error`), and return once it answers."""
        self.outages += 1
        started = anyio.current_time()
        log.warning(
            "worker.redis_unreachable",
            redis=self.url,
            error=str(error) or type(error).__name__,
            message=f"Redis at {self.url} does not answer; "
            "this worker takes jobs again once it does",
        )
        pause_s = FIRST_PAUSE_S
        while True:
            await anyio.sleep(pause_s)
            try:
                await client.ping()
            except REDIS_AWAY:
                pause_s = min(pause_s * 2, MAX_PAUSE_S)
                continue
            away_s = round(anyio.current_time() - started, 1)
            log.info("worker.redis_back", redis=self.url, away_s=away_s)
            return
