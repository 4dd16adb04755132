"""Agent protocol 2.0: requests, candidate answers, their order, and agent self-description."""

from __future__ import annotations

from typing import Any

import pytest

from gencoach import protocol as p
from tests.protocol import examples as ex
from tests.protocol.examples import expect_refusal


def test_protocol_version() -> None:
    """The protocol version spoken is MAGMA Core's 2.0, and AgentInfo defaults to it."""
    assert p.PROTOCOL_VERSION == "2.0"
    info = {k: v for k, v in ex.agent_info().items() if k != "protocol_version"}
    assert p.AgentInfo.parse(info).protocol_version == "2.0"


def test_input_defaults() -> None:
    """An input needs only an id and an instruction; the rest defaults to empty, one output."""
    parsed = p.AgentInput.parse({"id": 7, "instruction": {"type": "env", "content": "ok"}})
    assert (parsed.num_outputs, parsed.tools, parsed.memory, parsed.extra_keys) == (1, [], {}, {})


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"num_outputs": 0}, "num_outputs"),
        ({"instruction": {"type": "system", "content": "x"}}, "instruction.type"),
        ({"tools": [["move"]]}, "tools.0"),
        ({"memory": []}, "memory"),
    ],
)
def test_input_refusals(change: dict[str, Any], field: str) -> None:
    """Bad input values are refused and named."""
    expect_refusal(lambda: p.AgentInput.parse({**ex.agent_input(), **change}), field)


def test_request_input_ids_are_unique() -> None:
    """Two inputs with one id are refused at the second one."""
    data = {"request_id": "r", "inputs": [ex.agent_input(4), ex.agent_input(5), ex.agent_input(4)]}
    error = expect_refusal(lambda: p.AgentRequest.parse(data), "inputs.2.id")
    assert "duplicate input id 4" in str(error)


def test_request_id_is_not_empty() -> None:
    """An empty request id is refused."""
    expect_refusal(
        lambda: p.AgentRequest.parse({**ex.agent_request(), "request_id": ""}), "request_id"
    )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"output": None}, "completed candidates need an output and no error"),
        ({"error": ex.agent_error()}, "completed candidates need an output and no error"),
        ({"status": "error"}, "error candidates need an error and no output"),
        ({"status": "error", "output": None}, "error candidates need an error and no output"),
    ],
)
def test_output_status_must_match_its_content(change: dict[str, Any], reason: str) -> None:
    """Completed ⇔ a decision and no error; error ⇔ an error and no decision."""
    error = expect_refusal(lambda: p.AgentOutput.parse({**ex.agent_output(), **change}), "status")
    assert str(error) == f"invalid AgentOutput: status: {reason}"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"candidate_index": -1}, "candidate_index"),
        ({"memory": None}, "memory"),
        (
            {"output": {"say": "x", "tool_calls": [{"name": "", "target_robot_name": "r"}]}},
            "output.tool_calls.0.name",
        ),
        (
            {"status": "completed", "output": None, "error": {"code": "", "message": "m"}},
            "error.code",
        ),
    ],
)
def test_output_refusals(change: dict[str, Any], field: str) -> None:
    """Bad candidate values are refused and named with their path."""
    expect_refusal(lambda: p.AgentOutput.parse({**ex.agent_output(), **change}), field)


def test_response_in_request_order_is_accepted() -> None:
    """Candidates in input order then ascending candidate_index satisfy the request."""
    response = p.AgentResponse.parse(ex.agent_response())
    response.validate_request(p.AgentRequest.parse(ex.agent_request()))
    assert [item.source_id for item in response.root] == [1, 1, 2]


def _positions(*keys: tuple[int, int]) -> list[dict[str, Any]]:
    return [ex.agent_output(source, index) for source, index in keys]


@pytest.mark.parametrize(
    ("items", "field"),
    [
        (_positions((1, 1), (1, 0), (2, 0)), "0.candidate_index"),
        (_positions((2, 0), (1, 0), (1, 1)), "0.source_id"),
        (_positions((1, 0), (1, 1), (2, 1)), "2.candidate_index"),
        ([ex.agent_output(1, 0, request_id="other"), *_positions((1, 1), (2, 0))], "0.request_id"),
        (_positions((1, 0), (1, 1)), "2"),
        (_positions((1, 0), (1, 1), (2, 0), (2, 1)), "3"),
    ],
    ids=["index-order", "input-order", "wrong-index", "request-id", "missing", "extra"],
)
def test_response_out_of_order_is_refused(items: list[dict[str, Any]], field: str) -> None:
    """The first candidate out of place, missing or extra is named by its position."""
    response = p.AgentResponse.parse(items)
    request = p.AgentRequest.parse(ex.agent_request())
    error = expect_refusal(lambda: response.validate_request(request), field)
    assert error.model == "AgentResponse"


def test_response_names_fourth_position() -> None:
    """A wrong candidate_index at the fourth position is reported as `3.candidate_index`."""
    request = p.AgentRequest.parse({"request_id": "req-1", "inputs": [ex.agent_input(1, 4)]})
    response = p.AgentResponse.parse(_positions((1, 0), (1, 1), (1, 2), (1, 2)))
    error = expect_refusal(lambda: response.validate_request(request), "3.candidate_index")
    assert "expected 3, got 2" in str(error)


def test_health_is_ready_only() -> None:
    """Health reports `ready`; anything else is not a health body."""
    assert p.AgentHealth.parse({}).status == "ready"
    expect_refusal(lambda: p.AgentHealth.parse({"status": "loading"}), "status")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"specialized_coaching": [3]}, "specialized_coaching.0"),
        ({"capabilities": {"tools": "yes"}}, "capabilities.tools"),
        ({"coaching_resume": 1}, "coaching_resume"),
    ],
)
def test_info_refusals(change: dict[str, Any], field: str) -> None:
    """Coaching kinds that are not strings and non-boolean capabilities are refused."""
    expect_refusal(lambda: p.AgentInfo.parse({**ex.agent_info(), **change}), field)


def test_info_accepts_any_coaching_kind_and_routes_the_known_ones() -> None:
    """As magma-core, any list of strings is accepted; gencoach routes the kinds it knows
    (once each) and names the others as ignored."""
    kinds = ["text_only", "failure", "format", "failure", "style"]
    info = p.AgentInfo.parse({**ex.agent_info(), "specialized_coaching": kinds})
    assert info.specialized_coaching == kinds
    assert info.routed_kinds == ["failure", "format"]
    assert info.ignored_kinds == ["text_only", "style"]


def test_info_capabilities_are_required() -> None:
    """Like MAGMA, an info body must state its capabilities."""
    data = ex.agent_info()
    del data["capabilities"]
    expect_refusal(lambda: p.AgentInfo.parse(data), "capabilities")


def test_coaching_kinds() -> None:
    """The coaching kinds an agent may announce are format, failure and suboptimal."""
    assert set(p.COACHING_KINDS) == {"format", "failure", "suboptimal"}
