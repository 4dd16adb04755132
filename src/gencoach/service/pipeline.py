"""Routing, admission and jobs: opportunities become admitted requests, jobs, answers.

Terminal candidates (from the terminals stream, through the runs' lanes) are routed;
a request the limits admit gets its first job (diagnosis, rewrite, or repair for a
format error); each job's result (from the results stream) moves the request on, to
the repair job or to an end. Every move is a transition of the request's table
(`gencoach.service.coaching.lifecycle`) from the state it was read in, so re-delivered entries,
stale results and a reconciliation pass working from an older copy change nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from redis.asyncio import Redis

from gencoach.config import Settings
from gencoach.constants import CONTROLLER_GROUP, RESULT_FIELD, Keys
from gencoach.errors import ContractError
from gencoach.limits import Admission, StageLimits
from gencoach.logs import bound, get_logger
from gencoach.metrics import MetricsRecorder
from gencoach.metrics.catalog import OPPORTUNITIES
from gencoach.protocol import (
    REPLACEMENT_POINT,
    CoachingProposal,
    ReplaceSay,
)
from gencoach.protocol.jobs import AnyJob, JobName, JobResult
from gencoach.rq_adapter import Backlog, JobState
from gencoach.service.branching.examples import Examples
from gencoach.service.branching.reinjection import Reinjector
from gencoach.service.coaching.budgets import Budgets
from gencoach.service.coaching.lifecycle import RequestState
from gencoach.service.coaching.registry import AgentRegistry
from gencoach.service.coaching.requests import (
    RUNNING,
    CoachingRequest,
    JobRecord,
    RequestStore,
    job_of,
    request_id_for,
)
from gencoach.service.coaching.router import Routed, Skip, route
from gencoach.service.dispatching.job_building import (
    diagnosis_job,
    offered_points,
    repair_job,
    rewrite_job,
)
from gencoach.service.graphs.consumer import Entry
from gencoach.service.graphs.graphstore import GraphStore
from gencoach.service.graphs.nodes import RunGraph, as_text
from gencoach.service.graphs.trajectory import Step, path_attempts, trajectory
from gencoach.service.isolation import isolated

log = get_logger("coach")

# How many times a job's result is applied to its request when another writer moved the
# request in between (at most once more is needed: queued to running).
RESULT_TRIES = 3


class Dispatcher(Protocol):
    """Hands a job to the workers."""

    async def dispatch(self, job: AnyJob) -> None:
        """Enqueue the job."""

    async def job_state(self, request_id: str, job: JobName, attempt: int) -> JobState:
        """Where the job is: waiting on its queue, started by a worker, or ended (or unknown)."""

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
    """Moves coaching requests through their life."""

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

    async def on_terminal(self, run_id: str, gen_candidate_id: str) -> None:
        """Route a terminal candidate; open, admit and dispatch its request.

        The caller has waited for the run's agent registration to end (`TerminalLanes`).
        """
        settings = self.settings()
        if not settings.coaching.enabled:
            return
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
        request = await self.requests.get(run_id, request_id)
        if request is None:
            self.counters.opportunities += 1
            faulty = end.faulty_candidate_id if end is not None else None
            request = CoachingRequest(
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
            await self.requests.create(request)
        if request.state != "opportunity":
            return  # seen before: it has moved on
        with bound(request_id=request_id):
            if isinstance(decision, Skip):
                self.metrics.inc(OPPORTUNITIES, request.route, "skipped", decision.code)
                await self._end(request, "skipped", decision.reason)
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
        queued = _queued(request.moved("admitted"), job_name)
        admission = await self.requests.admit(
            request, queued, await self.budgets.current(), settings.coaching.lease_s
        )
        if admission is None:
            return  # another writer moved it first (a second controller, a re-delivery)
        if not admission.admitted:
            self.counters.refused_by_limits += 1
            refused_by = admission.refused_by or "limits"
            self.metrics.inc(OPPORTUNITIES, request.route, "refused", refused_by)
            await self._end(request, "skipped", f"refused by the stage limits: {admission.reason}")
            return
        self.counters.admitted += 1
        self.metrics.inc(OPPORTUNITIES, request.route, "admitted", "")
        log.info("coaching.admitted", route=request.route, stage=request.stage_id)
        # Built once the request is queued: a crash before the dispatch leaves a queued
        # request whose lease lapses, and the reconciler retries it.
        await self.dispatcher.dispatch(await self._job(queued, steps, graph, settings))

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

    async def started(self, request: CoachingRequest) -> None:
        """Show a queued request as running once a worker has taken its job."""
        if request.state != "queued" or request.job is None:
            return
        running = request.moved(RUNNING[request.job], "a worker took the job")
        if await self.requests.move(request, running):
            log.info("coaching.started", job=request.job, attempt=request.attempt)

    async def retry(self, request: CoachingRequest, reason: str) -> None:
        """Dispatch an in-flight request's job again after its worker was lost, or give up
        once its job was tried `max_attempts` times."""
        if request.attempt >= request.max_attempts:
            tries = "1 attempt" if request.attempt == 1 else f"{request.attempt} attempts"
            await self._end(request, "abandoned", f"{reason}; gave up after {tries}")
            return
        found = await self._steps(request.run_id, request.candidate_id)
        if found is None:
            await self._end(request, "abandoned", f"{reason}; the run's graph is gone")
            return
        steps, graph = found
        settings = self.settings()
        retried = _queued(
            request, job_of(request) or "diagnosis", f"retry: {reason}", attempt=request.attempt + 1
        )
        admission = await self.requests.admit(
            request, retried, await self.budgets.current(), settings.coaching.lease_s
        )
        if admission is None:
            return  # its result arrived meanwhile: nothing to retry
        if not admission.admitted:  # the stage is full now: a later pass tries again
            log.info("coaching.retry_waiting", reason=admission.reason)
            return
        log.warning("coaching.retry", attempt=retried.attempt, reason=reason)
        await self.dispatcher.dispatch(await self._job(retried, steps, graph, settings))

    async def _end(self, request: CoachingRequest, state: RequestState, reason: str) -> bool:
        """End the request (its slot goes back in the same step), unless it moved on; True
        if it ended."""
        if not await self.requests.move(request, request.moved(state, reason)):
            return False
        if state == "skipped":
            self.counters.skipped += 1
        else:
            self.counters.ended += 1
        log.info("coaching.ended", state=state, reason=reason, route=request.route)
        return True

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
        """Move a request on with its job's result; stale or repeated results are ignored.

        The request may move between the read and the write: the reconciler shows a queued
        request running once it sees a worker took the job, which a fast job may already
        have finished. The result then applies to the request as it now stands, while it
        still waits for that result (else the finished work would be lost, and done again
        once the lease lapsed).
        """
        request = await self._awaiting(result)
        if request is None:
            return
        await self.store.add_logs(result.run_id, result.logs, result.request_id)
        for _ in range(RESULT_TRIES):
            if await self._apply(request, result):
                return
            request = await self._awaiting(result)
            if request is None:
                return
        log.warning("coach.result_unapplied", job=result.job, tries=RESULT_TRIES)

    async def _awaiting(self, result: JobResult) -> CoachingRequest | None:
        """The result's request, if it waits for that result (its job and attempt)."""
        request = await self.requests.get(result.run_id, result.request_id)
        if request is None or request.attempt != result.attempt:
            return None
        # A fast job may end before the controller saw it start: its request is still queued.
        waiting = request.state == "queued" and request.job == result.job
        return request if waiting or request.state == RUNNING[result.job] else None

    async def _apply(self, request: CoachingRequest, result: JobResult) -> bool:
        """Move the request with the result; False if it had moved since it was read."""
        record = JobRecord(
            job=result.job,
            attempt=result.attempt,
            status=result.status,
            duration_s=result.duration_s,
        )
        tokens = request.tokens + result.usage.total_tokens
        request = request.model_copy(update={"jobs": [*request.jobs, record], "tokens": tokens})
        if result.status in ("abandoned", "error"):
            return await self._end(request, result.status, result.reason or result.status)
        if result.status == "declined":
            return await self._end(request, "declined", result.reason or "nothing to correct")
        if result.job == "diagnosis" and result.diagnosis is not None:
            return await self._repair(request.model_copy(update={"diagnosis": result.diagnosis}))
        if result.job == "rewrite" and result.rewrite is not None:
            payload = ReplaceSay(text=result.rewrite, decision_source="rewrite").model_dump(
                mode="json"
            )
            proposal = CoachingProposal(reinjection_point_id=REPLACEMENT_POINT, extra_keys=payload)
            return await self._corrected(request, [proposal], rewrite=result.rewrite)
        if result.job == "repair" and result.coaching is not None:
            answer = result.coaching
            if answer.status == "corrected":
                return await self._corrected(request, answer.proposals)
            return await self._end(request, answer.status, answer.reason or answer.status)
        return True  # nothing a result of this shape moves

    async def _repair(self, request: CoachingRequest) -> bool:
        diagnosis = request.diagnosis
        assert diagnosis is not None
        found = await self._steps(request.run_id, request.candidate_id)
        if found is None:
            return await self._end(request, "error", "the run's graph is gone")
        steps, graph = found
        await self.store.add_following(graph, diagnosis.step_id)
        queued = _queued(
            request,
            "repair",
            f"diagnosed step {diagnosis.step_id}",
            offered_points=offered_points(request, graph, steps, diagnosis.step_id),
        )
        if not await self.requests.move(request, queued):
            return False
        await self.dispatcher.dispatch(await self._job(queued, steps, graph, self.settings()))
        return True

    async def _corrected(
        self,
        request: CoachingRequest,
        proposals: list[CoachingProposal],
        rewrite: str | None = None,
    ) -> bool:
        corrected = request.moved("corrected", None, proposals=proposals, rewrite=rewrite)
        if not await self.requests.move(request, corrected):
            return False
        self.counters.corrected += 1
        log.info("coaching.corrected", proposals=len(proposals), route=request.route)
        self.reinjector.submit(corrected)
        return True


def _queued(
    request: CoachingRequest, job: JobName, reason: str | None = None, **changes: object
) -> CoachingRequest:
    """The request waiting for a worker to take its `job`."""
    reason = reason or f"the {job} job waits for a worker"
    return request.moved("queued", reason, job=job, **changes)
