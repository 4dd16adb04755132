"""What a reporter keeps in Redis besides events: teacher states within their bound, and the
generator state a restarted generator recalls (its next seq, what it remembered)."""

from __future__ import annotations

import json

import anyio
import pytest
import redis

from gencoach.constants import TEACHER_STATE_MAX_BYTES, Keys
from gencoach.reporting.client import AsyncReporter, Reporter
from tests.support.graphs import RUN_STARTED

KEYS = Keys()


def _state_of_size(size: int) -> str:
    """A JSON string value whose compact JSON is `size` bytes."""
    return "x" * (size - 2)


def test_a_teacher_state_of_64_kib_is_kept_and_one_byte_more_is_refused(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A state of exactly `TEACHER_STATE_MAX_BYTES` of JSON is saved; one byte more raises
    ValueError naming the input, the run, its size and the bound, and writes nothing."""
    limit = TEACHER_STATE_MAX_BYTES
    assert limit == 64 * 1024
    with Reporter("big", redis_url=redis_url) as reporter:
        reporter.save_teacher_state(1, _state_of_size(limit))
        with pytest.raises(ValueError, match=f"input 2 of run big has {limit + 1} bytes") as error:
            reporter.save_teacher_state(2, _state_of_size(limit + 1))
    assert f"at most {limit} are kept" in str(error.value)
    saved = redis_client.hgetall(KEYS.teacher_state("big"))
    assert list(saved) == [b"1"]
    assert len(saved[b"1"]) == limit


def test_the_async_reporter_keeps_the_same_bound(redis_url: str, redis_client: redis.Redis) -> None:
    """The async twin refuses the same oversized state with the same message."""

    async def save() -> None:
        async with AsyncReporter("big", redis_url=redis_url) as reporter:
            await reporter.save_teacher_state(3, _state_of_size(TEACHER_STATE_MAX_BYTES + 1))

    with pytest.raises(ValueError, match="input 3 of run big"):
        anyio.run(save)
    assert redis_client.exists(KEYS.teacher_state("big")) == 0


def test_a_restarted_reporter_recalls_what_was_remembered_and_numbers_on(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """What a generator remembered is written with its batch, before the events; a new
    reporter of the run recalls it and numbers its next event after the last one sent."""
    with Reporter("again", redis_url=redis_url) as first:
        first.emit("run.started", **RUN_STARTED)
        first.remember("situation:s0", {"actions": [2, 1]})
        first.emit("run.finished")
    state = redis_client.hgetall(KEYS.generator_state("again"))
    assert json.loads(state[b"situation:s0"]) == {"actions": [2, 1]}
    with Reporter("again", redis_url=redis_url) as second:
        assert second.recall() == {"situation:s0": {"actions": [2, 1]}}
        assert second.next_seq == 2
    with Reporter("fresh", redis_url=redis_url) as fresh:
        assert fresh.recall() == {}


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Reporter("r", api_url="http://127.0.0.1:9"), "kept in Redis: create"),
        (lambda: Reporter("r", redis_url="redis://127.0.0.1:9"), "'next_seq' is the reporter"),
    ],
)
def test_remembering_what_cannot_be_kept_is_refused(make: object, message: str) -> None:
    """Remembering over HTTP, or under the reporter's own field, raises a ValueError saying so."""
    reporter = make()  # type: ignore[operator]
    with pytest.raises(ValueError, match=message):
        reporter.remember("next_seq", 1)
