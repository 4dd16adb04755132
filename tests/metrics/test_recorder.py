"""The recorder against a real Redis: counts from several processes add up, a failed flush
keeps its counts, histograms are cumulative, and the text parses as Prometheus."""

from __future__ import annotations

import pytest
import redis
import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from gencoach.metrics import MetricsRecorder
from gencoach.metrics.catalog import EVENTS, JOB_SECONDS, LLM_CALLS
from gencoach.metrics.exposition import Gauge, render, stored
from gencoach.metrics.series import field
from tests.support.metrics import parse
from tests.support.processes import free_port

pytestmark = [pytest.mark.redis]

KEY = "test:metrics"


@pytest.mark.asyncio
async def test_two_recorders_add_to_the_same_totals(
    redis_url: str, redis_client: redis.Redis
) -> None:
    client = redis.asyncio.Redis.from_url(redis_url)
    first, second = MetricsRecorder(client, KEY), MetricsRecorder(client, KEY)
    first.inc(EVENTS, "run.started", "applied")
    second.inc(EVENTS, "run.started", "applied", by=2)
    second.inc(LLM_CALLS, "teacher", "ok")
    await first.flush()
    await second.flush()
    await first.flush()  # nothing new: adds nothing
    samples = parse(render(await stored(client, KEY)).decode())
    await client.aclose()
    assert samples.value("gencoach_events_total", type="run.started", outcome="applied") == 3
    assert samples.value("gencoach_llm_calls_total", backend="teacher", outcome="ok") == 1
    assert first.pending() == {}


@pytest.mark.asyncio
async def test_a_flush_that_fails_keeps_its_counts_for_the_next(
    redis_url: str, redis_client: redis.Redis
) -> None:
    no_retries = Retry(NoBackoff(), 0)
    nowhere = redis.asyncio.Redis(port=free_port(), socket_connect_timeout=1, retry=no_retries)
    recorder = MetricsRecorder(nowhere, KEY)
    recorder.inc(EVENTS, "run.started", "applied")
    await recorder.flush()  # logged, not raised
    recorder.inc(EVENTS, "run.started", "applied")
    assert recorder.pending() == {("gencoach_events_total", ("run.started", "applied")): 2.0}
    client = redis.asyncio.Redis.from_url(redis_url)
    recorder.client = client
    await recorder.flush()
    assert await stored(client, KEY) == {("gencoach_events_total", ("run.started", "applied")): 2.0}
    await client.aclose()
    await nowhere.aclose()


@pytest.mark.asyncio
async def test_histograms_are_cumulative_with_every_bucket() -> None:
    recorder = MetricsRecorder()
    for seconds in (0.01, 0.3, 7.0, 1000.0):
        recorder.observe(JOB_SECONDS, seconds, "repair")
    samples = parse(render(recorder.pending()).decode())
    bucket = "gencoach_job_duration_seconds_bucket"
    assert samples.value(bucket, kind="repair", le="0.05") == 1
    assert samples.value(bucket, kind="repair", le="0.5") == 2
    assert samples.value(bucket, kind="repair", le="10.0") == 3
    assert samples.value(bucket, kind="repair", le="300.0") == 3
    assert samples.value(bucket, kind="repair", le="+Inf") == 4
    assert len(samples.by(bucket, "le", kind="repair")) == len(JOB_SECONDS.buckets) + 1
    assert samples.value("gencoach_job_duration_seconds_count", kind="repair") == 4
    assert samples.value("gencoach_job_duration_seconds_sum", kind="repair") == 1007.31


def test_a_wrong_number_of_labels_is_refused_at_once() -> None:
    with pytest.raises(
        ValueError, match=r"gencoach_events_total takes labels \('type', 'outcome'\)"
    ):
        MetricsRecorder().inc(EVENTS, "run.started")


@pytest.mark.asyncio
async def test_fields_this_version_does_not_write_are_ignored(
    redis_url: str, redis_client: redis.Redis
) -> None:
    redis_client.hset(KEY, mapping={"not json": 1, '{"a": 1}': 2, field("x_total", ()): 3})
    client = redis.asyncio.Redis.from_url(redis_url)
    found = await stored(client, KEY)
    await client.aclose()
    assert found == {("x_total", ()): 3.0}
    text = render(found, [Gauge("gencoach_runs", "Runs.", ("state",), {("active",): 2})])
    assert parse(text.decode()).value("gencoach_runs", state="active") == 2
    assert b"x_total" not in text  # not in the catalog: not exposed


@pytest.mark.asyncio
async def test_an_observation_stores_three_fields() -> None:
    """Each observation adds to its own bucket, the sum and the count (not to every bucket
    above it); exposed, the buckets are cumulative."""
    recorder = MetricsRecorder()
    recorder.observe(JOB_SECONDS, 0.3, "repair")
    assert len(recorder.pending()) == 3
    samples = parse(render(recorder.pending()).decode())
    bucket = "gencoach_job_duration_seconds_bucket"
    assert samples.value(bucket, kind="repair", le="0.25") == 0
    assert samples.value(bucket, kind="repair", le="0.5") == 1
    assert samples.value(bucket, kind="repair", le="+Inf") == 1
