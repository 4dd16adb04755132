"""Job functions RQ workers import by name in tests, and `put`, which enqueues the worker
tests' job functions (`tests.workers.rq_functions`) as gencoach does."""

from __future__ import annotations

from typing import Any

import redis
from rq import Queue
from rq.job import Job

from gencoach.constants import QUEUE_DIAGNOSIS
from gencoach.rq_adapter import ring

FUNCTIONS = "tests.workers.rq_functions"


def add(left: int, right: int) -> int:
    """Return the sum, so a test can see a job ran."""
    return left + right


def put(
    client: redis.Redis, function: str, *args: Any, queue: str = QUEUE_DIAGNOSIS, **options: Any
) -> Job:
    """Enqueue `tests.workers.rq_functions.<function>` and ring the workers' doorbell."""
    job = Queue(queue, connection=client).enqueue(f"{FUNCTIONS}.{function}", *args, **options)
    ring(client)
    return job
