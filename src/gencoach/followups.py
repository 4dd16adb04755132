"""A diagnosis's repair, handed to the worker that ran the diagnosis instead of queued.

The worker waits `FOLLOW_UP_WAIT_S` after publishing a diagnosis (`await_follow_up`); the
controller, once it has built the repair, hands it over when that worker still waits
(`hand_over`) and queues it on RQ otherwise. A correction then costs one RQ job.
"""

from __future__ import annotations

from typing import Final

import anyio
import redis
import redis.asyncio

from gencoach.constants import Keys

FOLLOW_UP_WAIT_S: Final = 2.0
"""How long a worker waits for the repair of the diagnosis it published."""
WAITING_TTL_S: Final = FOLLOW_UP_WAIT_S + 5.0
"""How long a waiting mark outlives the wait: a worker held up past its wait still finds
a repair handed over in the meantime; one that died leaves a mark that lapses, and the
repair is queued."""

# The controller claims the waiting mark and leaves the job in one step, so a worker that
# gives up in between (`_GIVE_UP`) either finds the mark still its own or the job there.
_HAND_OVER: Final = """
if redis.call('DEL', KEYS[2]) == 0 then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
_GIVE_UP: Final = """
if redis.call('DEL', KEYS[2]) == 1 then return false end
return redis.call('LINDEX', KEYS[1], 0)
"""


def _keys(keys: Keys, run_id: str, request_id: str, attempt: int) -> list[str]:
    job = keys.follow_up(run_id, request_id, attempt)
    return [job, f"{job}:waiting"]


def announce(
    pipe: redis.asyncio.client.Pipeline, keys: Keys, run_id: str, request_id: str, attempt: int
) -> None:
    """Mark the worker waiting for that attempt's repair (queued on `pipe`: before the
    diagnosis is published, so the controller never builds the repair before the mark)."""
    waiting = _keys(keys, run_id, request_id, attempt)[1]
    pipe.set(waiting, b"1", px=int(WAITING_TTL_S * 1000))


async def await_follow_up(
    client: redis.asyncio.Redis,
    keys: Keys,
    run_id: str,
    request_id: str,
    attempt: int,
    wait_s: float = FOLLOW_UP_WAIT_S,
) -> str | None:
    """The repair job handed over within `wait_s` (its JSON), or None: the controller
    queues it on RQ. The job stays in its list until its lease's time has passed, so the
    controller counts it waiting until the worker has taken it (`handed`)."""
    job_key, waiting = _keys(keys, run_id, request_id, attempt)
    give_up = client.register_script(_GIVE_UP)
    try:
        # Moving the list onto itself reads its job without taking it out.
        # (Redis takes a fractional timeout, where 0 would wait for ever; redis-py's
        # annotation says int.)
        found = None
        if wait_s > 0:
            found = await client.blmove(job_key, job_key, wait_s, "LEFT", "LEFT")  # type: ignore[arg-type]
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):  # stopped: let the controller queue it
            await give_up(keys=[job_key, waiting])
        raise
    if found is None:
        found = await give_up(keys=[job_key, waiting])
    if found is None:
        return None
    return found.decode() if isinstance(found, bytes) else str(found)


def hand_over(
    connection: redis.Redis,
    keys: Keys,
    run_id: str,
    request_id: str,
    attempt: int,
    payload: str,
    ttl_s: float,
) -> bool:
    """Give the repair job to the worker waiting for it; False when none waits (queue it).

    The job is kept `ttl_s` (its lease): a worker that dies before taking it leaves it to
    lapse, and the request is then retried like one whose queued job was lost.
    """
    script = connection.register_script(_HAND_OVER)
    keys_ = _keys(keys, run_id, request_id, attempt)
    return bool(script(keys=keys_, args=[payload, int(ttl_s * 1000)]))


def handed(connection: redis.Redis, keys: Keys, run_id: str, request_id: str, attempt: int) -> bool:
    """Whether that attempt's repair was handed over and not yet lapsed."""
    return bool(connection.exists(_keys(keys, run_id, request_id, attempt)[0]))
