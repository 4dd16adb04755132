"""The budgets in force (`Budgets`), on a real Redis: the config file's section overlaid by
the overrides every controller shares; built again only when either changes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import redis
from redis.asyncio import Redis

from gencoach.config import CoachingSettings
from gencoach.constants import Keys
from gencoach.service.coaching.budgets import BudgetError, Budgets

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def client(redis_url: str, redis_client: redis.Redis) -> AsyncIterator[Redis]:
    """A client of the flushed test database."""
    connection = Redis.from_url(redis_url)
    yield connection
    await connection.aclose()


async def test_budgets_follow_the_overrides_of_any_controller_and_each_reload(
    client: Redis,
) -> None:
    section = [CoachingSettings(max_pending_per_stage=4)]
    ours, other = (Budgets(client, Keys(), lambda: section[0]) for _ in range(2))
    first = await ours.current()
    assert first.max_pending_per_stage == 4
    assert await ours.current() is first  # nothing changed: not built again

    await other.change({"max_pending_per_stage": 7})  # another controller's PUT
    assert (await ours.current()).max_pending_per_stage == 7

    section[0] = CoachingSettings(max_pending_per_stage=2, max_unproven_per_stage=9)  # SIGHUP
    reloaded = await ours.current()
    assert (reloaded.max_pending_per_stage, reloaded.max_unproven_per_stage) == (7, 9)

    await other.reset()
    assert (await ours.current()).max_pending_per_stage == 2


async def test_an_invalid_override_is_refused_whole_and_nothing_changes(client: Redis) -> None:
    budgets = Budgets(client, Keys(), CoachingSettings)
    with pytest.raises(BudgetError) as refused:
        await budgets.change({"max_pending_per_stage": 3, "max_unproven_per_stage": 0})
    assert "max_unproven_per_stage" in refused.value.problems
    assert await budgets.overrides() == {}
    assert (await budgets.current()).max_pending_per_stage == 5
