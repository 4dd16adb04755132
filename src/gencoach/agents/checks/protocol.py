"""Checks every agent must pass: health, info, answers, strictness, memory, error candidates."""

from __future__ import annotations

import json
import uuid
from typing import Any

from gencoach.agents.checks.payloads import FIRST_TASK, OTHER_TASK, agent_input, feedback, press
from gencoach.agents.checks.results import (
    CheckFailedError,
    CheckResult,
    Target,
    detail,
    failed,
    passed,
    violations,
)
from gencoach.errors import ContractError
from gencoach.protocol import (
    PROTOCOL_VERSION,
    AgentHealth,
    AgentInfo,
    AgentOutput,
    AgentRequest,
    AgentResponse,
)


async def check_health(target: Target) -> CheckResult:
    """`GET /health` answers 200 `{"status": "ready"}`."""
    response = await target.call("GET", "/health")
    if response.status_code != 200:
        return failed("health", f"answered {response.status_code}: {detail(response)}")
    try:
        AgentHealth.parse_json(response.content)
    except ContractError as error:
        return failed("health", violations(error))
    return passed("health")


async def read_info(target: Target) -> tuple[AgentInfo | None, dict[str, Any], list[CheckResult]]:
    """`GET /v1/info`, strictly validated and speaking protocol 2.0; also its raw JSON."""
    response = await target.call("GET", "/v1/info")
    if response.status_code != 200:
        reason = f"answered {response.status_code}: {detail(response)}"
        return None, {}, [failed("info.strict", reason), failed("info.protocol_version", reason)]
    try:
        raw = response.json()
    except ValueError:
        raw = None
    raw = raw if isinstance(raw, dict) else {}
    info: AgentInfo | None = None
    try:
        info = AgentInfo.parse_json(response.content)
        strict = passed("info.strict")
    except ContractError as error:
        strict = failed("info.strict", violations(error))
    version = raw.get("protocol_version")
    if version == PROTOCOL_VERSION:
        spoken = passed("info.protocol_version")
    else:
        reason = f"protocol_version is {version!r}; gencoach speaks {PROTOCOL_VERSION!r}"
        spoken = failed("info.protocol_version", reason)
    return info, raw, [strict, spoken]


async def respond(target: Target, body: dict[str, Any]) -> AgentResponse:
    """`POST /v1/responses`, checked for count, order and ids; error candidates are kept."""
    response = await target.call("POST", "/v1/responses", body)
    if response.status_code != 200:
        raise CheckFailedError(f"/v1/responses answered {response.status_code}: {detail(response)}")
    try:
        raw = response.json()
    except ValueError:
        raise CheckFailedError(f"/v1/responses answered no JSON: {response.text[:200]!r}") from None
    if isinstance(raw, list):
        target.error_candidates += [
            c for c in raw if isinstance(c, dict) and c.get("status") == "error"
        ]
    request = AgentRequest.parse(body)
    try:
        answer = AgentResponse.parse(raw)
    except ContractError as error:
        raise CheckFailedError(violations(error)) from None
    asked = [(item.id, item.num_outputs) for item in request.inputs]
    if len(answer.root) != sum(count for _, count in asked):
        wanted = ", ".join(f"{count} for input {input_id}" for input_id, count in asked)
        raise CheckFailedError(
            f"the request asks for {sum(c for _, c in asked)} candidates ({wanted}), "
            f"the answer has {len(answer.root)}"
        )
    try:
        answer.validate_request(request)
    except ContractError as error:
        raise CheckFailedError(
            f"candidates out of order or misnumbered: {violations(error)}"
        ) from None
    return answer


async def check_single(target: Target) -> CheckResult:
    """One input, one candidate."""
    body = {"request_id": f"check-{uuid.uuid4().hex}", "inputs": [agent_input(1, FIRST_TASK)]}
    answer = await respond(target, body)
    target.first_memory = answer.root[0].memory
    return passed("responses.single")


async def check_candidates(target: Target) -> CheckResult:
    """Several inputs (unordered ids, user and env) with 2 and 3 candidates each."""
    inputs = [
        agent_input(7, FIRST_TASK, num_outputs=2),
        agent_input(
            3, feedback(press("sw1")), kind="env", memory=target.first_memory, num_outputs=3
        ),
        agent_input(11, OTHER_TASK, num_outputs=1),
    ]
    await respond(target, {"request_id": f"check-{uuid.uuid4().hex}", "inputs": inputs})
    return passed("responses.candidates", "6 candidates for inputs 7, 3 and 11, in order")


def _invalid_requests() -> dict[str, dict[str, Any]]:
    good = agent_input(1, FIRST_TASK)
    request_id = f"check-{uuid.uuid4().hex}"
    return {
        "duplicate input ids": {"request_id": request_id, "inputs": [good, good]},
        "a string input id": {"request_id": request_id, "inputs": [{**good, "id": "1"}]},
        "an unknown field": {"request_id": request_id, "inputs": [good], "stream": True},
        "num_outputs 0": {"request_id": request_id, "inputs": [{**good, "num_outputs": 0}]},
    }


async def check_strict(target: Target) -> CheckResult:
    """Invalid requests are refused with 422."""
    accepted = []
    for what, body in _invalid_requests().items():
        response = await target.call("POST", "/v1/responses", body)
        if response.status_code != 422:
            accepted.append(f"a request with {what} was answered {response.status_code}")
    if accepted:
        return failed(
            "responses.strict", "; ".join(accepted) + "; a strict agent refuses it with 422"
        )
    return passed("responses.strict", "duplicate ids, string id, unknown field, num_outputs 0: 422")


async def check_memory(target: Target) -> CheckResult:
    """Memory is a full replacement built from the input's memory only, and comes back usable.

    A fresh input (memory `{}`) after another request must not carry that request's
    instruction: an agent that keeps state between requests and merges it fails. The
    memory an answer returns must be accepted back in the next input.
    """
    first = await respond(
        target, {"request_id": f"check-{uuid.uuid4().hex}", "inputs": [agent_input(1, FIRST_TASK)]}
    )
    fresh = await respond(
        target, {"request_id": f"check-{uuid.uuid4().hex}", "inputs": [agent_input(1, OTHER_TASK)]}
    )
    shown = json.dumps(fresh.root[0].memory)
    if FIRST_TASK in shown:
        reason = (
            f"the answer to a fresh input (memory {{}}) carries {FIRST_TASK!r} from an earlier "
            "request: memory must be a full replacement built from the input's memory only"
        )
        return failed("memory.replacement", reason)
    follow = agent_input(2, feedback(press("sw1")), kind="env", memory=first.root[0].memory)
    try:
        await respond(target, {"request_id": f"check-{uuid.uuid4().hex}", "inputs": [follow]})
    except CheckFailedError as error:
        return failed(
            "memory.replacement",
            f"the agent's own memory sent back was not answered: {error.reason}",
        )
    return passed("memory.replacement")


def check_errors(target: Target) -> CheckResult:
    """Every error candidate seen so far has `{code, message}` and no output."""
    seen = target.error_candidates
    for candidate in seen:
        try:
            AgentOutput.parse(candidate)
        except ContractError as error:
            return failed(
                "errors.well_formed",
                f"error candidate {json.dumps(candidate)[:200]}: {violations(error)}",
            )
    if not seen:
        return passed("errors.well_formed", "no error candidate seen; nothing to check")
    return passed("errors.well_formed", f"{len(seen)} error candidates, all well formed")
