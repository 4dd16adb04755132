"""Reinjection and outcomes: corrected requests become branches; branches prove attempts.

A corrected request's proposals are reinjected through the agent's own endpoint, each
on a copy of its anchor's input whose `extra_keys["coaching"]` is the proposal's
`extra_keys` verbatim, exactly as MAGMA-GEN does (bounded per agent, retried with
backoff, then abandoned with the reason); each becomes a recorded branch and an order
for the generator, and the request's pending slot turns into a completed attempt. When
a trajectory holding an attempt id reaches stage success the attempt is proven, once;
when it fails again it stays executed until its run ends, then unproven.
"""

from __future__ import annotations

import math

import anyio
import httpx
from anyio.abc import TaskStatus

from gencoach.agent_client import AgentClient
from gencoach.errors import AgentCallError
from gencoach.funnel import funnel_row
from gencoach.limits import StageLimits
from gencoach.logs import bound, get_logger
from gencoach.metrics import MetricsRecorder
from gencoach.metrics.catalog import PROOFS, REINJECTIONS
from gencoach.protocol import (
    RECOVERY_POINT,
    AgentOutput,
    AgentRequest,
    CoachingProposal,
    StageEnd,
    coached_input,
    payload_sent,
)
from gencoach.service.branching.coached_branches import (
    Anchor,
    BranchRecorder,
    BranchRefused,
    alternative_claim,
    anchor_of,
    node_ids,
)
from gencoach.service.branching.examples import Examples
from gencoach.service.coaching.budgets import Budgets
from gencoach.service.coaching.lifecycle import RequestState
from gencoach.service.coaching.registry import AgentRegistry
from gencoach.service.coaching.requests import CoachingRequest, RequestStore
from gencoach.service.graphs.graphstore import GraphStore
from gencoach.service.graphs.nodes import RunGraph
from gencoach.service.graphs.trajectory import trajectory
from gencoach.service.isolation import guarded, isolated
from gencoach.service.leases import Lease

log = get_logger("reinjection")

AGENT_TRIES = 3
AGENT_CALLS_PER_AGENT = 4
# How many times an outcome is applied to its request when another writer moved the
# request in between (at most once more is needed: reinjected to executed).
OUTCOME_TRIES = 3
# The longest one controller holds a request's reinjection (its claim is let go when
# done, and taken over at once if the controller dies): longer than any reinjection.
CLAIM_S = 600.0


class Reinjector:
    """Turns corrected requests into branches, and branch outcomes into proofs."""

    def __init__(
        self,
        store: GraphStore,
        requests: RequestStore,
        limits: StageLimits,
        recorder: BranchRecorder,
        http: httpx.AsyncClient,
        budgets: Budgets,
        examples: Examples,
        registry: AgentRegistry,
        retry_wait_s: float = 0.5,
        metrics: MetricsRecorder | None = None,
        claims: Lease | None = None,
    ) -> None:
        self.metrics = metrics or MetricsRecorder()
        self.store = store
        self.requests = requests
        self.limits = limits
        self.recorder = recorder
        self.http = http
        self.budgets = budgets
        self.examples = examples
        self.registry = registry
        self.retry_wait_s = retry_wait_s
        self.claims = claims
        self.in_progress: set[str] = set()
        self._per_agent: dict[str, anyio.CapacityLimiter] = {}
        # Corrected requests waiting for `run` to start their reinjection; kept in memory
        # until then (a crash loses only the wake-up: the reconciler reinjects them).
        self._corrected_in, self._corrected_out = anyio.create_memory_object_stream[
            tuple[str, str]
        ](math.inf)

    def submit(self, request: CoachingRequest) -> None:
        """Reinject a corrected request soon, beside every other run's (never blocks)."""
        self._corrected_in.send_nowait((request.run_id, request.request_id))

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Start each submitted reinjection as its own task (bounded per agent, not overall:
        one run's slow agent never holds up another's), until cancelled."""
        reinject = guarded("reinjection.failed", self.reinject)
        async with anyio.create_task_group() as reinjections:
            task_status.started()
            async for run_id, request_id in self._corrected_out:
                reinjections.start_soon(reinject, run_id, request_id)

    async def reinject(self, run_id: str, request_id: str) -> None:
        """Reinject every proposal of a corrected request (idempotent; one at a time each,
        across controllers: one that holds the request's reinjection and lives does it)."""
        if request_id in self.in_progress:
            return
        self.in_progress.add(request_id)
        claim = self.store.keys.reinjecting(run_id, request_id)
        try:
            with bound(run_id=run_id, request_id=request_id):
                async with isolated("reinjection.failed"):
                    if self.claims is not None and not await self.claims.hold(claim, CLAIM_S):
                        return  # another live controller reinjects it now
                    try:
                        request = await self.requests.get(run_id, request_id)
                        if request is not None and request.state == "corrected":
                            await self._reinject(request)
                    finally:
                        if self.claims is not None:
                            await self.claims.let_go(claim)
        finally:
            self.in_progress.discard(request_id)

    async def _reinject(self, request: CoachingRequest) -> None:
        graph = await self.store.lineage(request.run_id, request.candidate_id)
        if graph is None:
            await self._end(request, "error", "the run's graph is gone")
            return
        if graph.state != "active":
            await self._end(request, "abandoned", f"the run is {graph.state}: no branch to add")
            return
        if any(p.reinjection_point_id == RECOVERY_POINT for p in request.proposals):
            await self.store.add_following(graph, request.selected_id)
        attempts: list[int] = []
        reasons: list[str] = []
        for index, proposal in enumerate(request.proposals):
            point = proposal.reinjection_point_id
            anchor = anchor_of(graph, request, point)
            if anchor is None:
                self.metrics.inc(REINJECTIONS, request.route, "no_anchor")
                reasons.append(f"no anchor for the {point} point")
                continue
            try:
                attempt = await self._branch(request, graph, anchor, proposal)
            except AgentCallError as error:
                self.metrics.inc(REINJECTIONS, request.route, "agent_error")
                reasons.append(f"the agent's reinjected answer: {error.reason}")
                continue
            except BudgetSpent as spent:
                self.metrics.inc(REINJECTIONS, request.route, "budget_spent")
                reasons.append(str(spent))
                continue
            except BranchRefused as refused:  # the run ended meanwhile
                self.metrics.inc(REINJECTIONS, request.route, "run_closed")
                reasons.append(str(refused))
                continue
            self.metrics.inc(REINJECTIONS, request.route, "branched")
            # The first branch turns the request's pending slot into its completed attempt;
            # any further one is recorded as an attempt of its own.
            slot = request.request_id if index == 0 else f"{request.request_id}|{point}"
            await self.limits.complete(request.run_id, request.stage_id, slot, attempt)
            attempts.append(attempt)
        if not attempts:
            await self._end(request, "abandoned", "; ".join(reasons) or "no proposal to reinject")
            return
        reinjected = request.moved("reinjected", "; ".join(reasons) or None, attempt_ids=attempts)
        if await self.requests.move(request, reinjected):
            log.info("coaching.reinjected", attempts=attempts, route=request.route)

    async def _branch(
        self, request: CoachingRequest, graph: RunGraph, anchor: Anchor, proposal: CoachingProposal
    ) -> int:
        point = proposal.reinjection_point_id
        _, candidate_id = node_ids(request, point)
        answer = await self.recorder.recorded_answer(request.run_id, candidate_id)
        attempt = await self.recorder.attempt_id(request, point)
        if answer is None:
            claim = alternative_claim(request.request_id, point)
            budget = (await self.budgets.current()).max_alternatives_per_situation
            granted, taken = await self.recorder.claim_alternative(
                request.run_id, claim, anchor.situation, budget
            )
            if not granted:
                raise BudgetSpent(
                    f"the situation's exploration budget is spent ({taken} of {budget})"
                )
            try:
                answer = await self._ask(graph.started.agent_url, request, anchor, proposal)
                await self.recorder.record(request, graph, anchor, proposal, answer, attempt)
            except (AgentCallError, BranchRefused):
                await self.recorder.release_alternative(request.run_id, claim)
                raise
            return attempt
        await self.recorder.record(request, graph, anchor, proposal, answer, attempt)
        return attempt

    async def _ask(
        self, agent_url: str, request: CoachingRequest, anchor: Anchor, proposal: CoachingProposal
    ) -> AgentOutput:
        written_here = request.human or request.route == "text_rewrite"
        reads_source = written_here and (await self.registry.coaching(request.run_id)).reads_source
        payload = payload_sent(
            proposal.extra_keys, written_here=written_here, reads_source=reads_source
        )
        call = AgentRequest(
            request_id=f"{request.request_id}|{proposal.reinjection_point_id}",
            inputs=[coached_input(anchor.situation.input, payload)],
        )
        limiter = self._per_agent.setdefault(
            agent_url, anyio.CapacityLimiter(AGENT_CALLS_PER_AGENT)
        )
        agent = AgentClient(agent_url, self.http)
        for attempt in range(1, AGENT_TRIES + 1):
            try:
                async with limiter:
                    return (await agent.respond(call)).root[0]
            except AgentCallError as error:
                if attempt == AGENT_TRIES or not error.retryable:
                    raise  # an answer that breaks the protocol will not improve
                wait_s = self.retry_wait_s * 2 ** (attempt - 1)
                log.warning(
                    "reinjection.retry", attempt=attempt, wait_s=wait_s, reason=error.reason
                )
                await anyio.sleep(wait_s)
        raise AssertionError("unreachable")

    async def _end(self, request: CoachingRequest, state: RequestState, reason: str) -> None:
        if await self.requests.move(request, request.moved(state, reason)):
            log.info("coaching.ended", state=state, reason=reason, route=request.route)

    async def outcome(
        self, run_id: str, attempts: list[int], stage_end: StageEnd, stage_id: int
    ) -> None:
        """A trajectory through these attempts ended stage `stage_id`: prove them, or not.

        Only the attempts made in that stage are concerned (MAGMA-GEN keeps the attempts
        awaiting success per stage): a later stage's end says nothing of an earlier
        stage's corrections.

        A reconciliation pass may mark the request executed between the read and the
        write (it saw the branch's candidate executed): the outcome then applies to the
        request as it now stands, so that no proof is lost.
        """
        for attempt in attempts:
            owner = await self.recorder.attempt_owner(run_id, attempt)
            if owner is None:
                continue
            with bound(run_id=run_id, request_id=owner[0]):
                for _ in range(OUTCOME_TRIES):
                    request = await self.requests.get(run_id, owner[0])
                    if request is None or request.state not in ("reinjected", "executed"):
                        break
                    if request.stage_id != stage_id:
                        break
                    if await self._outcome(request, attempt, stage_end):
                        break

    async def _outcome(self, request: CoachingRequest, attempt: int, stage_end: StageEnd) -> bool:
        """Record the outcome on `request`; False if it had moved since it was read."""
        if request.state == "reinjected":  # an outcome means the branch was executed
            executed = request.moved("executed")
            if not await self.requests.move(request, executed):
                return False
            request = executed
        if stage_end.event == "success":
            proven = request.moved("proven", f"attempt {attempt}")
            if not await self.requests.prove(request, proven, attempt):
                return False
            row = funnel_row(request.route, request.human)
            self.metrics.inc(PROOFS, row, "proven")
            log.info("coaching.proven", attempt=attempt, route=request.route)
            await self._register_example(request)
            return True
        # Another trajectory of the branch may still succeed: the request stays executed,
        # noting why, until its run ends (`runends.end_of_run`).
        reason = f"attempt {attempt}: a trajectory ended in {stage_end.event}"
        return await self.requests.move(request, request.model_copy(update={"reason": reason}))

    async def _register_example(self, request: CoachingRequest) -> None:
        graph = await self.store.lineage(request.run_id, request.candidate_id)
        if graph is not None:
            steps = trajectory(graph, request.candidate_id)
            await self.examples.proven(request, graph, steps)

    async def executed(self, run_id: str, request: CoachingRequest) -> None:
        """Mark a reinjected request executed once the generator executed its branch."""
        for point in {p.reinjection_point_id for p in request.proposals}:
            _, candidate_id = node_ids(request, point)
            storage_id = await self.store.storage_id(run_id, candidate_id)
            if storage_id is not None and await self.store.executed(run_id, storage_id):
                # Only from `reinjected`: an outcome handled meanwhile has moved it on.
                await self.requests.move(request, request.moved("executed"))
                return


class BudgetSpent(Exception):  # noqa: N818 - a signal, not a failure
    """The anchor situation already has its maximum of coached alternatives."""
