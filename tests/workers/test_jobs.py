"""RQ job functions: each publishes exactly one JobResult, whatever the backend or agent does."""

from __future__ import annotations

import json
from typing import Any

import redis
import structlog
from structlog.testing import capture_logs

from gencoach.workers.context import WorkerContext
from gencoach.workers.job_functions import run_diagnosis, run_repair, run_rewrite
from tests.support.agent_server import ScriptedAgent
from tests.support.backends import events
from tests.support.llm_server import ScriptedLLMServer, error, json_reply, reply
from tests.workers.builders import (
    FAILURE_ANSWER,
    admit,
    diagnosis_job,
    repair_job,
    results,
    rewrite_job,
)


def test_a_diagnosis_job_publishes_its_diagnosis_once(
    context: WorkerContext, llm_server: ScriptedLLMServer, redis_client: redis.Redis
) -> None:
    """A multi-step failure is diagnosed by the LLM and published once with logs and usage."""
    job = diagnosis_job()
    admit(context.redis_url, job.lease)
    llm_server.script(json_reply(FAILURE_ANSWER, usage=(120, 30)))
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        run_diagnosis(job.model_dump_json())
    (result,) = results(redis_client)
    assert (result.status, result.job, result.request_id, result.run_id) == (
        "done",
        "diagnosis",
        "req-1",
        "run-7",
    )
    assert result.diagnosis is not None
    assert (result.diagnosis.step_id, result.diagnosis.expected_decision) == (13, 'say("sw4")')
    assert [log.coaching_type for log in result.logs] == ["diagnosis"]
    assert (result.usage.prompt_tokens, result.usage.total_tokens) == (120, 150)
    (started,) = events(logs, "job.started")
    (finished,) = events(logs, "job.finished")
    assert (started["run_id"], started["request_id"]) == ("run-7", "req-1")
    assert (finished["status"], finished["request_id"]) == ("done", "req-1")


def test_twice_malformed_answers_abandon_with_both_in_the_logs(
    context: WorkerContext, llm_server: ScriptedLLMServer, redis_client: redis.Redis
) -> None:
    """Two unparsable answers give one `abandoned` result whose logs hold both raw answers."""
    job = diagnosis_job()
    admit(context.redis_url, job.lease)
    llm_server.script(reply("decision two, I think"), reply('{"decision_index": "two"'))
    run_diagnosis(job.model_dump_json())
    (result,) = results(redis_client)
    assert result.status == "abandoned"
    assert result.reason is not None
    assert "refused as FailureDiagnosisAnswer twice" in result.reason
    first, second = (log.content for log in result.logs)
    assert "decision two, I think" in first
    assert '{"decision_index": "two"' in second
    assert result.usage.total_tokens == 30


def test_an_unavailable_backend_is_an_error_result(
    context: WorkerContext, llm_server: ScriptedLLMServer, redis_client: redis.Redis
) -> None:
    """A backend answering 503 (no retries configured) ends in one `error` result naming it."""
    job = diagnosis_job()
    admit(context.redis_url, job.lease)
    llm_server.script(error(503, "overloaded"))
    run_diagnosis(job.model_dump_json())
    (result,) = results(redis_client)
    assert result.status == "error"
    assert result.reason is not None
    assert "backend 'coach': unavailable" in result.reason


def test_an_unknown_backend_is_an_error_result(
    context: WorkerContext, redis_client: redis.Redis
) -> None:
    """A job naming a backend this worker does not configure fails with the configured names."""
    job = diagnosis_job(backend="elsewhere")
    admit(context.redis_url, job.lease)
    run_diagnosis(job.model_dump_json())
    (result,) = results(redis_client)
    assert (result.status, result.reason) == (
        "error",
        "backend 'elsewhere' is not configured on this worker (it has ['coach'])",
    )


def test_a_payload_that_does_not_validate_publishes_one_error(
    context: WorkerContext, redis_client: redis.Redis
) -> None:
    """An invalid payload gives one `error` result with the ids it named and the violations."""
    payload = json.loads(diagnosis_job().model_dump_json())
    payload["route"] = "bored"
    payload["attempt"] = 3
    run_diagnosis(json.dumps(payload))
    run_rewrite("not json at all")
    refused, garbage = results(redis_client)
    assert (refused.status, refused.request_id, refused.run_id, refused.attempt) == (
        "error",
        "req-1",
        "run-7",
        3,
    )
    assert refused.reason is not None
    assert refused.reason.startswith("payload refused: invalid DiagnosisJob: route:")
    assert (garbage.job, garbage.request_id, garbage.run_id) == ("rewrite", "unknown", "unknown")
    assert garbage.reason is not None
    assert "invalid JSON" in garbage.reason


def test_a_rewrite_job_publishes_the_corrected_words(
    context: WorkerContext, llm_server: ScriptedLLMServer, redis_client: redis.Redis
) -> None:
    """A text rewrite asks for {"say"} and publishes the text, with a text_rewrite log."""
    job = rewrite_job()
    admit(context.redis_url, job.lease)
    llm_server.script(json_reply({"say": "Press sw4 on the left wall."}))
    run_rewrite(job.model_dump_json())
    (result,) = results(redis_client)
    assert (result.status, result.job, result.rewrite) == (
        "done",
        "rewrite",
        "Press sw4 on the left wall.",
    )
    assert [log.coaching_type for log in result.logs] == ["text_rewrite"]
    assert (
        "REJECTED ANSWER\nPress any button."
        in llm_server.requests[0].body["messages"][1]["content"]
    )


def test_a_repair_job_posts_the_coaching_request_and_publishes_the_answer(
    context: WorkerContext, scripted_agent: ScriptedAgent, redis_client: redis.Redis
) -> None:
    """The agent receives exactly the job's coaching body; its correction and logs come back."""
    job = repair_job(scripted_agent.url)
    admit(context.redis_url, job.lease)
    run_repair(job.model_dump_json())
    assert scripted_agent.coaching_requests == [job.coaching.model_dump(mode="json")]
    (result,) = results(redis_client)
    assert (result.status, result.job) == ("done", "repair")
    assert result.coaching is not None
    assert result.coaching.status == "corrected"
    (proposal,) = result.coaching.proposals
    assert proposal.reinjection_point_id == "replacement"
    assert proposal.extra_keys == {
        "kind": "replace_decision",
        "decision": {
            "say": "corrected: press sw4",
            "tool_calls": [
                {"name": "press_button", "arguments": {"id": "sw0"}, "target_robot_name": "panda"}
            ],
        },
    }
    assert [(log.coaching_type, log.content) for log in result.logs] == [
        ("repair", "repaired failure")
    ]


def test_an_agent_proposing_an_unknown_point_is_an_error_naming_it(
    context: WorkerContext, scripted_agent: ScriptedAgent, redis_client: redis.Redis
) -> None:
    """A correction at a reinjection point the request never offered is refused by name."""

    def elsewhere(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        proposal = {"reinjection_point_id": "teleport", "extra_keys": {}}
        return 200, {
            "request_id": body["request_id"],
            "status": "corrected",
            "proposals": [proposal],
        }

    scripted_agent.coaching_replies.append(elsewhere)
    job = repair_job(scripted_agent.url)
    admit(context.redis_url, job.lease)
    run_repair(job.model_dump_json())
    (result,) = results(redis_client)
    assert result.status == "error"
    assert result.reason is not None
    assert "unknown reinjection point 'teleport'" in result.reason


def test_an_agent_abandoning_gives_an_abandoned_result_with_its_reason(
    context: WorkerContext, scripted_agent: ScriptedAgent, redis_client: redis.Redis
) -> None:
    """An agent answering `abandoned` is relayed as such, with its reason and answer."""
    answer = {"request_id": "req-1", "status": "abandoned", "reason": "no idea how to fix it"}
    scripted_agent.coaching_replies.append(lambda body: (200, answer))
    job = repair_job(scripted_agent.url)
    admit(context.redis_url, job.lease)
    run_repair(job.model_dump_json())
    (result,) = results(redis_client)
    assert (result.status, result.reason) == ("abandoned", "no idea how to fix it")
    assert result.coaching is not None
    assert result.coaching.status == "abandoned"


def test_a_repair_for_an_agent_not_allowed_is_refused(
    context: WorkerContext, redis_client: redis.Redis
) -> None:
    """A payload naming an agent outside the `agents` prefixes is not called: error result."""
    job = repair_job("http://203.0.113.9:8751")
    admit(context.redis_url, job.lease)
    run_repair(job.model_dump_json())
    (result,) = results(redis_client)
    assert result.status == "error"
    assert result.reason == (
        "agent http://203.0.113.9:8751 is not under the allowed prefixes (setting `agents`)"
    )
