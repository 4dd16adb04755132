"""Generation events (generator → gencoach) and branch orders (gencoach → generator)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from gencoach import protocol as p
from gencoach.errors import ContractError
from tests.protocol import examples as ex
from tests.protocol import records as rx
from tests.protocol.examples import expect_refusal

EVENTS: list[tuple[Callable[[], dict[str, Any]], type[p.EventBase]]] = [
    (rx.run_started, p.RunStarted),
    (rx.situation_created, p.SituationCreated),
    (rx.candidate_created, p.CandidateCreated),
    (rx.candidate_executed, p.CandidateExecuted),
    (rx.run_finished, p.RunFinished),
]


@pytest.mark.parametrize(("make", "model"), EVENTS, ids=[m.__name__ for _, m in EVENTS])
def test_event_is_parsed_by_its_type(
    make: Callable[[], dict[str, Any]], model: type[p.EventBase]
) -> None:
    """parse_event and parse_event_json return the model that `type` names, version "1"."""
    event = p.parse_event(make())
    assert type(event) is model
    assert p.parse_event_json(json.dumps(make())) == event
    assert event.events == p.EVENTS_VERSION == "1"
    assert p.parse_event(event.model_dump(mode="json")) == event


def test_event_types() -> None:
    """The event types are the five of events format 1."""
    assert set(p.EVENT_TYPES) == {
        "run.started",
        "situation.created",
        "candidate.created",
        "candidate.executed",
        "run.finished",
    }


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"run_id": "run-1", "seq": 0}, "type"),
        ({"type": "run.paused", "run_id": "run-1", "seq": 0}, "type"),
        ({"type": None, "run_id": "run-1", "seq": 0}, "type"),
        (["run.started"], "GenerationEvent"),
    ],
    ids=["missing", "unknown", "null", "not-object"],
)
def test_event_without_known_type_is_refused(data: object, field: str) -> None:
    """An event whose type is missing or unknown is refused, naming `type`."""
    error = expect_refusal(lambda: p.parse_event(data), field)
    assert error.model == "GenerationEvent"


def test_event_json_errors_are_contract_errors() -> None:
    """Broken JSON text and NaN inside an event are refused like any other fault."""
    expect_refusal(lambda: p.parse_event_json("{"), "GenerationEvent")
    raw = json.dumps(rx.situation_created()).replace('"confidence": 0.5', '"confidence": NaN')
    expect_refusal(lambda: p.parse_event_json(raw), "input.memory.confidence")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"seq": -1}, "seq"),
        ({"seq": "1"}, "seq"),
        ({"seq": True}, "seq"),
        ({"run_id": ""}, "run_id"),
        ({"events": "2"}, "events"),
        ({"events": 1}, "events"),
    ],
)
@pytest.mark.parametrize("make", [make for make, _ in EVENTS], ids=[m.__name__ for _, m in EVENTS])
def test_envelope_refusals(
    make: Callable[[], dict[str, Any]], change: dict[str, Any], field: str
) -> None:
    """Every event needs a non-empty run id, a non-negative integer seq and events format "1"."""
    expect_refusal(lambda: p.parse_event({**make(), **change}), field)


@pytest.mark.parametrize(
    "url",
    ["ftp://agent:8080", "127.0.0.1:8080", "http://", "http://agent:99999", "agent"],
)
def test_agent_url_must_be_http(url: str) -> None:
    """run.started refuses an agent URL that is not http(s) with a host and a valid port."""
    expect_refusal(lambda: p.parse_event({**rx.run_started(), "agent_url": url}), "agent_url")


def test_agent_url_https_is_accepted() -> None:
    """An https agent URL with a path is accepted unchanged."""
    event = p.parse_event({**rx.run_started(), "agent_url": "https://agents.example/v2"})
    assert isinstance(event, p.RunStarted)
    assert event.agent_url == "https://agents.example/v2"


def test_situation_defaults() -> None:
    """A situation defaults to a `next` link, no errors, no attempts, and open stage budgets."""
    data = rx.situation_created()
    for key in ("link", "active_errors", "coaching_attempt_ids"):
        del data[key]
    data["stage"] = {"id": 0, "goal": "greet"}
    event = p.parse_event(data)
    assert isinstance(event, p.SituationCreated)
    assert (event.link, event.active_errors, event.stage.max_tool_calls) == ("next", [], None)


def test_situation_parent_is_required() -> None:
    """parent_candidate_id must be stated, as null for a root situation."""
    data = rx.situation_created()
    del data["parent_candidate_id"]
    expect_refusal(lambda: p.parse_event(data), "parent_candidate_id")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"id": -1}, "stage.id"),
        ({"max_tool_calls": 0}, "stage.max_tool_calls"),
        ({"target_tool_calls": -1}, "stage.target_tool_calls"),
        ({"text_only": "no"}, "stage.text_only"),
    ],
)
def test_stage_info_refusals(change: dict[str, Any], field: str) -> None:
    """Stage ids and tool-call budgets must be in range."""
    data = rx.situation_created()
    data["stage"] = {**data["stage"], **change}
    expect_refusal(lambda: p.parse_event(data), field)


@pytest.mark.parametrize(
    "change",
    [
        {"output": None},
        {"error": ex.agent_error()},
        {"response_status": "error"},
        {"response_status": "error", "output": None},
    ],
)
def test_candidate_created_status_must_match_its_content(change: dict[str, Any]) -> None:
    """candidate.created follows the record rule: completed ⇔ output and no error."""
    expect_refusal(lambda: p.parse_event({**rx.candidate_created(), **change}), "response_status")


def test_rejected_candidate_keeps_the_reason() -> None:
    """A candidate the generator rejected carries invalid_reason alongside the agent's answer."""
    event = p.parse_event({**rx.candidate_created(), "invalid_reason": "unknown tool"})
    assert isinstance(event, p.CandidateCreated)
    assert event.invalid_reason == "unknown tool"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"status": "done"}, "status"),
        ({"stage_end": {"event": "timeout", "state": "optimal"}}, "stage_end.event"),
        ({"stage_end": {"event": "success", "state": "good"}}, "stage_end.state"),
        ({"execution": []}, "execution"),
        ({"feedback": {"type": "robot", "content": "x"}}, "feedback.type"),
        ({"feedback": "wrong button"}, "feedback"),
    ],
)
def test_candidate_executed_refusals(change: dict[str, Any], field: str) -> None:
    """Unknown statuses, stage-end values and feedback shapes are refused."""
    expect_refusal(lambda: p.parse_event({**rx.candidate_executed(), **change}), field)


def test_branch_order_round_trips() -> None:
    """A branch order parses from decoded JSON and from text to the same order."""
    order = p.parse_branch_order(rx.branch_order())
    assert p.parse_branch_order_json(order.model_dump_json()) == order
    assert order.anchor.kind == "replacement"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"anchor": {"kind": "restart", "situation_id": "s-1"}}, "anchor.kind"),
        ({"candidate": {**ex.agent_output(), "output": None}}, "candidate.status"),
        ({"attempt_id": "3"}, "attempt_id"),
        ({"coaching": {"coaching_role": "leaf"}}, "coaching.coaching_role"),
        ({"type": "branch.cancel"}, "type"),
    ],
)
def test_branch_order_refusals(change: dict[str, Any], field: str) -> None:
    """Unknown anchors, inconsistent candidates and loose types are refused."""
    expect_refusal(lambda: p.parse_branch_order({**rx.branch_order(), **change}), field)
    expect_refusal(
        lambda: p.parse_branch_order_json(json.dumps({**rx.branch_order(), **change})), field
    )


def test_run_task_description_may_be_magma_object() -> None:
    """run.started takes a task description as text or as MAGMA-GEN's object."""
    description: dict[str, Any] = {
        "task_description": "Serve.",
        "stages_description": [],
        "coaching_hint": None,
    }
    event = p.parse_event({**rx.run_started(), "task_description": description})
    assert isinstance(event, p.RunStarted)
    assert isinstance(event.task_description, p.TaskDescription)
    assert event.task_description.model_dump() == description


def test_a_magma_stage_description_keeps_magma_keys_and_needs_a_goal() -> None:
    """A stage description keeps MAGMA Core's further keys; one without a goal is refused."""
    stage = {"goal_description": "g", "instruction": "i", "stage_name": "S", "text_only": False}
    description = {"task_description": None, "stages_description": [stage], "coaching_hint": "h"}
    event = p.parse_event({**rx.run_started(), "task_description": description})
    assert isinstance(event, p.RunStarted)
    assert isinstance(event.task_description, p.TaskDescription)
    assert event.task_description.model_dump(mode="json") == description
    bad = {**description, "stages_description": [{"instruction": "i"}]}
    with pytest.raises(ContractError, match="goal_description"):
        p.parse_event({**rx.run_started(), "task_description": bad})
    expect_refusal(
        lambda: p.parse_event({**rx.run_started(), "task_description": 3}), "task_description"
    )
