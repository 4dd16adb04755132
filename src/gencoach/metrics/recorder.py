"""Counting in memory and adding the counts to Redis in one pipeline now and then.

`MetricsRecorder` counts a process's series (`inc`, `observe`) and adds them to the
metrics hash (`flush`).
"""

from __future__ import annotations

from collections import defaultdict

import redis.asyncio
import redis.exceptions

from gencoach.metrics.catalog import Counter, Histogram
from gencoach.metrics.series import IN_BUCKET, Series, bound, field
from gencoach.runtime.logs import get_logger

log = get_logger("metrics")


class MetricsRecorder:
    """One process's counts not yet in Redis. Without a client, counts stay in memory.

    Counting costs a dict update. A process that dies loses what it counted since its last
    flush: the controller and each worker flush every second, a forked work-horse when its
    job ends.
    """

    def __init__(self, client: redis.asyncio.Redis | None = None, key: str = "") -> None:
        self.client = client
        self.key = key
        self._pending: defaultdict[Series, float] = defaultdict(float)

    def inc(self, counter: Counter, *labels: str, by: float = 1) -> None:
        """Add `by` to the counter's series for these label values."""
        _check(counter.name, counter.labels, labels)
        self._pending[counter.name, labels] += by

    def observe(self, histogram: Histogram, seconds: float, *labels: str) -> None:
        """Count one observation into the histogram's series for these label values: the
        one bucket it falls in (`_in`, made cumulative when exposed), the sum and count."""
        _check(histogram.name, histogram.labels, labels)
        pending = self._pending
        upper = next((bound(b) for b in histogram.buckets if seconds <= b), "+Inf")
        pending[f"{histogram.name}{IN_BUCKET}", (*labels, upper)] += 1
        pending[f"{histogram.name}_sum", labels] += seconds
        pending[f"{histogram.name}_count", labels] += 1

    def pending(self) -> dict[Series, float]:
        """What was counted since the last flush."""
        return dict(self._pending)

    async def flush(self, client: redis.asyncio.Redis | None = None) -> None:
        """Add the counts to Redis (through `client`, else the recorder's own); on failure
        keep them for the next flush (and log). HINCRBYFLOAT is atomic per field, so every
        process adds to the same totals."""
        client = client or self.client
        if client is None or not self._pending:
            return
        taken, self._pending = self._pending, defaultdict(float)
        pipe = client.pipeline(transaction=True)
        for (name, labels), value in taken.items():
            pipe.hincrbyfloat(self.key, field(name, labels), value)
        try:
            await pipe.execute()
        except redis.exceptions.RedisError as error:
            for series, value in taken.items():
                self._pending[series] += value
            log.warning("metrics.unflushed", series=len(taken), error=str(error))


def _check(name: str, expected: tuple[str, ...], given: tuple[str, ...]) -> None:
    if len(given) != len(expected):
        raise ValueError(f"{name} takes labels {expected}, got {given}")
