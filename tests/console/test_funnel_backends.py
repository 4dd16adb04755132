"""The console funnel's backend rows: calls and tokens as the metrics hash counts them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from redis.asyncio import Redis as AsyncRedis

from gencoach.constants import Keys
from gencoach.metrics import MetricsRecorder
from gencoach.metrics.catalog import LLM_CALLS, LLM_TOKENS
from tests.support.controller import ControllerProcess

pytestmark = pytest.mark.slow

BACKENDS = {
    name: {"type": "openai", "endpoint": "http://127.0.0.1:9/v1", "default_model": model}
    for name, model in (("coach", "coach-model"), ("spare", "spare-model"))
}


@pytest.fixture
def controller(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> Iterator[ControllerProcess]:
    """A controller (coaching off) with two backends configured."""
    process = ControllerProcess(tmp_path, redis_url, settings={"backends": BACKENDS})
    process.start()
    yield process
    process.stop()


@pytest.mark.asyncio
async def test_backend_rows_read_the_flushed_metrics(
    controller: ControllerProcess, redis_url: str
) -> None:
    """`calls` counts the completions answered (failed ones are not), `tokens` the prompt and
    completion tokens reported and their sum, as `/metrics` serves them; a backend never
    used shows zeros."""
    client = AsyncRedis.from_url(redis_url)
    recorder = MetricsRecorder(client, Keys().metrics)
    for prompt, completion in ((100, 20), (50, 5)):
        recorder.inc(LLM_CALLS, "coach", "ok")
        recorder.inc(LLM_TOKENS, "coach", "prompt", by=prompt)
        recorder.inc(LLM_TOKENS, "coach", "completion", by=completion)
    recorder.inc(LLM_CALLS, "coach", "unavailable")
    await recorder.flush()
    await client.aclose()
    async with httpx.AsyncClient(base_url=controller.url, timeout=10) as http:
        funnel = (await http.get("/console/api/funnel")).json()
        scraped = (await http.get("/metrics")).text
    rows = {row["name"]: row for row in funnel["backends"]}
    assert list(rows) == ["coach", "spare"]
    coach = rows["coach"]
    assert (coach["type"], coach["model"], coach["calls"]) == ("openai", "coach-model", 2)
    assert coach["tokens"] == {"prompt": 150, "completion": 25, "total": 175}
    assert coach["jobs"] is not None  # coaching's backend, the first configured
    spare = rows["spare"]
    assert (spare["calls"], spare["tokens"], spare["jobs"]) == (
        0, {"prompt": 0, "completion": 0, "total": 0}, None,
    )  # fmt: skip
    assert 'gencoach_llm_calls_total{backend="coach",outcome="ok"} 2.0' in scraped
