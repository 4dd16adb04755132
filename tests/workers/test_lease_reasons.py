"""A job abandoned because its run ended says so, rather than blaming a reclaimed slot."""

from __future__ import annotations

import redis

from gencoach.constants import Keys
from gencoach.workers.context import WorkerContext
from gencoach.workers.jobs import run_diagnosis
from tests.support.llm_server import ScriptedLLMServer
from tests.workers.builders import RUN, diagnosis_job, results


def test_a_job_started_after_its_run_finished_says_so(
    context: WorkerContext, llm_server: ScriptedLLMServer, redis_client: redis.Redis
) -> None:
    """The run finished (its slot released) before a worker took the job: that is the reason."""
    redis_client.hset(Keys().run(RUN, "meta"), "state", "finished")
    run_diagnosis(diagnosis_job().model_dump_json())
    (result,) = results(redis_client)
    assert result.status == "abandoned"
    assert result.reason == "the job started after its run finished"
    assert llm_server.requests == []
