"""The controller's Redis connection pools: one for its own loops, one for the HTTP API.

Both are bounded and blocking: a caller that finds every connection in use waits for one
(up to a timeout) instead of failing with "Too many connections". The API's pool is
its own, sized like the API's concurrency limit, so a burst of requests waits on the API
side and never takes a connection the intake, coaching, reconcile or save loops need.
"""

from __future__ import annotations

from redis.asyncio import BlockingConnectionPool, Redis

LOOP_CONNECTIONS = 64
"""The loops' pool: every loop and task the controller runs at once, with room to spare."""
LOOP_WAIT_S = 60.0
"""How long a loop waits for a connection before its call fails (and is retried)."""


def pooled_client(url: str, max_connections: int, wait_s: float) -> Redis:
    """A client on a pool of at most `max_connections` whose callers wait up to `wait_s`."""
    pool = BlockingConnectionPool.from_url(url, max_connections=max_connections, timeout=wait_s)
    return Redis(connection_pool=pool)
