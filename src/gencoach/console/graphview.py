"""A run's graph as the console draws it: a compact tree, and one node in full.

The tree carries only what a row shows (decision on one line, status, stage end,
descendant score, coaching marker, attempt ids, links), so a graph of thousands of
situations stays a few megabytes; a node's input, output, execution and coaching
requests are fetched when it is opened.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gencoach.console.runlist import task_text
from gencoach.console.sources import GraphData, OwnedLog
from gencoach.protocol import CandidateRecord, SituationRecord, TaskDescription
from gencoach.protocol.decision_text import format_decision
from gencoach.service.coaching.requests import CoachingRequest
from gencoach.service.web.requestview import request_view

SNIPPET_CHARS = 160


def _snippet(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= SNIPPET_CHARS else line[: SNIPPET_CHARS - 1] + "…"


def feedback(content: str) -> tuple[str, dict[str, Any] | None]:
    """An instruction as a person reads it, and its JSON when it is a JSON object.

    Environment feedback in MAGMA-GEN's shape (`{"infos", "previous_tool_call",
    "failure_reason"}`) reads as its `infos` text, then what failed; other text as it is.
    """
    if not content.lstrip().startswith("{"):
        return content, None
    try:
        parsed = json.loads(content)
    except ValueError:
        return content, None
    if not isinstance(parsed, dict):
        return content, None
    infos = parsed.get("infos")
    if not isinstance(infos, str):
        return content, parsed
    failed = parsed.get("failure_reason")
    text = f"{infos}\n(failure: {failed})" if isinstance(failed, str) and failed else infos
    return text, parsed


def decision_line(candidate: CandidateRecord) -> str:
    """The candidate's decision (or error) on one line."""
    if candidate.output is not None:
        return _snippet(format_decision(candidate.output) or '(empty answer: say "")')
    if candidate.error is not None:
        return _snippet(f"error {candidate.error.code}: {candidate.error.message}")
    return "(no answer)"


def _stage_end(data: GraphData, candidate: CandidateRecord) -> str | None:
    end = data.stage_ends.get(candidate.id)
    if end is not None:
        return f"{end.event}/{end.state}"
    return None


def _candidate_row(data: GraphData, candidate: CandidateRecord) -> dict[str, Any]:
    marker = candidate.coaching
    return {
        "id": candidate.id,
        "gen_id": data.candidate_gen_ids.get(candidate.id),
        "status": candidate.status,
        "origin": candidate.origin,
        "executed": candidate.execution_finished,
        "decision": decision_line(candidate),
        "stage_end": _stage_end(data, candidate),
        "score": {
            stage: [s.optimal, s.non_optimal, s.unassessed, s.total_child]
            for stage, s in candidate.score.items()
        },
        "coaching": marker.type_coaching,
        "role": marker.coaching_role,
        "faulty": marker.diagnosed_as_faulty,
        "human": candidate.coaching_source.get("origin") == "human",
        "decision_source": candidate.decision_source,
        "attempts": candidate.coaching_attempt_ids,
        "links": [[link.situation_id, link.kind] for link in candidate.links],
    }


def _situation_row(data: GraphData, situation: SituationRecord) -> dict[str, Any]:
    instruction = situation.input.instruction
    text, raw = feedback(instruction.content)
    return {
        "id": situation.id,
        "gen_id": data.situation_gen_ids.get(situation.id),
        "stage": situation.stage_id,
        "parent": situation.parent_id,
        "instruction": {"type": instruction.type, "text": _snippet(text), "json": raw},
        "candidates": [_candidate_row(data, c) for c in situation.candidates],
    }


def _task(description: TaskDescription | str) -> Any:
    """The run's task as `config.json` holds it: MAGMA's description object, or its text."""
    if isinstance(description, str):
        return description
    return description.model_dump(mode="json")


def graph_view(data: GraphData) -> dict[str, Any]:
    """The whole tree, compact, with the run's header."""
    config = data.config
    return {
        "run": {
            "run_id": config.run_id,
            "state": data.state,
            "live": data.live,
            "scenario": config.scenario,
            "target": config.target,
            "target_kind": config.target_kind,
            "task": task_text(config.target, config.task_description),
            "agent": f"{config.agent_id} {config.agent_version}",
            "task_description": _task(config.task_description),
            "roots": config.roots,
        },
        "situations": [_situation_row(data, s) for _, s in sorted(data.situations.items())],
    }


def _find(data: GraphData, candidate_id: int) -> tuple[SituationRecord, CandidateRecord] | None:
    for situation in data.situations.values():
        for candidate in situation.candidates:
            if candidate.id == candidate_id:
                return situation, candidate
    return None


def _request_view(request: CoachingRequest, logs: Sequence[OwnedLog]) -> dict[str, Any]:
    view = request_view(request)
    view["proposals"] = [proposal.model_dump(mode="json") for proposal in request.proposals]
    view["rewrite"] = request.rewrite
    view["logs"] = [
        {"coaching_type": entry.coaching_type, "content": entry.content}
        for entry in logs
        if entry.request_id == request.request_id
    ]
    return view


def related_requests(
    data: GraphData, candidate: CandidateRecord, requests: Sequence[CoachingRequest]
) -> list[CoachingRequest]:
    """Requests opened on the candidate, that diagnosed it, or whose branch it starts."""
    source = candidate.coaching_source.get("request_id")
    return [
        request
        for request in requests
        if request.candidate_id == candidate.id
        or (request.diagnosis is not None and request.diagnosis.step_id == candidate.id)
        or request.request_id == source
    ]


def node_view(
    data: GraphData,
    candidate_id: int,
    requests: Sequence[CoachingRequest],
    logs: Sequence[OwnedLog],
) -> dict[str, Any] | None:
    """One candidate in full: its situation's input, its record, its requests with logs."""
    found = _find(data, candidate_id)
    if found is None:
        return None
    situation, candidate = found
    related = related_requests(data, candidate, requests)
    # A save keeps no requests: its logs are shown for the whole run instead.
    unowned = [] if data.live else logs
    return {
        "situation": {
            "id": situation.id,
            "gen_id": data.situation_gen_ids.get(situation.id),
            "stage": situation.stage_id,
            "parent": situation.parent_id,
            "input": situation.input.model_dump(mode="json"),
            "instruction_text": feedback(situation.input.instruction.content)[0],
        },
        "candidate": {
            **candidate.model_dump(mode="json", by_alias=True),
            "gen_id": data.candidate_gen_ids.get(candidate.id),
            "stage_end": _stage_end(data, candidate),
            "decision_line": decision_line(candidate),
        },
        "can_correct": data.live
        and data.state == "active"
        and candidate.execution_finished
        and data.candidate_gen_ids.get(candidate.id) is not None,
        "requests": [_request_view(request, logs) for request in related],
        "run_logs": [
            {"coaching_type": entry.coaching_type, "content": entry.content} for entry in unowned
        ],
    }


def branch_of(data: GraphData, request: CoachingRequest) -> list[dict[str, Any]]:
    """The coached candidates a request's proposals became, with how they fared."""
    rows = []
    for situation in data.situations.values():
        for candidate in situation.candidates:
            if candidate.coaching_source.get("request_id") != request.request_id:
                continue
            rows.append(
                {
                    "situation_id": situation.id,
                    "candidate": _candidate_row(data, candidate),
                }
            )
    return rows
