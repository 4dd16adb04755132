"""One item's unexpected failure is logged and contained; Redis outages are not."""

from __future__ import annotations

import pytest
import redis.exceptions
from structlog.testing import capture_logs

from gencoach.service.isolation import isolated

pytestmark = pytest.mark.asyncio


async def test_a_failing_item_is_logged_and_contained() -> None:
    """A bug in handling one item becomes a log event with the traceback, not a crash."""
    with capture_logs() as logs:
        async with isolated("coach.terminal_failed", candidate_id="c7"):
            raise KeyError("missing")
    (event,) = logs
    assert event["event"] == "coach.terminal_failed"
    assert event["candidate_id"] == "c7"
    assert event["exc_info"] is True


async def test_redis_outages_propagate() -> None:
    """Redis being unreachable reaches the loop, which backs off and retries the batch."""
    with pytest.raises(redis.exceptions.ConnectionError):
        async with isolated("coach.terminal_failed"):
            raise redis.exceptions.ConnectionError("down")
