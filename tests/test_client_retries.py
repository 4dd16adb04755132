"""The Reporter sends a batch again when the connection drops, and says so when it gives up."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import redis

from gencoach.client import Reporter, ReportError
from gencoach.constants import Keys
from tests.support.graphs import RUN_STARTED
from tests.support.processes import free_port
from tests.support.restartable_redis import RestartableRedis

pytestmark = pytest.mark.slow


def test_a_batch_survives_redis_being_away_for_a_moment(tmp_path: Path) -> None:
    """Redis down when the batch is sent and back a second later: every event arrives."""
    server = RestartableRedis(tmp_path / "redis")
    server.start()
    comeback = threading.Timer(1.0, server.start)
    try:
        reporter = Reporter("retried", redis_url=server.url, retry_timeout_s=30)
        reporter.emit("run.started", **RUN_STARTED)
        server.kill()
        comeback.start()
        reporter.emit("run.finished")
        reporter.close()
        client = redis.Redis.from_url(server.url)
        assert client.xlen(Keys().events) == 2
        client.close()
    finally:
        comeback.join(15)
        server.kill()


def test_the_reporter_gives_up_with_a_clear_error_and_keeps_the_batch() -> None:
    """With nothing listening, flush raises ReportError after its attempts, events kept."""
    url = f"http://127.0.0.1:{free_port()}"
    reporter = Reporter("lonely", api_url=url, attempts=3, retry_timeout_s=5)
    reporter.emit("run.started", **RUN_STARTED)
    with pytest.raises(ReportError, match=r"could not send 1 events of run lonely after 3 "):
        reporter.flush()
    assert reporter.next_seq == 1
    with pytest.raises(ReportError):
        reporter.close()  # the batch is still there to send, and still cannot be
