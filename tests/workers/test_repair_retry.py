"""A repair job asks an agent that could not answer again (`AGENT_RETRY`), as a reinjection
does: one dropped or overloaded call does not cost the correction."""

from __future__ import annotations

from typing import Any

import redis

from gencoach.workers.context import WorkerContext
from gencoach.workers.job_functions import run_repair
from tests.support.agent_server import ScriptedAgent
from tests.workers.builders import admit, repair_job, results


def _overloaded(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return 503, {"detail": "busy, try again"}


def test_an_overloaded_agent_is_asked_again_and_its_correction_kept(
    context: WorkerContext, scripted_agent: ScriptedAgent, redis_client: redis.Redis
) -> None:
    """The agent answers 503 once, then corrects: the job's result is that correction."""
    scripted_agent.coaching_replies.append(_overloaded)
    job = repair_job(scripted_agent.url)
    admit(context.redis_url, job.lease)
    run_repair(job.model_dump_json())
    (result,) = results(redis_client)
    assert (result.status, result.job) == ("done", "repair")
    assert len(scripted_agent.coaching_requests) == 2


def test_an_agent_overloaded_three_times_is_an_error_naming_its_answer(
    context: WorkerContext, scripted_agent: ScriptedAgent, redis_client: redis.Redis
) -> None:
    """Three tries, then the job answers `error` with the agent's own words."""
    scripted_agent.coaching_replies.extend([_overloaded] * 3)
    job = repair_job(scripted_agent.url)
    admit(context.redis_url, job.lease)
    run_repair(job.model_dump_json())
    (result,) = results(redis_client)
    assert result.status == "error"
    assert result.reason is not None
    assert "/v1/coaching answered 503: busy, try again" in result.reason
    assert len(scripted_agent.coaching_requests) == 3


def test_a_wrong_answer_is_not_asked_again(
    context: WorkerContext, scripted_agent: ScriptedAgent, redis_client: redis.Redis
) -> None:
    """A 4xx is the agent's answer, not an outage: one call, then `error`."""
    scripted_agent.coaching_replies.append(lambda body: (422, {"detail": "no such request"}))
    job = repair_job(scripted_agent.url)
    admit(context.redis_url, job.lease)
    run_repair(job.model_dump_json())
    (result,) = results(redis_client)
    assert result.status == "error"
    assert len(scripted_agent.coaching_requests) == 1
