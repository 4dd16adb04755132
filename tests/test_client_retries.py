"""The Reporter sends a batch again when the connection drops, and says so when it gives up."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest
import redis

from gencoach.client import Reporter, ReportError
from gencoach.constants import Keys
from tests.support.graphs import RUN_STARTED
from tests.support.processes import free_port
from tests.support.restartable_redis import RestartableRedis

pytestmark = pytest.mark.slow


def test_a_batch_survives_redis_being_away_for_a_moment(tmp_path: Path) -> None:
    """Redis down when a batch is sent and back a second later: the batch arrives."""
    server = RestartableRedis(tmp_path / "redis")
    server.start()
    comeback = threading.Timer(1.0, server.start)
    try:
        reporter = Reporter("retried", redis_url=server.url, retry_timeout_s=30)
        reporter.emit("run.started", **RUN_STARTED)
        reporter.flush()
        server.kill()
        comeback.start()
        reporter.emit("run.finished")
        reporter.close()
        client = redis.Redis.from_url(server.url)
        (entry,) = client.xrange(Keys().events)  # the restarted Redis is empty but for it
        assert json.loads(entry[1][b"event"])["type"] == "run.finished"
        client.close()
    finally:
        comeback.join(15)
        server.kill()


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
