"""Specialized coaching: session config, requests, responses and correction payloads."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import JsonValue

from gencoach import protocol as p
from tests.protocol import examples as ex
from tests.protocol.examples import expect_refusal


def test_reinjection_point_constants() -> None:
    """The two reinjection points gencoach offers are `replacement` and `recovery`."""
    assert (p.REPLACEMENT_POINT, p.RECOVERY_POINT) == ("replacement", "recovery")
    assert (p.REPLACE_SAY, p.REPLACE_DECISION) == ("replace_say", "replace_decision")


@pytest.mark.parametrize(
    "data",
    [{"id": "replacement"}, {"id": "x", "input_step_id": 1, "input": ex.agent_input()}],
    ids=["neither", "both"],
)
def test_reinjection_point_needs_exactly_one_input(data: dict[str, Any]) -> None:
    """A point names a trajectory step or carries an input, never both nor neither."""
    expect_refusal(lambda: p.ReinjectionPoint.parse(data), "input_step_id")


def test_backend_defaults_and_hidden_headers() -> None:
    """Backends default to 30 s and 3 retries, and their headers stay out of repr."""
    data = {k: v for k, v in ex.backend_config().items() if k not in ("timeout", "max_retry")}
    backend = p.CoachingBackendConfig.parse(data)
    assert (backend.timeout, backend.max_retry) == (30.0, 3)
    assert "sk-secret" not in repr(backend)
    assert "sk-secret" not in repr(p.CoachingSessionConfig.parse(ex.session_config()))


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"timeout": 0}, "timeout"),
        ({"timeout": "30"}, "timeout"),
        ({"max_retry": -1}, "max_retry"),
        ({"headers": {"X-Retry": 1}}, "headers.X-Retry"),
    ],
)
def test_backend_refusals(change: dict[str, Any], field: str) -> None:
    """Non-positive timeouts, negative retries and non-text headers are refused."""
    data = {"backends": {"main": {**ex.backend_config(), **change}}}
    expect_refusal(lambda: p.CoachingSessionConfig.parse(data), f"backends.main.{field}")


def test_session_needs_a_backend() -> None:
    """A coaching session without any backend is refused."""
    error = expect_refusal(lambda: p.CoachingSessionConfig.parse({"backends": {}}), "backends")
    assert "at least one backend" in str(error)
    expect_refusal(lambda: p.CoachingSessionConfig.parse({}), "backends")


@pytest.mark.parametrize("kind", ["Failure", "1x", "has-dash", ""])
def test_log_type_is_snake_case(kind: str) -> None:
    """A log's coaching_type must be a lowercase identifier (it names a file)."""
    expect_refusal(
        lambda: p.CoachingLog.parse({**ex.coaching_log(), "coaching_type": kind}), "coaching_type"
    )


def _request(**change: Any) -> dict[str, Any]:
    return {**ex.coaching_request(), **change}


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (_request(kind="style"), "kind"),
        (_request(run_id=""), "run_id"),
        (_request(trajectory=[ex.coaching_step(1), ex.coaching_step(1)]), "trajectory.1.id"),
        (
            _request(
                reinjection_points=[ex.reinjection_point("a", 1), ex.reinjection_point("a", 2)]
            ),
            "reinjection_points.1.id",
        ),
        (_request(target_step_id=9), "target_step_id"),
        (
            _request(
                reinjection_points=[ex.reinjection_point("a", 1), ex.reinjection_point("b", 9)]
            ),
            "reinjection_points.1.input_step_id",
        ),
    ],
    ids=["kind", "run-id", "dup-step", "dup-point", "target", "unknown-step"],
)
def test_request_refusals(data: dict[str, Any], field: str) -> None:
    """Duplicate ids, absent target step and dangling point references are refused."""
    expect_refusal(lambda: p.SpecializedCoachingRequest.parse(data), field)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"proposals": []}, "proposals"),
        ({"status": "abandoned", "reason": "no idea"}, "proposals"),
        ({"status": "abandoned", "proposals": []}, "reason"),
        ({"status": "error", "proposals": [], "reason": ""}, "reason"),
        ({"status": "done"}, "status"),
    ],
    ids=["corrected-empty", "abandoned-proposals", "abandoned-no-reason", "error-blank", "status"],
)
def test_response_status_must_match_its_content(change: dict[str, Any], field: str) -> None:
    """Corrected ⇔ at least one proposal; abandoned and error need a reason and none."""
    data = {**ex.coaching_response(), **change}
    expect_refusal(lambda: p.SpecializedCoachingResponse.parse(data), field)


def test_abandoned_response_with_reason_is_accepted() -> None:
    """An abandon that explains itself is a valid answer."""
    data = {**ex.coaching_response(), "status": "abandoned", "proposals": [], "reason": "unclear"}
    assert p.SpecializedCoachingResponse.parse(data).reason == "unclear"


def test_response_matches_its_request() -> None:
    """A response with the request's id proposing offered points passes the check."""
    request = p.SpecializedCoachingRequest.parse(ex.coaching_request())
    data = {**ex.coaching_response(), "proposals": [ex.coaching_proposal("recovery")]}
    p.SpecializedCoachingResponse.parse(data).validate_request(request)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"request_id": "coach-2"}, "request_id"),
        (
            {"proposals": [ex.coaching_proposal(), ex.coaching_proposal("elsewhere")]},
            "proposals.1.reinjection_point_id",
        ),
    ],
)
def test_response_to_another_request_is_refused(change: dict[str, Any], field: str) -> None:
    """A foreign request id or a point the request did not offer is refused."""
    request = p.SpecializedCoachingRequest.parse(ex.coaching_request())
    response = p.SpecializedCoachingResponse.parse({**ex.coaching_response(), **change})
    error = expect_refusal(lambda: response.validate_request(request), field)
    assert error.model == "SpecializedCoachingResponse"


def test_a_proposal_without_a_decision_source_reads_as_unknown() -> None:
    """A MAGMA agent's proposal says nothing of its source: gencoach records `unknown`."""
    proposal = p.CoachingProposal.parse(ex.coaching_proposal())
    assert proposal.decision_source == "unknown"
    said = {
        **ex.coaching_proposal(),
        "extra_keys": {**ex.replace_decision(), "decision_source": "fallback"},
    }
    assert p.CoachingProposal.parse(said).decision_source == "fallback"


def test_a_decision_source_outside_the_vocabulary_is_refused() -> None:
    """A source gencoach does not know is refused with the ones it knows."""
    request = p.SpecializedCoachingRequest.parse(ex.coaching_request())
    payload = {**ex.replace_decision(), "decision_source": "teacher"}
    proposal = {"reinjection_point_id": "replacement", "extra_keys": payload}
    response = p.SpecializedCoachingResponse.parse(
        {**ex.coaching_response(), "proposals": [proposal]}
    )
    error = expect_refusal(
        lambda: response.validate_request(request), "proposals.0.extra_keys.decision_source"
    )
    assert "'teacher' is not one of expected_decision, repair_model, rule, fallback" in str(error)


@pytest.mark.parametrize(
    ("data", "model"),
    [(ex.replace_say(), p.ReplaceSay), (ex.replace_decision(), p.ReplaceDecision)],
)
def test_payload_is_chosen_by_kind(data: dict[str, Any], model: type[p.ContractModel]) -> None:
    """parse_coaching_payload picks the payload model that its `kind` names."""
    assert isinstance(p.parse_coaching_payload(data), model)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"text": "x"}, "kind"),
        ({"kind": "replace_everything"}, "kind"),
        ({"kind": 1}, "kind"),
        ("replace_say", "CoachingPayload"),
        ({"kind": "replace_say", "text": ""}, "text"),
        ({"kind": "replace_decision", "decision": {"say": 1}}, "decision.say"),
    ],
    ids=["missing-kind", "unknown-kind", "int-kind", "not-object", "empty-text", "bad-decision"],
)
def test_payload_refusals(data: object, field: str) -> None:
    """A payload without a known kind, or with bad content, is refused."""
    expect_refusal(lambda: p.parse_coaching_payload(data), field)


def test_a_reinjected_input_carries_the_proposal_verbatim_under_coaching() -> None:
    """The payload becomes `extra_keys["coaching"]` as is, replacing any earlier one, on a
    copy asking for one answer; other keys and the anchor itself are untouched."""
    anchor = p.AgentInput.parse(
        {"id": 3, "instruction": {"type": "user", "content": "go"}, "num_outputs": 2,
         "extra_keys": {"episode": 7, "coaching": {"kind": "replace_say", "text": "old"}}}
    )  # fmt: skip
    payload: dict[str, JsonValue] = {
        "kind": "replace_decision",
        "decision": {"say": "new", "tool_calls": []},
    }
    coached = p.coached_input(anchor, payload)
    assert coached.extra_keys == {"episode": 7, "coaching": payload}
    assert coached.num_outputs == 1
    assert anchor.extra_keys["coaching"] == {"kind": "replace_say", "text": "old"}


def test_an_input_after_a_coached_decision_drops_the_inherited_correction() -> None:
    """`without_coaching` removes only `extra_keys["coaching"]`, as MAGMA-GEN strips it."""
    item = p.AgentInput.parse(
        {"id": 1, "instruction": {"type": "env", "content": "ok"},
         "extra_keys": {"episode": 7, "coaching": {"kind": "replace_say", "text": "x"}}}
    )  # fmt: skip
    assert p.without_coaching(item).extra_keys == {"episode": 7}


def test_decision_source_is_sent_only_to_agents_that_read_it() -> None:
    """A payload gencoach wrote (a rewrite, a person's decision) keeps `decision_source`
    for an agent announcing the capability and loses it for one that does not; an agent's
    own payload goes back verbatim, whatever it announced."""
    payload: dict[str, JsonValue] = {
        "kind": "replace_say",
        "text": "42",
        "decision_source": "rewrite",
    }
    bare: dict[str, JsonValue] = {"kind": "replace_say", "text": "42"}
    assert p.payload_sent(payload, written_here=True, reads_source=True) == payload
    assert p.payload_sent(payload, written_here=True, reads_source=False) == bare
    assert p.payload_sent(payload, written_here=False, reads_source=False) == payload
    assert p.parse_coaching_payload(bare) == p.ReplaceSay(text="42")
