"""What every benchmark needs: a Redis to measure against, and percentiles."""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import redis

from gencoach.embedded_redis import EmbeddedRedis

DEFAULT_URL = "redis://127.0.0.1:6379/14"


@contextmanager
def bench_redis(url: str | None, default: str = DEFAULT_URL) -> Iterator[str]:
    """`url`, else the local server's `default` database when it answers, else an embedded one."""
    candidate = url or default
    try:
        redis.Redis.from_url(candidate, socket_connect_timeout=0.5).ping()
    except redis.RedisError:
        if url:
            raise
        with (
            tempfile.TemporaryDirectory() as folder,
            EmbeddedRedis(Path(folder), persist=False) as server,
        ):
            assert server.url is not None
            yield server.url
            return
    yield candidate


def percentile(values: Sequence[float], fraction: float) -> float:
    """The value below which `fraction` of the values fall (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def p50(values: Sequence[float]) -> float:
    """The median."""
    return statistics.median(values)
