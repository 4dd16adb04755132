"""The RQ job functions: one per job kind; every job they do publishes one JobResult.

RQ imports them by path and calls them with the job's JSON payload: `diagnosis_job`,
`repair_job` and `rewrite_job` are what is enqueued, `run_diagnosis` and its siblings the
same in an event loop of their own. `perform` does a job under its lease and time limit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import anyio
import redis.asyncio

from gencoach.agent_client import AGENT_RETRY, AgentClient, agent_unreachable
from gencoach.config.scrubbing import scrub
from gencoach.constants import RESULT_FIELD, Keys
from gencoach.errors import AgentCallError, BackendAnswerError, BackendError, ContractError
from gencoach.followups import announce, await_follow_up
from gencoach.metrics.catalog import JOB_SECONDS, JOBS
from gencoach.protocol.base import decode_json
from gencoach.protocol.coaching import SpecializedCoachingResponse
from gencoach.protocol.jobs import (
    AnyJob,
    Diagnosis,
    DiagnosisJob,
    JobName,
    JobResult,
    RepairJob,
    RewriteJob,
)
from gencoach.runtime.logs import bound, get_logger
from gencoach.workers.backends.python import error_summary
from gencoach.workers.clipping import clip
from gencoach.workers.context import WorkerContext, current_context
from gencoach.workers.diagnosis import diagnose
from gencoach.workers.lease import LeaseHold, hold_lease
from gencoach.workers.prompts import RewriteAnswer, rewrite_messages
from gencoach.workers.resources import JobResources, job_resources
from gencoach.workers.teacher_state import job_context
from gencoach.workers.transcripts import Transcript

log = get_logger("jobs")

UNKNOWN = "unknown"
"""The id an error result carries when the refused payload did not name one."""

JobT = TypeVar("JobT", DiagnosisJob, RepairJob, RewriteJob)
Status = Literal["done", "declined", "abandoned", "error"]
_AGENT_STATUS: dict[str, Status] = {"corrected": "done", "abandoned": "abandoned", "error": "error"}


# What is enqueued. The async worker awaits these on its long-lived event loop with the
# clients it shares among jobs (`resources`); a forked work-horse runs each in a fresh loop
# with clients of its own. Each publishes one `JobResult` on the results stream whatever
# happens: a payload that does not validate, a backend or agent that fails, a lease that
# is lost, a job that outlives `workers.job_timeout_s`. Only a failure to publish (Redis
# gone) raises, so RQ records the job as failed.
async def diagnosis_job(payload: str) -> None:
    """Diagnose a trajectory (a `DiagnosisJob`, on the diagnosis queue), then do the repair
    the controller hands over for it, if any (`gencoach.followups`): two results."""
    await _main("diagnosis", DiagnosisJob, payload, current_context())


async def repair_job(payload: str) -> None:
    """Ask the agent for a correction (a `RepairJob`, on the repair queue)."""
    await _main("repair", RepairJob, payload, current_context())


async def rewrite_job(payload: str) -> None:
    """Rewrite a rejected text-only answer (a `RewriteJob`, on the diagnosis queue)."""
    await _main("rewrite", RewriteJob, payload, current_context())


# The same synchronously, for jobs enqueued under these names.
def run_diagnosis(payload: str) -> None:
    """`diagnosis_job` in an event loop of its own."""
    _run("diagnosis", DiagnosisJob, payload)


def run_repair(payload: str) -> None:
    """`repair_job` in an event loop of its own."""
    _run("repair", RepairJob, payload)


def run_rewrite(payload: str) -> None:
    """`rewrite_job` in an event loop of its own."""
    _run("rewrite", RewriteJob, payload)


@dataclass(frozen=True)
class Outcome:
    """What a job's work produced, before it becomes a JobResult."""

    status: Status
    reason: str | None = None
    diagnosis: Diagnosis | None = None
    coaching: SpecializedCoachingResponse | None = None
    rewrite: str | None = None


def _run(name: JobName, model: type[JobT], payload: str) -> None:
    context = current_context()
    anyio.run(_main, name, model, payload, context, backend="asyncio")


async def _main(name: JobName, model: type[JobT], payload: str, context: WorkerContext) -> None:
    async with job_resources(context) as resources:
        repair = await _do(name, model, payload, resources)
        if repair is not None:
            await _do("repair", RepairJob, repair, resources)


async def _do(
    name: JobName, model: type[JobT], payload: str, resources: JobResources
) -> str | None:
    """Do one job and publish its result. A diagnosis that names a step to repair then
    waits for that repair (`gencoach.followups`) and returns it, to be done in this same
    RQ job; None when there is none to do here."""
    job: AnyJob | None = None
    try:
        job = model.parse_json(payload)
    except ContractError as error:
        log.error("job.refused", job=name, error=str(error))
        result = refused_result(name, payload, error)
        resources.metrics.inc(JOBS, name, "refused")
    else:
        with bound(run_id=job.run_id, request_id=job.request_id):
            result = await perform(job, resources)
    diagnosed = result.status == "done" and result.diagnosis is not None
    waits = isinstance(job, DiagnosisJob) and diagnosed
    keys = resources.context.keys
    with bound(run_id=result.run_id, request_id=result.request_id):
        await publish(resources.redis, keys, result, await_repair=waits)
        if not waits:
            return None
        wait_s = resources.context.follow_up_wait_s
        try:
            return await await_follow_up(
                resources.redis, keys, result.run_id, result.request_id, result.attempt, wait_s
            )
        except redis.RedisError as error:
            # A repair handed over meanwhile lapses with its lease, and is retried.
            log.warning("job.follow_up_unread", error=str(error))
            return None


def refused_result(name: JobName, payload: str, error: ContractError) -> JobResult:
    """The error result for a payload that does not validate, with whatever ids it names."""
    try:
        data: Any = decode_json(payload, name)
    except ContractError:
        data = None
    fields = data if isinstance(data, dict) else {}

    def text(key: str) -> str:
        value = fields.get(key)
        return value if isinstance(value, str) and value else UNKNOWN

    attempt = fields.get("attempt")
    if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
        attempt = 1
    return JobResult(
        request_id=text("request_id"),
        run_id=text("run_id"),
        job=name,
        attempt=attempt,
        status="error",
        reason=f"payload refused: {error}",
    )


async def publish(
    client: redis.asyncio.Redis, keys: Keys, result: JobResult, *, await_repair: bool = False
) -> None:
    """Append the result to the results stream (shielded: a finished job is always reported);
    with `await_repair`, mark this worker waiting for the repair first (`announce`)."""
    try:
        with anyio.CancelScope(shield=True):
            payload = scrub(result.model_dump_json())  # a backend may have echoed a secret
            pipe = client.pipeline(transaction=False)
            if await_repair:
                announce(pipe, keys, result.run_id, result.request_id, result.attempt)
            pipe.xadd(keys.results, {RESULT_FIELD: payload})
            entry = (await pipe.execute())[-1]
    except redis.RedisError as error:
        log.error("job.unpublished", job=result.job, status=result.status, error=str(error))
        raise
    log.info("job.published", job=result.job, status=result.status, entry=_text(entry))


async def perform(job: AnyJob, resources: JobResources) -> JobResult:
    """Do the job within its time limit while holding its lease, and say how it went.

    The lease is renewed while the job works; a lost lease makes the result `abandoned`,
    an expired time limit `error`.
    """
    context = resources.context
    log.info(
        "job.started",
        job=job.job,
        attempt=job.attempt,
        max_attempts=job.max_attempts,
        pid=os.getpid(),
    )
    started = anyio.current_time()
    bounds = context.settings.workers
    transcript = Transcript(bounds.max_log_bytes, bounds.max_logs_per_job)
    outcome: Outcome | None = None
    hold: LeaseHold | None = None
    # A forked work-horse also stops when its worker process dies; an async worker's
    # jobs die with it.
    parent_pid = None if resources.shared else os.getppid()
    with anyio.move_on_after(context.job_timeout_s):
        lease = hold_lease(
            resources.redis,
            context.keys,
            job.lease,
            job.job,
            job.attempt,
            metrics=resources.metrics,
            parent_pid=parent_pid,
        )
        async with lease as held:
            hold = held
            outcome = await _guarded(job, resources, transcript)
    if hold is not None and hold.lost_by is not None:
        outcome = Outcome("abandoned", reason=hold.reason)
    elif outcome is None:
        outcome = Outcome(
            "error", reason=f"the job did not finish within {context.job_timeout_s} s"
        )
    elapsed_s = anyio.current_time() - started
    result = JobResult(
        request_id=job.request_id,
        run_id=job.run_id,
        job=job.job,
        attempt=job.attempt,
        status=outcome.status,
        diagnosis=outcome.diagnosis,
        coaching=outcome.coaching,
        rewrite=outcome.rewrite,
        # An agent's or a backend's words: bounded like the logs.
        reason=clip(outcome.reason, bounds.max_reason_bytes) if outcome.reason else outcome.reason,
        logs=transcript.logs,
        usage=transcript.usage,
        duration_s=max(0.0, elapsed_s),
        record=hold.record if hold is not None else None,
    )
    resources.metrics.inc(JOBS, job.job, result.status)
    resources.metrics.observe(JOB_SECONDS, elapsed_s, job.job)
    log.info(
        "job.finished",
        job=job.job,
        status=result.status,
        reason=result.reason,
        elapsed_s=round(elapsed_s, 3),
        lease_renewals=hold.renewals if hold is not None else 0,
        usage_total=result.usage.total_tokens,  # not `*tokens`: logs redact such keys
    )
    return result


async def _guarded(job: AnyJob, resources: JobResources, transcript: Transcript) -> Outcome:
    try:
        if isinstance(job, RepairJob):
            return await _repair(job, resources, transcript)
        return await _ask_backend(job, resources, transcript)
    except BackendAnswerError as error:
        return Outcome("abandoned", reason=str(error))
    except (BackendError, AgentCallError) as error:
        return Outcome("error", reason=str(error))
    except Exception as error:  # a bug must still end in a result, never in silence
        log.exception("job.crashed", job=job.job)
        return Outcome("error", reason=f"internal error: {error_summary(error)}")


async def _ask_backend(
    job: DiagnosisJob | RewriteJob, resources: JobResources, transcript: Transcript
) -> Outcome:
    backend = await resources.backend(job.backend)
    if backend is None:
        configured = sorted(resources.context.settings.backends)
        reason = f"backend {job.backend!r} is not configured on this worker (it has {configured})"
        return Outcome("error", reason=reason)
    ids = [step.input.id for step in job.trajectory]
    context = await job_context(resources.redis, resources.context.keys, job, ids)
    if isinstance(job, DiagnosisJob):
        verdict = await diagnose(job, backend, transcript, context)
        return Outcome(verdict.status, reason=verdict.reason, diagnosis=verdict.diagnosis)
    messages = rewrite_messages(job)
    answer = await transcript.ask(backend, messages, RewriteAnswer, "text_rewrite", context)
    return Outcome("done", rewrite=answer.say)


async def _repair(job: RepairJob, resources: JobResources, transcript: Transcript) -> Outcome:
    if not resources.context.settings.agent_allowed(job.agent_url):
        reason = f"agent {job.agent_url} is not under the allowed prefixes (setting `agents`)"
        return Outcome("error", reason=reason)
    answer: SpecializedCoachingResponse | None = None
    agent = AgentClient(job.agent_url, resources.http)
    with anyio.move_on_after(job.timeout_s):
        tries = AGENT_RETRY.retrying(on=agent_unreachable, log_as="job.agent_retry")
        async for attempt in tries:
            with attempt:
                answer = await agent.coach(job.coaching)
    if answer is None:
        reason = f"agent {job.agent_url}: no coaching answer within {job.timeout_s} s"
        return Outcome("error", reason=reason)
    for agent_log in answer.logs:
        transcript.keep(agent_log)  # bounded there; the answer need not carry them again
    max_reason = resources.context.settings.workers.max_reason_bytes
    said = clip(answer.reason, max_reason) if answer.reason else answer.reason
    kept = answer.model_copy(update={"logs": [], "reason": said})
    return Outcome(_AGENT_STATUS[answer.status], reason=said, coaching=kept)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
