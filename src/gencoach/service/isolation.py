"""Keeping one bad item from stopping a loop, or a task group, that serves every run."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from gencoach.runtime.logs import get_logger
from gencoach.runtime.retrying import REDIS_TRANSIENT

log = get_logger("isolation")

# Redis away, or refusing writes at its maxmemory: the batch is retried, never dropped.
REDIS_UNAVAILABLE = REDIS_TRANSIENT


@asynccontextmanager
async def isolated(event: str, **fields: object) -> AsyncIterator[None]:
    """Log an item's unexpected failure with its traceback and carry on.

    Redis being unreachable is not the item's fault: that propagates, so the loop
    backs off and retries the whole batch.
    """
    try:
        yield
    except REDIS_UNAVAILABLE:
        raise
    except Exception:
        log.exception(event, **fields)


def guarded(
    event: str, work: Callable[..., Awaitable[object]], **fields: object
) -> Callable[..., Coroutine[Any, Any, None]]:
    """`work` as a fire-and-forget task that logs any failure instead of ending its group.

    Nothing retries such a task from the outside, so Redis being unreachable is logged
    like any other failure; the periodic passes (catch-up, reconciliation, saves) pick
    the work up again once Redis is back.
    """

    async def run(*args: object) -> None:
        try:
            await work(*args)
        except REDIS_UNAVAILABLE as error:
            log.warning(event, error=str(error), redis_unavailable=True, **fields)
        except Exception:
            log.exception(event, **fields)

    return run
