"""The Reporter sends a batch again when the connection drops, and says so when it gives up."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx
import pytest
import redis

from gencoach.constants import Keys
from gencoach.reporting.client import Reporter, ReportError
from gencoach.sim.episode import Episode
from gencoach.sim.reporting import EventSender
from tests.support.graphs import RUN_STARTED
from tests.support.processes import free_port
from tests.support.restartable_redis import RestartableRedis
from tests.support.streams import entries

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("fault", ["restarted", "at maxmemory"])
def test_a_batch_survives_redis_being_away_or_full_for_a_moment(
    private_redis: RestartableRedis, fault: str
) -> None:
    """Redis down (or refusing writes at its maxmemory) when a batch is sent, and back a
    second later: the batch arrives."""
    server = private_redis
    fail: Callable[[], object]
    recover: Callable[[], object]
    if fault == "restarted":
        fail, recover = server.kill, server.start
    else:
        fail, recover = server.refuse_writes, lambda: server.refuse_writes(False)
    comeback = threading.Timer(1.0, recover)
    try:
        reporter = Reporter("retried", redis_url=server.url, retry_timeout_s=30)
        reporter.emit("run.started", **RUN_STARTED)
        reporter.flush()
        fail()
        comeback.start()
        reporter.emit("run.finished")
        reporter.close()
        client = redis.Redis.from_url(server.url)
        types = [
            json.loads(fields[b"event"])["type"] for _, fields in entries(client, Keys().events)
        ]
        # The restarted Redis is empty but for the batch sent again.
        assert types == (
            ["run.finished"] if fault == "restarted" else ["run.started", "run.finished"]
        )
        client.close()
    finally:
        comeback.join(15)


def test_the_reporter_gives_up_with_a_clear_error_and_keeps_the_batch(tmp_path: Path) -> None:
    """Redis gone for good after the first batch: ReportError after its attempts, events kept."""
    server = RestartableRedis(tmp_path / "redis")
    server.start()
    reporter = Reporter("lonely", redis_url=server.url, attempts=3, retry_timeout_s=5)
    reporter.emit("run.started", **RUN_STARTED)
    reporter.flush()
    server.kill()
    reporter.emit("run.finished")
    with pytest.raises(ReportError, match=r"could not send 1 events of run lonely after 3 "):
        reporter.flush()
    assert reporter.next_seq == 2
    with pytest.raises(ReportError):
        reporter.close()  # the batch is still there to send, and still cannot be


def test_a_reporter_that_never_reached_gencoach_fails_at_once() -> None:
    """A wrong URL is not a dropped connection: the first batch fails with its own error."""
    reporter = Reporter("lost", api_url=f"http://127.0.0.1:{free_port()}")
    reporter.emit("run.started", **RUN_STARTED)
    started = time.monotonic()
    with pytest.raises(httpx.ConnectError):
        reporter.flush()
    assert time.monotonic() - started < 5
    assert reporter.next_seq == 1


def test_reading_branch_orders_survives_redis_being_away_for_a_moment(tmp_path: Path) -> None:
    """A dropped connection while reading branch orders is retried, not raised."""
    server = RestartableRedis(tmp_path / "redis")
    server.start()
    comeback = threading.Timer(1.0, server.start)
    try:
        with Reporter("reader", redis_url=server.url, retry_timeout_s=30) as reporter:
            reporter.emit("run.started", **RUN_STARTED)
            reporter.flush()
            server.kill()
            comeback.start()
            assert reporter.branch_orders(block_s=0.1) == []
    finally:
        comeback.join(15)
        server.kill()


def test_the_reporter_gives_up_at_maxmemory_saying_so(private_redis: RestartableRedis) -> None:
    """Redis stays at maxmemory: ReportError naming maxmemory after the attempts, batch kept."""
    server = private_redis
    reporter = Reporter("full", redis_url=server.url, attempts=3, retry_timeout_s=5)
    reporter.emit("run.started", **RUN_STARTED)
    reporter.flush()
    server.refuse_writes()
    reporter.emit("run.finished")
    with pytest.raises(ReportError, match="Redis refuses writes: it is at its maxmemory"):
        reporter.flush()
    server.refuse_writes(False)
    reporter.close()  # nothing accepted was lost: the kept batch goes now
    client = redis.Redis.from_url(server.url)
    assert client.xlen(Keys().events) == 2
    client.close()


def test_the_simulators_world_states_survive_a_redis_restart(tmp_path: Path) -> None:
    """The reference simulator's own writes are retried like its events across a restart."""
    server = RestartableRedis(tmp_path / "redis")
    server.start()
    comeback = threading.Timer(1.0, server.start)

    async def scenario() -> None:
        async with EventSender("restarted", redis_url=server.url) as recorder:
            await recorder.emit("run.started", **RUN_STARTED)
            await recorder.flush()
            server.kill()
            comeback.start()
            await recorder.save_state(1, Episode.start("buttons", 0).snapshot())

    try:
        anyio.run(scenario)
        client = redis.Redis.from_url(server.url)
        assert client.hkeys(Keys().teacher_state("restarted")) == [b"1"]
        client.close()
    finally:
        comeback.join(15)
        server.kill()


def test_saving_a_teacher_state_gives_up_at_maxmemory_saying_so(
    private_redis: RestartableRedis,
) -> None:
    """Redis stays at maxmemory: saving a teacher state raises ReportError naming maxmemory
    after the attempts; once Redis takes writes again the same save goes through."""
    server = private_redis
    reporter = Reporter("full-teacher", redis_url=server.url, attempts=3, retry_timeout_s=5)
    reporter.emit("run.started", **RUN_STARTED)
    reporter.flush()
    server.refuse_writes()
    with pytest.raises(ReportError) as raised:
        reporter.save_teacher_state(1, {"world": "sw0 pressed"})
    assert str(raised.value) == (
        "could not save the teacher state of input 1 of run full-teacher: Redis refuses "
        "writes: it is at its maxmemory (command not allowed when used memory > 'maxmemory'.)"
    )
    server.refuse_writes(False)
    reporter.save_teacher_state(1, {"world": "sw0 pressed"})
    reporter.close()
    client = redis.Redis.from_url(server.url)
    assert client.hget(Keys().teacher_state("full-teacher"), "1") == b'{"world":"sw0 pressed"}'
    client.close()


def test_reading_branch_orders_gives_up_with_a_clear_error(tmp_path: Path) -> None:
    """Redis gone for good: reading branch orders raises ReportError naming the run and the
    cause after the attempts (the same wording, maxmemory included, as every give-up)."""
    server = RestartableRedis(tmp_path / "redis")
    server.start()
    reporter = Reporter("no-orders", redis_url=server.url, attempts=2, retry_timeout_s=3)
    reporter.emit("run.started", **RUN_STARTED)
    reporter.flush()
    server.kill()
    with pytest.raises(ReportError, match=r"^could not read the branch orders of run no-orders: "):
        reporter.branch_orders(block_s=0.1)
