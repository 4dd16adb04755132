"""A job abandoned because its run ended says so, rather than blaming a reclaimed slot."""

from __future__ import annotations

import redis

from gencoach.constants import Keys
from gencoach.protocol.jobs import LeaseRef
from gencoach.workers.context import WorkerContext
from gencoach.workers.job_functions import run_diagnosis
from gencoach.workers.lease import LeaseHold
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


def test_a_lease_that_lapsed_is_not_blamed_on_the_controller() -> None:
    """A renewal that came too late says so, naming the lease, rather than a reclaimed slot."""
    hold = LeaseHold(
        LeaseRef(run_id=RUN, stage_id=0, request_id="req-1", lease_s=30),
        "diagnosis",
        1,
        lost_by="expired",
    )
    assert hold.reason == (
        "lease of request req-1 lapsed before this worker renewed it (lease_s 30): "
        "the worker or its Redis was held up that long"
    )
