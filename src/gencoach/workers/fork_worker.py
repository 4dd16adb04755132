"""RQ's forking worker, taking jobs in priority order atomically: one job at a time, isolated.

For backends that run code which must not share a process with other jobs (a python
backend running user code): each job runs in a forked work-horse, which a crash or a
runaway job cannot take the worker down with. It costs a fork, an event loop and fresh
clients per job, and runs one job per process; `AsyncWorker` is the default.
"""

from __future__ import annotations

from rq import Worker
from rq.job import Job

from gencoach.workers.queues import PriorityQueue


class ForkWorker(Worker):
    """RQ's `Worker` over every queue with `PriorityQueue`'s atomic take."""

    queue_class = PriorityQueue

    def prepare_job_execution(self, job: Job, remove_from_intermediate_queue: bool = False) -> None:
        """RQ's bookkeeping, always clearing the intermediate list the take put the job in."""
        super().prepare_job_execution(job, remove_from_intermediate_queue=True)
