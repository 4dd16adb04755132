"""Open runs cost nothing while nothing happens: a reconciliation pass reads the runs whose
deadline came (fallen silent, a registration due) and a fixed slice of the runs it saw
open, never every active run; silent runs are still abandoned, lost registrations still
made, and no deadline outlives its run."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import redis
from redis.asyncio import Redis

from gencoach.constants import EVENT_FIELD, Keys
from gencoach.protocol import AnyEvent, parse_event
from gencoach.service.recovery.reconcile import OPEN_CHECKS
from gencoach.service.store.graphstore import META, GraphStore
from gencoach.service.store.watches import LAPSE_S
from tests.support.agent_server import ScriptedAgent
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import RUN_STARTED, known_events
from tests.support.hanging_agent import HangingAgent
from tests.support.restartable_redis import RestartableRedis

pytestmark = pytest.mark.slow

KEYS = Keys()
RUNS = 600
# Long enough that the runs stay open through the measured window, short enough that
# they are abandoned within the test.
IDLE_S = 30
WINDOW_S = 10


def _started(run_id: str, agent_url: str) -> AnyEvent:
    return parse_event(
        {**RUN_STARTED, "type": "run.started", "run_id": run_id, "seq": 0, "agent_url": agent_url}
    )


def _publish(client: redis.Redis, events: Sequence[AnyEvent]) -> None:
    pipe = client.pipeline(transaction=False)
    for event in events:
        pipe.xadd(KEYS.events, {EVENT_FIELD: event.model_dump_json()})
    pipe.execute()


async def _apply(redis_url: str, events: Sequence[AnyEvent]) -> None:
    """Apply events straight to the store, as a controller that died before it registered
    the runs' agents (or before it did anything else with them) would leave them."""
    client = Redis.from_url(redis_url)
    await GraphStore(client, KEYS).apply(events)
    await client.aclose()


def _registered(client: redis.Redis, run_ids: Sequence[str]) -> bool:
    pipe = client.pipeline(transaction=False)
    for run_id in run_ids:
        pipe.hexists(KEYS.run(run_id, META), "registered")
    return all(pipe.execute())


def _state(client: redis.Redis, run_id: str) -> str | None:
    value = client.hget(KEYS.run(run_id, META), "state")
    return value.decode() if isinstance(value, bytes) else None


def _counts(url: str) -> dict[str, int]:
    response = httpx.get(f"{url}/v1/runs", params={"limit": 1}, timeout=10)
    assert response.status_code == 200, response.text
    counts: dict[str, int] = response.json()["counts"]
    return counts


def _calls(client: redis.Redis, command: str) -> int:
    stats: Any = client.info("commandstats").get(f"cmdstat_{command}")
    return int(stats["calls"]) if stats else 0


def _watched(client: redis.Redis) -> tuple[int, int]:
    """How many runs `heard` and `registrations` hold."""
    return int(client.zcard(KEYS.heard)), int(client.zcard(KEYS.registrations))


def test_no_pass_reads_every_idle_run_and_each_is_abandoned_by_its_deadline(
    private_redis: RestartableRedis, scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """With 600 open runs, no request and no event, the passes of 10 s read no run's
    requests (HGETALL) and no more runs' state (HMGET) than the fixed slice of runs seen
    open each pass checks (a sweep would read 600); once silent for `abandon_idle_s` every
    run is finished as abandoned and saved, and no deadline is left behind. Redis counts
    commands server-wide, so the test has a server of its own."""
    client = redis.Redis.from_url(private_redis.url)
    controller = ControllerProcess(
        tmp_path,
        private_redis.url,
        settings={"coaching": {"enabled": False}},
        abandon_idle_s=IDLE_S,
        housekeeping_s=3600,  # its own slice of the runs index is not the passes' cost
    )
    run_ids = [f"idle-{index}" for index in range(RUNS)]
    try:
        controller.start()
        _publish(client, [_started(run_id, scripted_agent.url) for run_id in run_ids])
        wait_for(lambda: _registered(client, run_ids), timeout_s=60, what="the runs registered")
        before = {command: _calls(client, command) for command in ("hgetall", "hmget")}
        time.sleep(WINDOW_S)  # about five passes, two seconds apart
        read = {command: _calls(client, command) - before[command] for command in before}
        assert _counts(controller.url)["active"] == RUNS  # none came due yet
        assert read["hgetall"] < 50, read
        passes = WINDOW_S / 2 + 2
        assert read["hmget"] < OPEN_CHECKS * passes + 50, read  # a sweep alone reads RUNS

        wait_for(
            lambda: _counts(controller.url)["saved"] == RUNS,
            timeout_s=IDLE_S + 120,
            what="every silent run abandoned and saved",
        )
        assert _watched(client) == (0, 0)
        summary = httpx.get(f"{controller.url}/v1/runs/idle-7", timeout=10).json()
        assert summary["finish_reason"].startswith("abandoned: no event from the generator")
    finally:
        controller.stop()
        client.close()
        print(controller.trouble())  # shown only when the test failed


def test_a_run_heard_from_stays_open_while_a_silent_one_is_abandoned(
    controller_factory: Callable[..., ControllerProcess],
    redis_client: redis.Redis,
    scripted_agent: ScriptedAgent,
) -> None:
    """Each event moves its run's deadline on: of two runs started together, the one whose
    generator keeps reporting stays active past `abandon_idle_s` while the silent one is
    abandoned; once it falls silent too it is abandoned, and neither stays watched."""
    controller = controller_factory(settings={"coaching": {"enabled": False}}, abandon_idle_s=4)
    controller.start()
    talking = known_events("talking")
    talking[0] = _started("talking", scripted_agent.url)
    _publish(redis_client, [_started("quiet", scripted_agent.url), talking[0]])
    for event in talking[1:9]:  # one event a second, eight seconds
        time.sleep(1)
        _publish(redis_client, [event])
        assert _state(redis_client, "talking") == "active"
    assert _state(redis_client, "quiet") in ("finished", "saved")
    assert redis_client.zrange(KEYS.heard, 0, -1) == [b"talking"]

    wait_for(
        lambda: _state(redis_client, "talking") == "saved",
        timeout_s=30,
        what="the run that fell silent last abandoned and saved",
    )
    assert _watched(redis_client) == (0, 0)


def test_a_run_whose_registration_was_lost_is_registered_without_a_sweep(
    controller_factory: Callable[..., ControllerProcess],
    redis_client: redis.Redis,
    redis_url: str,
    scripted_agent: ScriptedAgent,
) -> None:
    """A run applied by a controller that died before it asked the run's agent (applied
    here straight to the store, after the running controller's first passes) has its agent
    asked within seconds, and is no longer watched once that registration ended."""
    controller = controller_factory(settings={"coaching": {"enabled": False}})
    controller.start()
    time.sleep(5)  # a few passes: whatever a pass does at start is done
    anyio.run(_apply, redis_url, [_started("orphan", scripted_agent.url)])
    assert redis_client.zscore(KEYS.registrations, "orphan") is not None

    wait_for(
        lambda: _registered(redis_client, ["orphan"]),
        timeout_s=30,
        what="the orphan run's agent registered",
    )
    assert redis_client.hget(KEYS.run("orphan", META), "agent_id") is not None  # it answered
    assert redis_client.zscore(KEYS.registrations, "orphan") is None
    assert any(e["event"] == "runs.registration_resumed" for e in controller.log_events())


def test_a_registration_under_way_is_taken_over_only_once_its_controller_died(
    redis_client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """A controller asking a hanging agent keeps its registration from coming due: a
    second controller started meanwhile leaves it alone; once the first is SIGKILLed the
    second asks the agent again within `LAPSE_S` and a pass or two."""
    agent = HangingAgent()
    folders = [tmp_path / name for name in ("first", "second")]
    for folder in folders:
        folder.mkdir()
    off = {"coaching": {"enabled": False}}
    first, second = (
        ControllerProcess(folder, redis_url, consumer=folder.name, settings=off)
        for folder in folders
    )
    try:
        first.start()
        _publish(redis_client, [_started("held", agent.url)])
        wait_for(lambda: len(agent.held) >= 1, timeout_s=30, what="the first controller asking")
        asked = time.monotonic()
        second.start()
        # Well within the first ask's 30 s timeout (after which it would ask again itself).
        time.sleep(max(0.0, asked + LAPSE_S + 7 - time.monotonic()))
        assert len(agent.held) == 1, "a live controller's registration was taken over"

        first.stop()  # SIGKILL: its renewals stop with it
        wait_for(
            lambda: len(agent.held) >= 2,
            timeout_s=LAPSE_S + 20,
            what="the second controller asking the agent again",
        )
        assert any(e["event"] == "runs.registration_resumed" for e in second.log_events())
    finally:
        first.stop()
        second.stop()
        agent.close()


def test_no_deadline_outlives_its_run(
    controller_factory: Callable[..., ControllerProcess],
    redis_client: redis.Redis,
    scripted_agent: ScriptedAgent,
) -> None:
    """Wave after wave of runs that start, finish, are saved and expire leave `heard` and
    `registrations` empty, and a late event for a finished run watches nothing again."""
    controller = controller_factory(
        settings={"coaching": {"enabled": False}}, abandon_idle_s=3, saved_ttl_s=5
    )
    controller.start()
    for wave in range(3):
        run_ids = [f"wave-{wave}-{index}" for index in range(100)]
        finished = [{"type": "run.finished", "run_id": run_id, "seq": 1} for run_id in run_ids]
        _publish(
            redis_client,
            [_started(run_id, scripted_agent.url) for run_id in run_ids]
            + [parse_event(event) for event in finished],
        )
        wait_for(
            lambda ids=run_ids: all(_state(redis_client, run_id) for run_id in ids),
            what=f"wave {wave} applied",
        )
        wait_for(
            lambda ids=run_ids: all(_state(redis_client, r) in ("saved", None) for r in ids),
            timeout_s=60,
            what=f"wave {wave} saved",
        )
        assert _watched(redis_client) == (0, 0)
    late = known_events("wave-2-99")[1]  # a situation after the run's end: refused
    _publish(redis_client, [late])
    newest = redis_client.xrevrange(KEYS.events, count=1)
    assert newest
    ((last, _),) = newest

    def handled() -> bool:
        (group,) = redis_client.xinfo_groups(KEYS.events)
        return bool(group["last-delivered-id"] == last and group["pending"] == 0)

    wait_for(handled, what="the late event handled")
    assert _watched(redis_client) == (0, 0)
    wait_for(
        lambda: not redis_client.exists(KEYS.run("wave-0-0", META)),
        timeout_s=30,
        what="the first wave's keys expired",
    )
    assert _watched(redis_client) == (0, 0)
