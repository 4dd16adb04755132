"""Which worker queues back up: one warning per queue, not one per pass.

A queue backs up when its oldest job has waited longer than a bound without a worker
taking it (`gencoach.rq_adapter.backlog` reads it); `BacklogWatch` then logs one warning
for that queue, and one line when it drains.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gencoach.rq_adapter import Backlog
from gencoach.runtime.logs import get_logger

log = get_logger("backlog")


@dataclass
class BacklogWatch:
    """Warns once per queue while its jobs wait unclaimed longer than `bound_s`."""

    bound_s: float
    backed_up: set[str] = field(default_factory=set)

    def observe(self, backlogs: list[Backlog]) -> list[Backlog]:
        """Log what changed; return the queues newly found backed up."""
        warned = []
        for backlog in backlogs:
            late = backlog.jobs > 0 and backlog.oldest_wait_s > self.bound_s
            if late and backlog.queue not in self.backed_up:
                self.backed_up.add(backlog.queue)
                warned.append(backlog)
                log.warning(
                    "queue.backlog",
                    queue=backlog.queue,
                    jobs=backlog.jobs,
                    waiting_s=round(backlog.oldest_wait_s, 1),
                    workers=backlog.workers,
                    message=backlog.describe(),
                )
            elif not late and backlog.queue in self.backed_up:
                self.backed_up.discard(backlog.queue)
                log.info("queue.caught_up", queue=backlog.queue, jobs=backlog.jobs)
        return warned
