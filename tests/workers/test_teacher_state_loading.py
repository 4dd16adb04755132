"""A job reading its steps' teacher states waits for a Redis still loading its AOF."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import redis.asyncio

from gencoach.constants import Keys
from gencoach.workers.teacher_state import teacher_states
from tests.support.slow_loading import SlowLoadingRedis

pytestmark = pytest.mark.slow


def test_teacher_states_are_read_once_redis_has_loaded(tmp_path: Path) -> None:
    """Saved before a restart, the states are handed over once loading ends, not lost to
    a LOADING error."""
    server = SlowLoadingRedis(tmp_path / "redis")
    server.start()
    try:
        client = server.client()
        client.hset(Keys().teacher_state("r1"), "3", '{"seed": 3}')
        client.close()
        server.pad(5000)
        server.restart()
        assert server.loading()

        async def read() -> dict[str, object]:
            reader = redis.asyncio.Redis.from_url(server.url)
            try:
                return await teacher_states(reader, Keys(), "r1", [3, 4])
            finally:
                await reader.aclose()

        assert anyio.run(read) == {"3": {"seed": 3}}
    finally:
        server.kill()
