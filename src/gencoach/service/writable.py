"""Whether Redis takes writes: a server at its `maxmemory` (OOM) still answers PING.

Under the `noeviction` policy, or with nothing left to evict, Redis refuses every
write with `OOM command not allowed when used memory > 'maxmemory'` while reads and
PING succeed. A replica refuses writes too (`READONLY`). The probe writes one small
key that expires by itself, so the answer is the server's own.
"""

from __future__ import annotations

import redis.exceptions
from redis.asyncio import Redis

from gencoach.constants import Keys

PROBE_TTL_MS = 60_000
REDIS_FULL = "Redis refuses writes: it is at its maxmemory"


async def write_refusal(client: Redis, keys: Keys) -> str | None:
    """Why Redis refuses writes now, or None when it takes them.

    A dropped connection is not a refusal: it propagates, as for any other Redis call.
    """
    try:
        await client.set(keys.write_probe, b"1", px=PROBE_TTL_MS)
    except redis.exceptions.OutOfMemoryError as error:
        return f"{REDIS_FULL} ({error})"
    except redis.exceptions.ReadOnlyError as error:
        return f"Redis refuses writes: it is a read-only replica ({error})"
    return None
