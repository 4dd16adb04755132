"""The controller's Redis connection pools: one for its own loops, one for the HTTP API.

Both are bounded and blocking: a caller that finds every connection in use waits for one
(up to a timeout) instead of failing with "Too many connections". Only the API's calls
time out (`pooled_client`).
"""

from __future__ import annotations

from redis.asyncio import BlockingConnectionPool, Redis

from gencoach.runtime.connections import connection_options

LOOP_CONNECTIONS = 64
"""The loops' pool: every loop and task the controller runs at once, with room to spare."""
LOOP_WAIT_S = 60.0
"""How long a loop waits for a connection before its call fails (and is retried)."""
API_SOCKET_TIMEOUT_S = 5.0
"""How long an API call waits for Redis's answer before it answers 503."""


def pooled_client(
    url: str, max_connections: int, wait_s: float, socket_timeout_s: float | None
) -> Redis:
    """A client on a pool of at most `max_connections` whose callers wait up to `wait_s`
    for a connection and `socket_timeout_s` (None: as long as it takes) for an answer.

    The API's pool is its own, sized like the API's concurrency limit, so a burst of
    requests waits on the API side and never takes a connection the intake, coaching,
    reconcile or save loops need. Its calls time out (`API_SOCKET_TIMEOUT_S`), so a
    client hears 503 from a Redis that stopped answering. The loops' calls do not: a loop
    has nothing to do but wait for the Redis that holds its work, a dead connection is
    found within `DEAD_PEER_S` (`connection_options`) and a closed one at once, and
    a per-call timeout costs every call a timer and, on Python 3.11, a task (15 to 25 us
    of CPU, a sixth to a quarter of the client's: `benchmarks/redis_calls.py`).
    """
    pool = BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=wait_s, **connection_options(socket_timeout_s)
    )
    return Redis(connection_pool=pool)
