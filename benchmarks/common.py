"""What every benchmark needs: a Redis to measure against, and percentiles."""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import redis

from gencoach.runtime.embedded_redis import EmbeddedRedis
from gencoach.runtime.logs import redact

FLUSHED_URL_HELP = "a Redis of its own (its database is flushed); default: an embedded one"
SHARED_URL_HELP = "a Redis to use (only the benchmark's keys are deleted); default: an embedded one"


@contextmanager
def bench_redis(url: str | None) -> Iterator[str]:
    """The Redis `url` names, when given (it must answer), else an embedded server of the
    benchmark's own in a temporary folder; prints which one is used. Some benchmarks flush
    their database: only an explicit URL reaches a server anyone else may use."""
    if url:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
        print(f"redis: {redact(url)} (given by --redis-url)", flush=True)
        yield url
        return
    with (
        tempfile.TemporaryDirectory() as folder,
        EmbeddedRedis(Path(folder), persist=False) as server,
    ):
        assert server.url is not None
        print(f"redis: embedded, {server.url} (pid {server.pid})", flush=True)
        yield server.url


def percentile(values: Sequence[float], fraction: float) -> float:
    """The value below which `fraction` of the values fall (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def p50(values: Sequence[float]) -> float:
    """The median."""
    return statistics.median(values)
