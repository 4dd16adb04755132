"""Foreign text is bounded where it enters a worker: a backend's megabytes of answer, an
agent's logs and reasons cost the configured bytes on the results stream, not megabytes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from gencoach.config.settings import Settings
from gencoach.constants import RESULT_FIELD, Keys
from gencoach.workers.clipping import clip
from gencoach.workers.context import WorkerContext, worker_context
from gencoach.workers.job_functions import run_diagnosis, run_repair
from tests.support.agent_server import ScriptedAgent
from tests.support.llm_server import ScriptedLLMServer, reply
from tests.support.streams import entries
from tests.workers.builders import admit, diagnosis_job, repair_job, results, settings_data

MEGABYTES = 10 * 1024 * 1024
MAX_ANSWER = 4096
MAX_LOG = 16_384
MAX_REASON = 1024


@pytest.fixture
def bounded(
    llm_server: ScriptedLLMServer, scripted_agent: ScriptedAgent, redis_url: str
) -> Iterator[WorkerContext]:
    """A worker context with small, configured bounds on foreign text."""
    data = settings_data(
        llm_server.endpoint,
        workers={"max_log_bytes": MAX_LOG, "max_logs_per_job": 3, "max_reason_bytes": MAX_REASON},
    )
    data["backends"]["coach"]["max_answer_bytes"] = MAX_ANSWER
    settings = Settings.model_validate(data)
    with worker_context(settings, redis_url) as installed:
        yield installed


def _stream_bytes(client: redis.Redis) -> int:
    return sum(len(fields[RESULT_FIELD.encode()]) for _, fields in entries(client, Keys().results))


def test_a_ten_megabyte_answer_is_refused_and_kept_cut(
    bounded: WorkerContext, llm_server: ScriptedLLMServer, redis_client: redis.Redis
) -> None:
    """Two 10 MB answers: the job is abandoned saying why, each log holds the answer's
    first bytes and a note, and the whole result is tens of kilobytes."""
    job = diagnosis_job()
    admit(bounded.redis_url, job.lease)
    garbage = "{" + "x" * MEGABYTES
    llm_server.script(reply(garbage), reply(garbage))
    run_diagnosis(job.model_dump_json())
    (result,) = results(redis_client)
    assert result.status == "abandoned"
    assert result.reason is not None
    assert f"the answer is {len(garbage):,} bytes, above the {MAX_ANSWER:,}" in result.reason
    assert "backends.coach.max_answer_bytes" in result.reason
    assert len(result.logs) == 2
    for log in result.logs:
        assert len(log.content.encode()) <= MAX_LOG
        assert f"[... {len(garbage):,} bytes in all, cut to {MAX_ANSWER:,}]" in log.content
    assert _stream_bytes(redis_client) < 2 * MAX_LOG + 2 * MAX_REASON + 8192


def test_an_agents_huge_logs_and_reason_are_cut_and_counted(
    bounded: WorkerContext, scripted_agent: ScriptedAgent, redis_client: redis.Redis
) -> None:
    """An agent answering ten 1 MB logs and a 1 MB reason: three logs kept (the last says
    how many were not), each cut to its bound, and the reason cut too."""

    def flood(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, {
            "request_id": body["request_id"],
            "status": "abandoned",
            "reason": "r" * 1_000_000,
            "logs": [{"coaching_type": "repair", "content": "l" * 1_000_000}] * 10,
        }

    scripted_agent.coaching_replies.append(flood)
    job = repair_job(scripted_agent.url)
    admit(bounded.redis_url, job.lease)
    run_repair(job.model_dump_json())
    (result,) = results(redis_client)
    assert result.status == "abandoned"
    assert [log.coaching_type for log in result.logs] == ["repair", "repair", "logs_dropped"]
    assert all(len(log.content.encode()) <= MAX_LOG for log in result.logs)
    assert result.logs[-1].content.startswith("8 more coaching log(s) of this job were not kept")
    assert result.reason is not None
    assert len(result.reason.encode()) <= MAX_REASON
    assert result.coaching is not None
    assert result.coaching.reason == result.reason
    assert result.coaching.logs == []
    assert _stream_bytes(redis_client) < 3 * MAX_LOG + 3 * MAX_REASON + 8192


def test_cutting_keeps_whole_characters_and_stays_within_the_bound() -> None:
    """Text of multi-byte characters is cut between characters, note included, within the
    bound; text that fits is kept as it is."""
    text = "é€😀" * 1000
    cut = clip(text, 1000)
    assert len(cut.encode()) <= 1000
    assert cut.endswith(f"[... {len(text.encode()):,} bytes in all, cut to 1,000]")
    assert text.startswith(cut.split("\n[...")[0])
    assert clip("short", 1000) == "short"
