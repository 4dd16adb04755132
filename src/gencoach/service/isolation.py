"""Keeping one bad item from stopping a loop that serves every run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis.exceptions

from gencoach.logs import get_logger

log = get_logger("isolation")


@asynccontextmanager
async def isolated(event: str, **fields: object) -> AsyncIterator[None]:
    """Log an item's unexpected failure with its traceback and carry on.

    Redis being unreachable is not the item's fault: that propagates, so the loop
    backs off and retries the whole batch.
    """
    try:
        yield
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
        raise
    except Exception:
        log.exception(event, **fields)
