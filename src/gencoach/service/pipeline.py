"""Routing, admission and jobs: opportunities become admitted requests, jobs, answers.

`CoachingPipeline` routes terminal candidates (`on_terminal`), admits their requests and
dispatches each first job through a `Dispatcher`, and moves a request on with each job's
result (`on_results`), to the repair job or to an end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from redis.asyncio import Redis

from gencoach.config import Settings
from gencoach.constants import CONTROLLER_GROUP, RESULT_FIELD, Keys
from gencoach.errors import ContractError
from gencoach.limits import Admission, StageLimits
from gencoach.metrics import MetricsRecorder
from gencoach.metrics.catalog import OPPORTUNITIES
from gencoach.protocol import (
    REPLACEMENT_POINT,
    CoachingProposal,
    ReplaceSay,
)
from gencoach.protocol.jobs import AnyJob, JobName, JobResult
from gencoach.rq_adapter import Backlog, JobState
from gencoach.runtime.logs import bound, get_logger
from gencoach.service.branching.examples import Examples
from gencoach.service.branching.reinjection import Reinjector
from gencoach.service.coaching.budgets import Budgets
from gencoach.service.coaching.decider import (
    Admitted,
    Dispatch,
    Event,
    JobAnswered,
    Refused,
    Reinject,
    WorkerLost,
)
from gencoach.service.coaching.lifecycle import TERMINAL
from gencoach.service.coaching.registry import AgentRegistry
from gencoach.service.coaching.requests import (
    AdmissionTerms,
    Applied,
    CoachingRequest,
    JobRecord,
    RequestStore,
    request_id_for,
)
from gencoach.service.coaching.router import Routed, Skip, route
from gencoach.service.dispatching.job_building import (
    diagnosis_job,
    offered_points,
    repair_job,
    rewrite_job,
)
from gencoach.service.isolation import isolated
from gencoach.service.store.consumer import Entry
from gencoach.service.store.graphstore import GraphStore
from gencoach.service.store.nodes import RunGraph, as_text
from gencoach.service.store.trajectory import Step, path_attempts, trajectory

log = get_logger("coach")


class Dispatcher(Protocol):
    """Hands a job to the workers."""

    async def dispatch(self, job: AnyJob) -> None:
        """Hand the job to the workers."""

    async def job_state(self, run_id: str, request_id: str, job: JobName, attempt: int) -> JobState:
        """Where the job is: waiting for a worker, started by one, or ended (or unknown)."""

    async def backlogs(self) -> list[Backlog]:
        """Each queue's waiting jobs: how many, the oldest one's wait, the workers on it."""


@dataclass
class CoachCounters:
    """What the coaching loop has done, for status and metrics."""

    opportunities: int = 0
    skipped: int = 0
    admitted: int = 0
    refused_by_limits: int = 0
    corrected: int = 0
    ended: int = 0


class CoachingPipeline:
    """Moves coaching requests through their life.

    A request the limits admit gets its first job (diagnosis, rewrite, or repair for a
    format error). Every move is a transition of the request's table
    (`gencoach.service.coaching.lifecycle`) from the state it was read in, so re-delivered
    entries, stale results and a reconciliation pass working from an older copy change
    nothing.
    """

    def __init__(
        self,
        client: Redis,
        keys: Keys,
        store: GraphStore,
        requests: RequestStore,
        limits: StageLimits,
        registry: AgentRegistry,
        settings: Callable[[], Settings],
        budgets: Budgets,
        dispatcher: Dispatcher,
        reinjector: Reinjector,
        examples: Examples,
        metrics: MetricsRecorder | None = None,
    ) -> None:
        self.client = client
        self.metrics = metrics or MetricsRecorder()
        self.keys = keys
        self.store = store
        self.requests = requests
        self.limits = limits
        self.registry = registry
        self.settings = settings
        self.budgets = budgets
        self.dispatcher = dispatcher
        self.reinjector = reinjector
        self.examples = examples
        self.counters = CoachCounters()

    async def _steps(self, run_id: str, candidate_id: int) -> tuple[list[Step], RunGraph] | None:
        graph = await self.store.lineage(run_id, candidate_id)
        if graph is None:
            return None
        markers = await self.store.markers(run_id, list(graph.candidates))
        return trajectory(graph, candidate_id, markers), graph

    async def on_terminal(
        self, run_id: str, gen_candidate_id: str, storage_id: int | None = None
    ) -> None:
        """Route a terminal candidate (its storage id looked up unless given); open, admit
        and dispatch its request.

        The caller has waited for the run's agent registration to end (`TerminalLanes`).
        """
        settings = self.settings()
        if not settings.coaching.enabled:
            return
        candidate_id = storage_id
        if candidate_id is None:
            candidate_id = await self.store.storage_id(run_id, gen_candidate_id)
        found = await self._steps(run_id, candidate_id) if candidate_id is not None else None
        if found is None or candidate_id is None:
            log.warning("coach.unknown_candidate", candidate_id=gen_candidate_id)
            return
        steps, graph = found
        terminal = steps[-1]
        end = terminal.execution.stage_end if terminal.execution else None
        attempts = path_attempts(graph, candidate_id) if end is not None else []
        if end is not None and attempts:
            await self.reinjector.outcome(run_id, attempts, end, terminal.stage_id)
        if end is not None and (end.event, end.state) == ("success", "optimal"):
            await self.examples.optimal(graph, steps)
        decision = route(steps, await self.registry.coaching(run_id), settings.coaching.routes)
        if decision is None:
            return
        request_id = request_id_for(run_id, candidate_id, decision.route)
        faulty = end.faulty_candidate_id if end is not None else None
        opened = CoachingRequest(
            request_id=request_id,
            run_id=run_id,
            route=decision.route,
            kind=decision.kind if isinstance(decision, Routed) else None,
            type_coaching=decision.type_coaching,
            candidate_id=candidate_id,
            candidate_gen_id=gen_candidate_id,
            stage_id=steps[-1].stage_id,
            state="opportunity",
            max_attempts=settings.coaching.max_attempts,
            faulty_candidate_id=await self.store.storage_id(run_id, faulty) if faulty else None,
            faulty_gen_id=faulty,
        ).moved("opportunity")
        skip = decision if isinstance(decision, Skip) else None
        # Created if new (the usual case needs no read first; a skip is stored skipped in
        # that one write), else read as stored.
        if await self.requests.create(opened, skip.reason if skip else None):
            self.counters.opportunities += 1
            if skip is not None:
                self.metrics.inc(OPPORTUNITIES, opened.route, "skipped", skip.code)
                self.counters.skipped += 1
                return
            request: CoachingRequest | None = opened
        else:
            request = await self.requests.get(run_id, request_id)
        if request is None or request.state != "opportunity":
            return  # seen before: it has moved on
        with bound(request_id=request_id):
            if skip is not None:  # opened when its route was on, routed again by a look
                self.metrics.inc(OPPORTUNITIES, request.route, "skipped", skip.code)
                await self._report(request, Refused(skip.reason))
                return
            await self._admit(request, steps, graph, settings)

    async def _admit(
        self, request: CoachingRequest, steps: list[Step], graph: RunGraph, settings: Settings
    ) -> None:
        job_name: JobName = "diagnosis"
        if request.route == "format":
            job_name = "repair"
        elif request.route == "text_rewrite":
            job_name = "rewrite"
        terms = AdmissionTerms(await self.budgets.current(), settings.coaching.lease_s)
        applied = await self.requests.apply(request, Admitted(job_name), terms)
        admission = applied.admission
        if admission is not None and not admission.admitted:
            self.counters.refused_by_limits += 1
            refused_by = admission.refused_by or "limits"
            self.metrics.inc(OPPORTUNITIES, request.route, "refused", refused_by)
            why = f"refused by the stage limits: {admission.reason}"
            await self._report(applied.request, Refused(why))
            return
        if not applied.stored:
            return  # another writer moved it first (a second controller, a re-delivery)
        self.counters.admitted += 1
        self.metrics.inc(OPPORTUNITIES, request.route, "admitted", "")
        log.info("coaching.admitted", route=request.route, stage=request.stage_id)
        # Built once the request is queued: a crash before the dispatch leaves a queued
        # request whose lease lapses, and the reconciler retries it.
        await self.dispatcher.dispatch(await self._job(applied.request, steps, graph, settings))

    async def admit_lease(self, request: CoachingRequest) -> Admission:
        """Take (or renew) the pending slot of a request whose job waits on its queue,
        under the budgets in force (its record does not change)."""
        return await self.limits.admit(
            request.run_id,
            request.stage_id,
            request.request_id,
            await self.budgets.current(),
            self.settings().coaching.lease_s,
            human=request.human,
        )

    async def _job(
        self, request: CoachingRequest, steps: list[Step], graph: RunGraph, settings: Settings
    ) -> AnyJob:
        """The job a queued request waits for."""
        lease_s = settings.coaching.lease_s
        backend = next(iter(settings.backends))
        if request.job == "diagnosis":
            cases, optimal = await self.examples.for_diagnosis(
                graph, request.route, request.stage_id
            )
            return diagnosis_job(request, graph, steps, backend, lease_s, cases, optimal)
        if request.job == "rewrite":
            return rewrite_job(request, steps, backend, lease_s)
        await self.store.add_following(graph, request.selected_id)
        timeout_s = settings.workers.job_timeout_s
        return repair_job(request, graph, steps, request.selected_id, timeout_s, lease_s)

    async def retry(self, request: CoachingRequest, reason: str) -> None:
        """Dispatch an in-flight request's job again after its worker was lost, or give up
        once its job was tried `max_attempts` times."""
        found = await self._steps(request.run_id, request.candidate_id)
        if found is None:
            await self._report(request, WorkerLost(f"{reason}; the run's graph is gone", False))
            return
        steps, graph = found
        settings = self.settings()
        terms = AdmissionTerms(await self.budgets.current(), settings.coaching.lease_s)
        applied = await self.requests.apply(request, WorkerLost(reason), terms)
        if applied.admission is not None and not applied.admission.admitted:
            # The stage is full now: a later pass tries again.
            log.info("coaching.retry_waiting", reason=applied.admission.reason)
            return
        if applied.decision is None:
            return  # its result arrived meanwhile: nothing to retry
        if applied.request.state != "queued":
            self._ended(applied.request)
            return
        log.warning("coaching.retry", attempt=applied.request.attempt, reason=reason)
        await self.dispatcher.dispatch(await self._job(applied.request, steps, graph, settings))

    async def _report(self, request: CoachingRequest, event: Event) -> Applied:
        """Report an event that may end the request, counting the end it makes."""
        applied = await self.requests.apply(request, event)
        if applied.stored and applied.request.state in TERMINAL:
            self._ended(applied.request)
        return applied

    def _ended(self, request: CoachingRequest) -> None:
        if request.state == "skipped":
            self.counters.skipped += 1
        else:
            self.counters.ended += 1

    async def on_results(self, entries: Sequence[Entry]) -> None:
        """Handle a batch of the results stream, then acknowledge it."""
        for entry_id, fields in entries:
            raw = fields.get(RESULT_FIELD.encode()) if fields else None
            if raw is None:
                continue
            try:
                result = JobResult.parse_json(raw)
            except ContractError as error:
                log.error("coach.bad_result", entry_id=as_text(entry_id), reason=str(error))
                continue
            with bound(run_id=result.run_id, request_id=result.request_id):
                async with isolated("coach.result_failed", job=result.job):
                    await self.on_result(result)
        ids = [entry_id for entry_id, _ in entries]
        await self.client.xack(self.keys.results, CONTROLLER_GROUP, *ids)

    async def on_result(self, result: JobResult) -> None:
        """Move a request on with its job's result; stale or repeated results change
        nothing (the decider refuses a result its request no longer waits for)."""
        request = await self.requests.known_or_stored(
            result.run_id, result.request_id, result.record
        )
        if request is None:
            return
        # A diagnosis is checked against the lineage its repair job is then built from:
        # read once for both.
        found = None
        if result.job == "diagnosis" and result.status == "done" and result.diagnosis is not None:
            found = await self._steps(request.run_id, request.candidate_id)
        event = await self._answered(request, result, found)
        applied = await self._report(request, event)
        if applied.decision is None:
            return
        # The job's logs are kept with an answer that counted, not with a stale repeat.
        await self.store.add_logs(result.run_id, result.logs, result.request_id)
        await self._carry_out(applied, found)

    async def _answered(
        self,
        request: CoachingRequest,
        result: JobResult,
        found: tuple[list[Step], RunGraph] | None,
    ) -> JobAnswered:
        """The event a job's result is: its status, and what the decider needs of it
        (`found`: the request's lineage, for a diagnosis)."""
        record = JobRecord(
            job=result.job,
            attempt=result.attempt,
            status=result.status,
            duration_s=result.duration_s,
        )
        answered = JobAnswered(
            job=result.job,
            attempt=result.attempt,
            record=record,
            tokens=result.usage.total_tokens,
            status=result.status,
            reason=result.reason,
        )
        if result.status != "done":
            return answered
        if result.job == "diagnosis" and result.diagnosis is not None:
            if found is None:
                return replace(answered, status="error", reason="the run's graph is gone")
            steps, graph = found
            step_id = result.diagnosis.step_id
            await self.store.add_following(graph, step_id)
            diagnosed = request.model_copy(update={"diagnosis": result.diagnosis})
            points = offered_points(diagnosed, graph, steps, step_id)
            return replace(answered, diagnosis=result.diagnosis, offered_points=tuple(points))
        if result.job == "rewrite" and result.rewrite is not None:
            payload = ReplaceSay(text=result.rewrite, decision_source="rewrite").model_dump(
                mode="json"
            )
            proposal = CoachingProposal(reinjection_point_id=REPLACEMENT_POINT, extra_keys=payload)
            return replace(
                answered, status="corrected", proposals=(proposal,), rewrite=result.rewrite
            )
        if result.job == "repair" and result.coaching is not None:
            answer = result.coaching
            return replace(
                answered,
                status=answer.status,
                reason=answer.reason,
                proposals=tuple(answer.proposals),
            )
        return answered

    async def _carry_out(
        self, applied: Applied, found: tuple[list[Step], RunGraph] | None = None
    ) -> None:
        """The effects of a stored decision: a job to queue (built from `found`, the
        request's lineage, when the caller read it), a correction to reinject."""
        assert applied.decision is not None
        request = applied.request
        for effect in applied.decision.effects:
            if isinstance(effect, Dispatch):
                if found is None:
                    found = await self._steps(request.run_id, request.candidate_id)
                if found is None:  # the lease lapses and the retry ends it
                    log.warning("coach.dispatch_without_graph", job=request.job)
                    continue
                steps, graph = found
                job = await self._job(request, steps, graph, self.settings())
                await self.dispatcher.dispatch(job)
            elif isinstance(effect, Reinject):
                self.counters.corrected += 1
                log.info(
                    "coaching.corrected", proposals=len(request.proposals), route=request.route
                )
                self.reinjector.submit(request, written=True)
