"""Queue backlogs: one warning per queue while jobs wait unclaimed, one line when it drains."""

from __future__ import annotations

from structlog.testing import capture_logs

from gencoach.rq_adapter import Backlog
from gencoach.service.dispatching.backlog import BacklogWatch


def test_a_backed_up_queue_is_reported_once_until_it_catches_up() -> None:
    """Past the bound the queue is reported once however many passes see it; after it
    drains, a new backlog is reported again."""
    watch = BacklogWatch(bound_s=30.0)
    late = Backlog("gencoach-diagnosis", jobs=12, oldest_wait_s=45.0, workers=0)
    fresh = Backlog("gencoach-repair", jobs=2, oldest_wait_s=3.0, workers=1)
    with capture_logs() as logs:
        assert watch.observe([late, fresh]) == [late]
        assert watch.observe([late, fresh]) == []
        assert watch.observe([Backlog("gencoach-diagnosis", 0, 0.0, 1)]) == []
        assert watch.observe([late]) == [late]
    names = [entry["event"] for entry in logs]
    assert names == ["queue.backlog", "queue.caught_up", "queue.backlog"]
    assert (
        logs[0]["message"] == "no worker is consuming gencoach-diagnosis: 12 jobs waiting for 45 s"
    )


def test_a_queue_whose_workers_are_busy_says_so() -> None:
    """With workers on the queue, the warning says they are all busy rather than absent."""
    backlog = Backlog("gencoach-diagnosis", jobs=4, oldest_wait_s=61.4, workers=2)
    assert backlog.describe() == (
        "gencoach-diagnosis: 4 jobs waiting for 61 s; its 2 worker(s) are all busy"
    )
