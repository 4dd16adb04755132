"""Building the workers' jobs from a request and the trajectory that led to it."""

from __future__ import annotations

from collections.abc import Sequence

from gencoach.config.scrubbing import scrub
from gencoach.protocol import (
    RECOVERY_POINT,
    REPLACEMENT_POINT,
    CoachingDiagnosis,
    CoachingStage,
    CoachingStep,
    JsonObject,
    ReinjectionPoint,
    SpecializedCoachingRequest,
    execution_items,
    single_bad_call,
    without_coaching,
)
from gencoach.protocol.jobs import (
    DiagnosisJob,
    ExampleCase,
    JobStep,
    LeaseRef,
    RepairJob,
    RewriteJob,
)
from gencoach.service.coaching.requests import CoachingRequest
from gencoach.service.store.nodes import RunGraph
from gencoach.service.store.trajectory import Step, recovery_situation


def stage_of(step: Step) -> CoachingStage:
    """The coaching view of a step's stage."""
    stage = step.situation.stage
    return CoachingStage(id=stage.id, goal=stage.goal, hint=stage.hint)


def failure_reason(execution: JsonObject) -> str | None:
    """The first non-empty `failure_reason` anywhere in an execution result."""
    for key, value in execution_items(execution):
        if key == "failure_reason" and isinstance(value, str) and value:
            return value
    return None


def job_steps(steps: list[Step]) -> list[JobStep]:
    """The trajectory as jobs see it: storage ids, inputs, answers, executions."""
    return [
        JobStep(
            id=step.candidate.id,
            input=step.situation.input,
            output=step.candidate.output,
            error=step.candidate.reported_error(),
            internal_steps=step.candidate.internal_steps,
            execution=step.execution.execution if step.execution else {},
            status=step.execution.status if step.execution else "ongoing",
            diagnosable=step.diagnosable,
        )
        for step in steps
    ]


def _lease(request: CoachingRequest, lease_s: float) -> LeaseRef:
    return LeaseRef(
        run_id=request.run_id,
        stage_id=request.stage_id,
        request_id=request.request_id,
        lease_s=lease_s,
        record=scrub(request.model_dump_json()),
    )


def _task_text(graph: RunGraph) -> str:
    description = graph.started.task_description
    return description if isinstance(description, str) else description.task_description or ""


def diagnosis_job(
    request: CoachingRequest,
    graph: RunGraph,
    steps: list[Step],
    backend: str,
    lease_s: float,
    examples: Sequence[ExampleCase] = (),
    optimal_trajectory: str | None = None,
) -> DiagnosisJob:
    """The diagnosis of a failed, exceeded, idle or suboptimal trajectory."""
    terminal = steps[-1]
    execution = terminal.execution.execution if terminal.execution else {}
    return DiagnosisJob(
        request_id=request.request_id,
        run_id=request.run_id,
        route=request.route,  # type: ignore[arg-type]
        backend=backend,
        lease=_lease(request, lease_s),
        stage=stage_of(terminal),
        task_description=_task_text(graph),
        active_errors=terminal.situation.active_errors,
        failure_reason=failure_reason(execution),
        trajectory=job_steps(steps),
        examples=list(examples),
        optimal_trajectory=optimal_trajectory,
        attempt=request.attempt,
        max_attempts=request.max_attempts,
    )


def rewrite_job(
    request: CoachingRequest, steps: list[Step], backend: str, lease_s: float
) -> RewriteJob:
    """The rewrite of a text-only stage's failed answer."""
    terminal = steps[-1]
    output = terminal.candidate.output
    execution = terminal.execution.execution if terminal.execution else {}
    return RewriteJob(
        request_id=request.request_id,
        run_id=request.run_id,
        backend=backend,
        lease=_lease(request, lease_s),
        stage=stage_of(terminal),
        rejected_answer=output.say if output is not None else "",
        rejection_reason=failure_reason(execution) or "the stage failed",
        trajectory=job_steps(steps),
        attempt=request.attempt,
        max_attempts=request.max_attempts,
    )


def reinjection_points(
    request: CoachingRequest, graph: RunGraph, selected: Step
) -> list[ReinjectionPoint]:
    """`replacement` at the selected step; `recovery` after it when it was a failure's single
    bad tool call: at its feedback situation, or, when that call ended its stage, at the
    situation built from its terminal status (`recovery_situation`), as MAGMA-GEN offers."""
    points = [ReinjectionPoint(id=REPLACEMENT_POINT, input_step_id=selected.candidate.id)]
    if request.kind == "failure" and single_bad_call(
        selected.candidate.output, selected.execution.execution if selected.execution else None
    ):
        recovery = recovery_situation(graph, selected.candidate.id)
        if recovery is not None:
            points.append(
                ReinjectionPoint(id=RECOVERY_POINT, input=without_coaching(recovery.input))
            )
    return points


def offered_points(
    request: CoachingRequest, graph: RunGraph, steps: list[Step], selected_id: int
) -> list[str]:
    """The ids of the reinjection points a repair of `selected_id` offers."""
    selected = next((step for step in steps if step.candidate.id == selected_id), None)
    if selected is None:
        return [REPLACEMENT_POINT]
    return [point.id for point in reinjection_points(request, graph, selected)]


def repair_job(
    request: CoachingRequest,
    graph: RunGraph,
    steps: list[Step],
    selected_id: int,
    timeout_s: float,
    lease_s: float,
) -> RepairJob:
    """The agent's repair of the selected decision, with the diagnosis when there is one."""
    shown = [step for step in steps if step.in_current_stage]
    selected = next(step for step in shown if step.candidate.id == selected_id)
    diagnosis = None
    if request.diagnosis is not None:
        diagnosis = CoachingDiagnosis(
            explanation=request.diagnosis.explanation,
            expected_decision=request.diagnosis.expected_decision,
        )
    terminal = steps[-1]
    additional: JsonObject = {"type_coaching": request.type_coaching}
    if terminal.candidate.invalid_reason is not None:
        additional["invalid_reason"] = terminal.candidate.invalid_reason
    coaching = SpecializedCoachingRequest(
        run_id=request.run_id,
        request_id=request.request_id,
        kind=request.kind or "failure",
        stage=stage_of(terminal),
        active_errors=terminal.situation.active_errors,
        diagnosis=diagnosis,
        target_step_id=selected_id,
        trajectory=[
            CoachingStep.model_validate(step.model_dump(exclude={"status", "diagnosable"}))
            for step in job_steps(shown)
        ],
        reinjection_points=reinjection_points(request, graph, selected),
        additional_info=additional,
    )
    return RepairJob(
        request_id=request.request_id,
        run_id=request.run_id,
        agent_url=graph.started.agent_url,
        lease=_lease(request, lease_s),
        coaching=coaching,
        timeout_s=timeout_s,
        attempt=request.attempt,
        max_attempts=request.max_attempts,
    )
