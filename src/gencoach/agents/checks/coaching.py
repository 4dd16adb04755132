"""Checks for agents that announce specialized coaching: sessions, repairs, reinjection.

DESIGN.md fixes PUT (204, the same config again 204, a different one 409) and DELETE
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
from gencoach.protocol import (
    AgentInfo,
    AgentInput,
    CoachingKind,
    CoachingProposal,
    ReplaceSay,
    SpecializedCoachingRequest,
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
        for kind in self.info.specialized_coaching:

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
        """A valid request of an announced kind gets a valid answer, at offered points only."""
        body = coaching_request(
            kind, self.run_id, f"check-{uuid.uuid4().hex}", self.target.first_memory
        )
        request = SpecializedCoachingRequest.parse(body)
        answer = await self.target.client.coach(request)
        self.proposals += [(request, proposal) for proposal in answer.proposals]
        if answer.status == "corrected":
            points = ", ".join(p.reinjection_point_id for p in answer.proposals)
            return passed(f"coaching.{kind}", f"corrected at {points}")
        return passed(f"coaching.{kind}", f"{answer.status}: {answer.reason}")

    async def reinjection(self) -> CheckResult:
        """Each proposal, and a `replace_say` with `coaching_resume`, reinjected is answered."""
        injections: list[AgentInput] = []
        for request, proposal in self.proposals:
            point = next(
                p for p in request.reinjection_points if p.id == proposal.reinjection_point_id
            )
            step = next((s for s in request.trajectory if s.id == point.input_step_id), None)
            base = point.input if point.input is not None else step.input if step else None
            assert base is not None  # the request validated: every point has an input
            injections.append(
                base.model_copy(update={"extra_keys": {**base.extra_keys, **proposal.extra_keys}})
            )
        if self.info.coaching_resume:
            say = ReplaceSay(text="sw1 is next").model_dump(mode="json")
            text = agent_input(1, "Which button is next?", extra_keys={"coaching": say})
            injections.append(AgentInput.parse(text))
        if not injections:
            return passed("coaching.reinjection", "no proposal to reinject")
        for index, injection in enumerate(injections):
            item = injection.model_dump(mode="json")
            body = {"request_id": f"check-{uuid.uuid4().hex}", "inputs": [{**item, "id": index}]}
            await respond(self.target, body)
        return passed("coaching.reinjection", f"{len(injections)} reinjections answered")

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
            "DESIGN.md is silent there, 204 and 404 are accepted",
        )
