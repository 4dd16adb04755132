"""Checks for agents that announce specialized coaching: sessions, repairs, reinjection.

Protocol 2.0 fixes PUT (204, the same config again 204, a different one 409) and DELETE
(204); it says nothing of a second DELETE, so 204 and 404 are both accepted there.
"""

from __future__ import annotations

import uuid

from gencoach.agents.checks.payloads import agent_input, coaching_request, session_config
from gencoach.agents.checks.protocol import respond
from gencoach.agents.checks.results import (
    CheckFailedError,
    CheckResult,
    Target,
    detail,
    failed,
    passed,
    run_check,
)
from gencoach.errors import ContractError
from gencoach.protocol import (
    COACHING_KEY,
    REPLACE_DECISION,
    AgentDecision,
    AgentInfo,
    AgentInput,
    CoachingKind,
    CoachingProposal,
    JsonObject,
    ReplaceDecision,
    ReplaceSay,
    SpecializedCoachingRequest,
    coached_input,
    parse_coaching_payload,
)


class CoachingChecks:
    """The coaching checks for one agent, sharing a run id and the proposals received."""

    def __init__(self, target: Target, info: AgentInfo, backend_endpoint: str) -> None:
        self.target = target
        self.info = info
        self.backend_endpoint = backend_endpoint
        self.run_id = f"gencoach-check-{uuid.uuid4().hex[:12]}"
        self.path = f"/v1/coaching/sessions/{self.run_id}"
        self.proposals: list[tuple[SpecializedCoachingRequest, CoachingProposal]] = []

    async def run(self) -> list[CheckResult]:
        """Every coaching check, in order; a session that will not open skips the rest."""
        results = [await run_check("coaching.session_open", self.open)]
        if not results[0].passed:
            return results
        for name, check in (
            ("coaching.session_idempotent", self.idempotent),
            ("coaching.session_conflict", self.conflict),
        ):
            results.append(await run_check(name, check))
        for kind in self.info.routed_kinds:

            async def repair(kind: CoachingKind = kind) -> CheckResult:
                return await self.repair(kind)

            results.append(await run_check(f"coaching.{kind}", repair))
        results.append(await run_check("coaching.reinjection", self.reinjection))
        results.append(await run_check("coaching.session_close", self.close))
        return results

    async def _put(self, body: object) -> int:
        response = await self.target.call("PUT", self.path, body)
        if response.status_code not in (204, 409):
            raise CheckFailedError(
                f"PUT {self.path} answered {response.status_code}: {detail(response)}"
            )
        return response.status_code

    async def open(self) -> CheckResult:
        """PUT a session whose one backend (the checker's stub) is reachable: 204."""
        response = await self.target.call("PUT", self.path, session_config(self.backend_endpoint))
        if response.status_code != 204:
            reason = f"answered {response.status_code}: {detail(response)}"
            if response.status_code == 503:
                reason += (
                    f" (the backend is {self.backend_endpoint}; is it reachable from the agent?)"
                )
            return failed("coaching.session_open", reason)
        return passed("coaching.session_open")

    async def idempotent(self) -> CheckResult:
        """PUT the same config again: 204 again."""
        status = await self._put(session_config(self.backend_endpoint))
        if status != 204:
            return failed(
                "coaching.session_idempotent",
                f"the same config again answered {status}, expected 204",
            )
        return passed("coaching.session_idempotent")

    async def conflict(self) -> CheckResult:
        """PUT a different config for the open run: 409."""
        status = await self._put(session_config(self.backend_endpoint, model="another-model"))
        if status != 409:
            return failed(
                "coaching.session_conflict", f"a different config answered {status}, expected 409"
            )
        return passed("coaching.session_conflict")

    async def repair(self, kind: CoachingKind) -> CheckResult:
        """A valid request of an announced kind gets a valid answer that is not `error`, at
        offered points only, whose proposals carry their payload unwrapped."""
        body = coaching_request(
            kind, self.run_id, f"check-{uuid.uuid4().hex}", self.target.first_memory
        )
        request = SpecializedCoachingRequest.parse(body)
        answer = await self.target.client.coach(request)
        for proposal in answer.proposals:
            wrapped = _wrapped_payload(proposal)
            if wrapped is not None:
                return failed(f"coaching.{kind}", wrapped)
        if answer.status == "error":  # the coach broke (it raised, or broke the contract)
            return failed(f"coaching.{kind}", f"the agent's coach answered error: {answer.reason}")
        self.proposals += [(request, proposal) for proposal in answer.proposals]
        if answer.status == "corrected":
            points = ", ".join(p.reinjection_point_id for p in answer.proposals)
            return passed(f"coaching.{kind}", f"corrected at {points}")
        return passed(f"coaching.{kind}", f"{answer.status}: {answer.reason}")

    async def reinjection(self) -> CheckResult:
        """Each proposal, reinjected as MAGMA-GEN does (its `extra_keys` as the input's
        `extra_keys.coaching`), is applied: a `replace_decision` or `replace_say` comes back
        as the answer. So are a checker-made `replace_decision` for an agent announcing the
        capability and a `replace_say` for one announcing `coaching_resume`."""
        injections: list[tuple[AgentInput, JsonObject]] = []
        for request, proposal in self.proposals:
            point = next(
                p for p in request.reinjection_points if p.id == proposal.reinjection_point_id
            )
            step = next((s for s in request.trajectory if s.id == point.input_step_id), None)
            base = point.input if point.input is not None else step.input if step else None
            assert base is not None  # the request validated: every point has an input
            injections.append((coached_input(base, proposal.extra_keys), proposal.extra_keys))
        question = AgentInput.parse(agent_input(1, "Which button is next?"))
        if self.info.capabilities.get(REPLACE_DECISION):
            decision = AgentDecision(say=f"checked correction {uuid.uuid4().hex[:8]}")
            payload = ReplaceDecision(decision=decision).model_dump(mode="json")
            injections.append((coached_input(question, payload), payload))
        if self.info.coaching_resume:
            payload = ReplaceSay(text=f"sw1 is next ({uuid.uuid4().hex[:8]})").model_dump(
                mode="json"
            )
            injections.append((coached_input(question, payload), payload))
        if not injections:
            return passed("coaching.reinjection", "no proposal to reinject")
        for index, (injection, payload) in enumerate(injections):
            item = injection.model_dump(mode="json")
            body = {"request_id": f"check-{uuid.uuid4().hex}", "inputs": [{**item, "id": index}]}
            answer = (await respond(self.target, body)).root[0]
            ignored = _ignored(payload, answer.output)
            if ignored is not None:
                return failed("coaching.reinjection", ignored)
        return passed("coaching.reinjection", f"{len(injections)} reinjections applied")

    async def close(self) -> CheckResult:
        """DELETE the session: 204; a second DELETE may answer 204 or 404."""
        response = await self.target.call("DELETE", self.path)
        if response.status_code != 204:
            return failed(
                "coaching.session_close", f"DELETE answered {response.status_code}, expected 204"
            )
        again = await self.target.call("DELETE", self.path)
        if again.status_code not in (204, 404):
            return failed(
                "coaching.session_close",
                f"a second DELETE answered {again.status_code}, expected 404 (or 204)",
            )
        return passed(
            "coaching.session_close",
            f"a second DELETE answered {again.status_code}; "
            "the protocol is silent there, 204 and 404 are accepted",
        )


def _wrapped_payload(proposal: CoachingProposal) -> str | None:
    """Why a proposal's `extra_keys` is not a payload of its own, or None."""
    inner = proposal.extra_keys.get(COACHING_KEY)
    if set(proposal.extra_keys) == {COACHING_KEY} and isinstance(inner, dict):
        return (
            f"proposal at {proposal.reinjection_point_id!r} wraps its payload as "
            f"{{{COACHING_KEY!r}: ...}}; its extra_keys must be the payload itself "
            f"(the coach puts it under the input's extra_keys.{COACHING_KEY}, verbatim)"
        )
    if not proposal.extra_keys:
        return (
            f"proposal at {proposal.reinjection_point_id!r} has empty extra_keys; "
            "MAGMA-GEN skips such a proposal"
        )
    return None


def _ignored(payload: JsonObject, output: AgentDecision | None) -> str | None:
    """Why an answer to a reinjected correction did not apply it, or None."""
    try:
        correction = parse_coaching_payload(payload)
    except ContractError:
        return None  # a payload of the agent's own: answered is all that can be checked
    expected = (
        correction.decision
        if isinstance(correction, ReplaceDecision)
        else AgentDecision(say=correction.text)
    )
    if output == expected:
        return None
    got = "an error" if output is None else output.model_dump_json()
    return (
        f"a reinjected {correction.kind} under extra_keys.{COACHING_KEY} was not applied: "
        f"the answer is {got}, the correction {expected.model_dump_json()} "
        f"(the agent must read the payload under extra_keys.{COACHING_KEY}, not ignore it "
        "nor look for it flat in extra_keys)"
    )
