"""The remaining routes end to end (no_action, exceeded, text rewrite, a person's
decision) to proven and unproven, with the funnel adding up over them, and a worker
killed in the middle of a job: its request is retried, never lost."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from gencoach.funnel import funnel_row
from gencoach.reporting.client import Reporter
from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import (
    branch_orders,
    coaching_settings,
    report_known,
    requests_of,
    settled,
    two_step_run,
)
from tests.support.controller import ControllerProcess, wait_for
from tests.support.funnel import assert_funnel_adds_up, metrics_funnel
from tests.support.graphs import RUN_STARTED
from tests.support.llm_server import ScriptedLLMServer, delayed, json_reply
from tests.support.metrics import scrape
from tests.support.processes import kill_tree

pytestmark = pytest.mark.slow

SUCCESS = {"event": "success", "state": "optimal"}


def _branches_executed(controller: ControllerProcess, run_id: str) -> Callable[[], bool]:
    """A condition: every request of the run has its branch executed (or proven)."""
    return lambda: all(
        request["state"] in ("executed", "proven")
        for request in requests_of(controller, run_id).values()
    )


@pytest.mark.timeout(240)
def test_no_action_exceeded_text_rewrite_and_human_routes_to_their_outcomes(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """no_action and exceeded ends are diagnosed and repaired as failure coaching with
    their own types; a failed text-only stage is rewritten by the LLM and reinjected as
    replace_say; a person's decision is reinjected too; once the generator executes the
    branches, each request ends proven or unproven, and the funnel adds up and is the same
    in `gencoach status`, the console and `/metrics` at both points."""
    diagnosis = json_reply({"decision_index": 2, "reason": "r", "expected_decision": None})
    llm.script(diagnosis, diagnosis)
    controller = controller_factory(settings=coaching_settings(llm))
    controller.start()
    controller.start_workers()
    with Reporter("routes", redis_url=redis_url) as reporter:
        reporter.emit("run.started", **{**RUN_STARTED, "agent_url": scripted_agent.url})
        two_step_run(
            reporter, "idle", {"id": 0, "goal": "act"}, {"event": "no_action", "state": "exceeded"}
        )
        two_step_run(
            reporter, "long", {"id": 1, "goal": "act"}, {"event": "exceeded", "state": "exceeded"}
        )
    found = wait_for(settled(controller, "routes", 2), timeout_s=60, what="two requests")
    assert {route: r["type_coaching"] for route, r in found.items()} == {
        "no_action": "no_action:diagnosis",
        "exceeded": "exceeded:diagnosis",
    }
    assert {r["state"] for r in found.values()} == {"reinjected"}
    kinds = sorted(
        request["additional_info"]["type_coaching"] for request in scripted_agent.coaching_requests
    )
    assert kinds == ["exceeded:diagnosis", "no_action:diagnosis"]
    assert all(request["kind"] == "failure" for request in scripted_agent.coaching_requests)

    llm.script(json_reply({"say": "the answer is 42"}))
    with Reporter("text", redis_url=redis_url) as reporter:
        reporter.emit("run.started", **{**RUN_STARTED, "agent_url": scripted_agent.url})
        two_step_run(reporter, "text", {"id": 0, "goal": "answer", "text_only": True},
                      {"event": "failure", "state": "exceeded"})  # fmt: skip
    (rewrite,) = wait_for(settled(controller, "text", 1), timeout_s=60, what="the rewrite").values()
    assert (rewrite["route"], rewrite["state"]) == ("text_rewrite", "reinjected")
    prompt = json.dumps(llm.requests[-1].body["messages"])
    assert "I am done" in prompt
    # The scripted agent does not announce `decision_source` (as a toolkit of an earlier
    # version would not): the payload gencoach wrote reaches it without the field, while
    # the request records where the words came from.
    reinjected = scripted_agent.response_requests[-1]["inputs"][0]["extra_keys"]["coaching"]
    assert reinjected == {"kind": "replace_say", "text": "the answer is 42"}
    assert rewrite["decision_source"] == "rewrite"

    # A person's decision on the same run, then the funnel: with the operator test's runs
    # (format, failure, no_action, suboptimal) every row has been seen on a real run.
    body = {
        "candidate_id": "text-c0",
        "diagnosis": {"explanation": "say the answer", "expected_decision": "say 42"},
        "decision": {"say": "42", "tool_calls": []},
    }
    accepted = httpx.post(f"{controller.url}/v1/runs/text/interventions", json=body, timeout=10)
    assert accepted.status_code == 202, accepted.text
    human = wait_for(
        lambda: (
            (r := requests_of(controller, "text").get("failure"))
            and r["state"] == "reinjected"
            and r
        ),
        timeout_s=30,
        what="the person's decision reinjected",
    )
    assert human["human"]
    assert human["decision_source"] == "human"
    sent = scripted_agent.response_requests[-1]["inputs"][0]["extra_keys"]["coaching"]
    assert sent == {"kind": "replace_decision", "decision": body["decision"]}
    rows = ("no_action", "exceeded", "text_rewrite", "human")
    samples = wait_for(
        lambda: (
            (found := scrape(controller.url))
            and all(metrics_funnel(found)[row]["reinjected"] == 1 for row in rows)
            and found
        ),
        timeout_s=30,
        what="the four reinjections in /metrics (flushed every few seconds)",
    )
    funnel = assert_funnel_adds_up(controller.url, samples)
    assert all(funnel[row]["admitted"] == funnel[row]["open"] == 1 for row in rows), funnel

    # The generator executes the four branches it is ordered to: the exceeded and the text
    # rewrite ones end their stages in success (proven); the no_action one and the
    # person's go on without an end, so they end unproven when their runs finish (once
    # the controller has seen them executed).
    proving = {"exceeded", "text_rewrite"}
    for run_id in ("routes", "text"):
        by_attempt = {
            attempt: funnel_row(route, request["human"])
            for route, request in requests_of(controller, run_id).items()
            for attempt in request["attempt_ids"]
        }
        with Reporter(run_id, redis_url=redis_url, start_seq=500) as generator:
            for order in branch_orders(generator, 2):
                if by_attempt[order.attempt_id] in proving:
                    generator.emit("candidate.executed", candidate_id=order.candidate_id,
                                   status="optimal", stage_end=SUCCESS)  # fmt: skip
                else:
                    generator.emit(
                        "candidate.executed", candidate_id=order.candidate_id, status="ongoing"
                    )
            generator.flush()
            wait_for(_branches_executed(controller, run_id), timeout_s=60,
                     what=f"the branches of {run_id} executed")  # fmt: skip
            generator.emit("run.finished")
    outcomes = {"exceeded": "proven", "text_rewrite": "proven", "no_action": "unproven",
                "human": "unproven"}  # fmt: skip
    samples = wait_for(
        lambda: (
            (found := scrape(controller.url))
            and all(metrics_funnel(found)[row][end] == 1 for row, end in outcomes.items())
            and found
        ),
        timeout_s=60,
        what="the four outcomes in /metrics",
    )
    funnel = assert_funnel_adds_up(controller.url, samples)
    for row, end in outcomes.items():
        counts = funnel[row]
        assert (counts["executed"], counts[end], counts["open"]) == (1, 1, 0), (row, funnel)
    assert funnel["failure"]["seen"] == 0, funnel  # the executed branches opened nothing new


@pytest.mark.timeout(150)
def test_worker_killed_mid_job_is_retried(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """Every worker process killed with SIGKILL during a slow diagnosis: the slot comes
    back when its lease lapses, and the request is retried on new workers and reinjected."""
    answer = json_reply({"decision_index": 2, "reason": "r", "expected_decision": None})
    llm.script(delayed(30.0, answer), answer)
    settings = coaching_settings(llm, format=False, suboptimal=False)
    settings["coaching"]["lease_s"] = 2
    controller = controller_factory(settings=settings)
    controller.start()
    workers = controller.start_workers()
    report_known(redis_url, "killed", scripted_agent.url)
    wait_for(lambda: llm.requests, timeout_s=40, what="the slow diagnosis to reach the LLM")
    kill_tree(workers.pid)
    workers.wait(10)
    controller.start_workers()
    request = wait_for(
        lambda: (
            (r := requests_of(controller, "killed").get("failure"))
            and r["state"] == "reinjected"
            and r
        ),
        timeout_s=60,
        what="the request retried on new workers and reinjected",
    )
    assert (request["attempt"], request["max_attempts"]) == (2, 3)
    retries = [step for step in request["history"] if (step["reason"] or "").startswith("retry:")]
    assert retries[0]["reason"] == "retry: the diagnosing worker's lease lapsed"


@pytest.mark.timeout(150)
def test_a_request_out_of_attempts_is_abandoned_and_gives_its_slot_back(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """With `coaching.max_attempts: 1`, the request whose only worker was killed is not
    tried again: it ends abandoned with the reason, and its stage's slot is free."""
    answer = json_reply({"decision_index": 2, "reason": "r", "expected_decision": None})
    llm.script(delayed(30.0, answer), answer)
    settings = coaching_settings(llm, format=False, suboptimal=False)
    settings["coaching"].update(lease_s=2, max_attempts=1)
    controller = controller_factory(settings=settings)
    controller.start()
    workers = controller.start_workers()
    report_known(redis_url, "once", scripted_agent.url)
    wait_for(lambda: llm.requests, timeout_s=40, what="the slow diagnosis to reach the LLM")
    kill_tree(workers.pid)
    workers.wait(10)
    request = wait_for(
        lambda: (
            (r := requests_of(controller, "once").get("failure"))
            and r["state"] == "abandoned"
            and r
        ),
        timeout_s=60,
        what="the request abandoned once its only attempt's worker died",
    )
    assert (request["attempt"], request["max_attempts"]) == (1, 1)
    assert request["reason"] == "the diagnosing worker's lease lapsed; gave up after 1 attempt"
    stages = httpx.get(f"{controller.url}/v1/runs/once/stages").json()["stages"]
    assert [s["pending"] for s in stages] == [0], stages
    assert len(llm.requests) == 1  # nothing asked the LLM again
