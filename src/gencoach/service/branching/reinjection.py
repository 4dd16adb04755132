"""Reinjection and outcomes: corrected requests become branches; branches prove attempts.

`Reinjector` reinjects a corrected request's proposals through the agent (`reinject`),
records each as a branch and an order (`BranchRecorder`), and proves the attempts whose
trajectories end their stage (`outcome`). The request states this moves: docs/coaching.md.
"""

from __future__ import annotations

import math
import time

import anyio
import httpx
from anyio.abc import TaskGroup, TaskStatus

from gencoach.agent_client import AGENT_RETRY, AgentClient, agent_unreachable
from gencoach.errors import AgentCallError
from gencoach.funnel import funnel_row
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
from gencoach.runtime.logs import bound, get_logger
from gencoach.runtime.retrying import RetryPolicy
from gencoach.service.branching.coached_branches import (
    Anchor,
    BranchRecorder,
    BranchRefused,
    anchor_of,
    coached_request_id,
    node_ids,
    proposal_key,
)
from gencoach.service.branching.examples import Examples
from gencoach.service.coaching.budgets import Budgets
from gencoach.service.coaching.decider import (
    BranchesRecorded,
    CandidateExecuted,
    StageEnded,
    Unbranchable,
)
from gencoach.service.coaching.registry import AgentRegistry
from gencoach.service.coaching.requests import CoachingRequest, RequestStore
from gencoach.service.isolation import guarded, isolated
from gencoach.service.leases import Lease
from gencoach.service.store.graphstore import GraphStore
from gencoach.service.store.nodes import RunGraph
from gencoach.service.store.trajectory import trajectory

log = get_logger("reinjection")

# An agent unreachable or overloaded while a proposal is reinjected is asked again.
AGENT_CALLS_PER_AGENT = 4
# A corrected request not reinjected after this long lost its reinjection (a crash): the
# reconciler of any controller takes it over. Younger, it is its corrector's alone.
STALE_S = 5.0
# The longest one controller holds a request's reinjection (its claim is let go when
# done, and taken over at once if the controller dies): longer than any reinjection.
CLAIM_S = 600.0


class Reinjector:
    """Turns corrected requests into branches, and branch outcomes into proofs.

    Each proposal is reinjected through the agent's own endpoint (`POST /v1/responses`)
    on a copy of its anchor's input whose `extra_keys["coaching"]` is the proposal's
    `extra_keys`, verbatim, as MAGMA-GEN does; calls are bounded per agent, retried as
    `AGENT_RETRY` says, then abandoned with the reason. Each becomes a recorded branch and
    an order for the generator, and the request's pending slot a completed attempt. When
    a trajectory holding an attempt id reaches stage success the attempt is proven, once;
    when it fails again it stays executed until its run ends, then unproven.
    """

    def __init__(
        self,
        store: GraphStore,
        requests: RequestStore,
        recorder: BranchRecorder,
        http: httpx.AsyncClient,
        budgets: Budgets,
        examples: Examples,
        registry: AgentRegistry,
        retry: RetryPolicy = AGENT_RETRY,
        metrics: MetricsRecorder | None = None,
        claims: Lease | None = None,
    ) -> None:
        self.metrics = metrics or MetricsRecorder()
        self.store = store
        self.requests = requests
        self.recorder = recorder
        self.http = http
        self.budgets = budgets
        self.examples = examples
        self.registry = registry
        self.retry = retry
        self.claims = claims
        self.in_progress: set[str] = set()
        self._per_agent: dict[str, anyio.CapacityLimiter] = {}
        # Corrected requests waiting for `run` to start their reinjection; kept in memory
        # until then (a crash loses only the wake-up: the reconciler reinjects them).
        self._corrected_in, self._corrected_out = anyio.create_memory_object_stream[
            tuple[CoachingRequest, bool]
        ](math.inf)
        # Requests whose branch the generator executed, waiting to be marked so (in memory:
        # a crash loses the mark, not the outcome, which the run's end settles).
        self._executed_in, self._executed_out = anyio.create_memory_object_stream[tuple[str, str]](
            math.inf
        )
        # Executed while this controller was still reinjecting them: marked once it is done.
        self._executed_early: set[str] = set()

    def submit(self, request: CoachingRequest, *, written: bool = False) -> None:
        """Reinject a corrected request soon, beside every other run's (never blocks).

        `written`: the submitter has just stored this copy, in the step that corrected it,
        so it is reinjected as it is; any other copy is read again once the reinjection is
        held (another controller may have reinjected it since it was read)."""
        self._corrected_in.send_nowait((request, written))

    def close(self) -> None:
        """Close what `run` reads: submissions and marks (of a reinjector never run)."""
        self._corrected_in.close()
        self._corrected_out.close()
        self._executed_in.close()
        self._executed_out.close()

    def executed(self, run_id: str, candidate_id: str) -> None:
        """The generator executed a candidate (intake applied it): a coached candidate's
        request is marked `executed` soon, beside everything else (never blocks)."""
        request_id = coached_request_id(candidate_id)
        if request_id is not None:
            self._executed_in.send_nowait((run_id, request_id))

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Start each submitted reinjection as its own task (bounded per agent, not overall:
        one run's slow agent never holds up another's), and each executed branch's mark,
        until cancelled."""
        reinject = guarded("reinjection.failed", self.reinject)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._marks, tasks)
            task_status.started()
            async for request, written in self._corrected_out:
                tasks.start_soon(reinject, request, written)

    async def _marks(self, tasks: TaskGroup) -> None:
        mark = guarded("reinjection.mark_failed", self._mark_executed)
        async for run_id, request_id in self._executed_out:
            tasks.start_soon(mark, run_id, request_id)

    async def _mark_executed(self, run_id: str, request_id: str) -> None:
        """Mark a reinjected request executed (its reinjection under way here: once done).

        A request still `corrected` here was reinjected by another controller that has not
        recorded its move yet: it stays `reinjected` until its stage or its run ends, which
        settle it as its graph says."""
        if request_id in self.in_progress:
            self._executed_early.add(request_id)
            return
        request = await self.requests.get(run_id, request_id)
        if request is not None and request.state == "reinjected":
            with bound(run_id=run_id, request_id=request_id):
                await self.requests.apply(request, CandidateExecuted())

    async def reinject(self, request: CoachingRequest, written: bool = False) -> None:
        """Reinject every proposal of a corrected request (idempotent; one at a time each,
        across controllers: one that holds the request's reinjection and lives does it).

        A copy just `written` by its submitter is reinjected as it is while younger than
        `STALE_S`, before which no other controller takes a corrected request over; any
        other copy is read again once the reinjection is held."""
        run_id, request_id = request.run_id, request.request_id
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
                        age_s = time.time() - request.history[-1].at if request.history else 0.0
                        fresh = written and age_s < STALE_S
                        current = request if fresh else await self.requests.get(run_id, request_id)
                        if current is not None and current.state == "corrected":
                            await self._reinject(current)
                    finally:
                        if self.claims is not None:
                            await self.claims.let_go(claim)
        finally:
            self.in_progress.discard(request_id)
            if request_id in self._executed_early:  # a branch ran before its move was stored
                self._executed_early.discard(request_id)
                self._executed_in.send_nowait((run_id, request_id))

    async def _reinject(self, request: CoachingRequest) -> None:
        graph = await self.store.lineage(request.run_id, request.candidate_id)
        if graph is None:
            await self.requests.apply(request, Unbranchable("the run's graph is gone", error=True))
            return
        if graph.state != "active":
            why = f"the run is {graph.state}: no branch to add"
            await self.requests.apply(request, Unbranchable(why))
            return
        if any(p.reinjection_point_id == RECOVERY_POINT for p in request.proposals):
            await self.store.add_following(graph, request.selected_id)
        attempts: list[int] = []
        points: list[str] = []
        reasons: list[str] = []
        for proposal in request.proposals:
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
            attempts.append(attempt)
            points.append(point)
        # The branches' slots become completed attempts in the same step (`decider`).
        recorded = BranchesRecorded(tuple(attempts), tuple(points), "; ".join(reasons) or None)
        applied = await self.requests.apply(request, recorded)
        if applied.stored and attempts:
            log.info("coaching.reinjected", attempts=attempts, route=request.route)

    async def _branch(
        self, request: CoachingRequest, graph: RunGraph, anchor: Anchor, proposal: CoachingProposal
    ) -> int:
        point = proposal.reinjection_point_id
        _, candidate_id = node_ids(request, point)
        attempt, drawn_now = await self.recorder.attempt_id(request, point)
        answer = None
        if not drawn_now:  # reinjected again (after a crash): its branch may be recorded
            answer = await self.recorder.recorded_answer(request.run_id, candidate_id)
        if answer is None:
            claim = proposal_key(request.request_id, point)
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
        async for attempt in self.retry.retrying(on=agent_unreachable, log_as="reinjection.retry"):
            with attempt:  # an answer that breaks the protocol will not improve: not retried
                async with limiter:
                    return (await agent.respond(call)).root[0]
        raise AssertionError("unreachable: stamina either returns or raises")

    async def outcome(
        self, run_id: str, attempts: list[int], stage_end: StageEnd, stage_id: int
    ) -> None:
        """A trajectory through these attempts ended stage `stage_id`: prove them, or not.

        Only the attempts made in that stage are concerned (MAGMA-GEN keeps the attempts
        awaiting success per stage): a later stage's end says nothing of an earlier
        stage's corrections.
        """
        success = stage_end.event == "success"
        for attempt in attempts:
            owner = await self.recorder.attempt_owner(run_id, attempt)
            if owner is None:
                continue
            request = await self.requests.get(run_id, owner[0])
            if request is None or request.stage_id != stage_id:
                continue
            with bound(run_id=run_id, request_id=request.request_id):
                ended = StageEnded(attempt, success, stage_end.event)
                applied = await self.requests.apply(request, ended)
                if applied.stored and applied.request.state == "proven":
                    proven = applied.request
                    self.metrics.inc(PROOFS, funnel_row(proven.route, proven.human), "proven")
                    log.info("coaching.proven", attempt=attempt, route=proven.route)
                    await self._register_example(proven)

    async def _register_example(self, request: CoachingRequest) -> None:
        graph = await self.store.lineage(request.run_id, request.candidate_id)
        if graph is not None:
            steps = trajectory(graph, request.candidate_id)
            await self.examples.proven(request, graph, steps)


class BudgetSpent(Exception):  # noqa: N818 - a signal, not a failure
    """The anchor situation already has its maximum of coached alternatives."""
