"""Coach quality end to end: MAGMA-GEN's diagnosis format reaches a branch order, a
fallback-made correction is labelled as such in the save, the export and the console,
and diagnoses are measured against the generator's truth."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from gencoach.demo.quality import quality_of, table_rows
from gencoach.export import ExportSettings, run_export
from gencoach.reporting.client import Reporter
from tests.support.agent_server import ScriptedAgent, correction
from tests.support.coaching import (
    branch_orders,
    coaching_settings,
    complete_save,
    request_in_state,
    request_reached,
    requests_of,
    succeed_after,
)
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import FAILURE, known_run_events
from tests.support.llm_server import ScriptedLLMServer, json_reply

pytestmark = pytest.mark.slow

# MAGMA-GEN's own diagnosis answer: the expected decision is text, not a decision object.
MAGMA_ANSWER = {
    "decision_index": 2,
    "reason": "pressed the wrong button",
    "expected_decision": "press_button(id='sw4') with panda",
}


def _report(redis_url: str, run_id: str, agent_url: str, faulty: str | None) -> None:
    """The known run (not finished), its failing c4 naming `faulty` as the truth."""
    with Reporter(run_id, redis_url=redis_url) as reporter:
        for kind, fields in known_run_events()[:-1]:
            if kind == "run.started":
                fields = {**fields, "agent_url": agent_url}
            if kind == "candidate.executed" and fields["candidate_id"] == "c4" and faulty:
                fields = {**fields, "stage_end": {**FAILURE, "faulty_candidate_id": faulty}}
            reporter.emit(kind, **fields)


def _with_source(source: str) -> Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]:
    def answer(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        reply = correction(request)
        for proposal in reply["proposals"]:
            proposal["extra_keys"]["decision_source"] = source
        return 200, reply

    return answer


def _prove(redis_url: str, run_id: str, controller: ControllerProcess) -> None:
    """Execute the run's one branch order to stage success, then finish the run."""
    with Reporter(run_id, redis_url=redis_url, start_seq=500) as generator:
        (order,) = branch_orders(generator, 1)
        succeed_after(generator, order)
        wait_for(request_in_state(controller, run_id, "failure", "proven"), what="the proof")
        generator.emit("run.finished")


def test_a_magma_format_diagnosis_ends_in_a_branch_order_and_a_fallback_stays_labelled(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """MAGMA-GEN's answer (expected decision as text) is accepted once and its text reaches
    the agent verbatim; the agent's fallback-made correction becomes a branch order, and
    the save, the export lineage and the console call it a fallback; `exclude_fallbacks`
    leaves it, and what follows it, out of the export."""
    llm.script(json_reply(MAGMA_ANSWER))
    scripted_agent.coaching_replies.append(_with_source("fallback"))
    settings = coaching_settings(llm, format=False, suboptimal=False)
    controller = controller_factory(settings=settings)
    controller.start()
    controller.start_workers()
    _report(redis_url, "magma", scripted_agent.url, faulty="c4")
    wait_for(
        request_reached(controller, "magma", "failure", "reinjected"),
        timeout_s=60,
        what="reinjection",
    )
    assert len(llm.requests) == 1, "the MAGMA-format answer is accepted the first time"
    (sent,) = scripted_agent.coaching_requests
    assert sent["diagnosis"]["expected_decision"] == "press_button(id='sw4') with panda"
    _prove(redis_url, "magma", controller)

    request = requests_of(controller, "magma")["failure"]
    assert (request["decision_source"], request["blame"]) == ("fallback", "right")
    funnel = httpx.get(f"{controller.url}/console/api/funnel?run=magma").json()
    failure = next(row for row in funnel["routes"] if row["route"] == "failure")
    assert failure["proven_by_source"] == {"fallback": 1}

    folder = controller.output_dir / "magma"
    save = complete_save(controller, "magma")
    coached = next(c for c in save.candidates.values() if c.coaching_source.get("request_id"))
    assert coached.coaching_source["decision_source"] == "fallback"
    graph = httpx.get(f"{controller.url}/console/api/graph?run=magma").json()
    rows = [c for s in graph["situations"] for c in s["candidates"] if c["id"] == coached.id]
    assert [row["decision_source"] for row in rows] == ["fallback"]

    run_export(ExportSettings(source=folder, format="full-history", validation_ratio=0))
    exported = _rows(folder / "datasets" / "full-history")
    sources = {
        row["metadata"]["candidate_id"]: row["metadata"]["decision_source"] for row in exported
    }
    assert sources[coached.id] == "fallback"
    out = folder / "datasets" / "without-fallbacks"
    options: dict[str, Any] = {"exclude_fallbacks": True}
    run_export(
        ExportSettings(
            source=folder, format="full-history", options=options, out=out, validation_ratio=0
        )
    )
    kept = {row["metadata"]["candidate_id"] for row in _rows(out)}
    below = {c.id for c in save.candidates.values() if c.parent_id == coached.id}
    assert coached.id not in kept
    assert not kept & below
    assert kept == set(sources) - {coached.id} - below


def _rows(folder: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.json")):
        if path.name.startswith("hr_"):
            rows.extend(json.loads(path.read_text()))
    return rows


def test_diagnoses_are_measured_against_the_truth_the_generator_reports(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """Three runs blame decision 2 (c4): the truth says c4 in one (right), c1 in another
    (wrong), nothing in the third (not judged); the table counts exactly that, with one
    proven request, its tokens, and its correction made by the diagnosis's decision."""
    llm.script(*(json_reply(MAGMA_ANSWER) for _ in range(3)))
    scripted_agent.coaching_replies.extend(_with_source("expected_decision") for _ in range(3))
    controller = controller_factory(settings=coaching_settings(llm, format=False, suboptimal=False))
    controller.start()
    controller.start_workers()
    for run_id, faulty in (("right", "c4"), ("wrong", "c1"), ("unknown", None)):
        _report(redis_url, run_id, scripted_agent.url, faulty)
        wait_for(
            request_reached(controller, run_id, "failure", "reinjected"), timeout_s=60, what=run_id
        )
    _prove(redis_url, "right", controller)

    requests = {
        run: requests_of(controller, run)["failure"] for run in ("right", "wrong", "unknown")
    }
    assert {run: r["blame"] for run, r in requests.items()} == {
        "right": "right",
        "wrong": "wrong",
        "unknown": None,
    }
    assert requests["wrong"]["faulty_candidate_id"] == "c1"
    assert requests["right"]["tokens"] == 15  # the scripted server's 10 + 5 per answer
    failure, total = table_rows(quality_of(requests.values()))
    assert total[1:] == failure[1:]
    assert failure == (
        "failure",
        "2",  # judged: the runs whose truth is known
        "0",  # none by the single-step rule: two decisions were diagnosable
        "1/2",
        "1/2",
        "0/2",
        "0/2",
        "3",  # admitted
        "1 (33%)",
        "3",  # corrected by a model: the diagnosis's expected decision
        "0",
        "0",
        "expected_decision 1",  # proven by source
        failure[13],  # seconds: measured
        "45",  # 3 x 15 tokens of gencoach's backend over one proven correction
    )
