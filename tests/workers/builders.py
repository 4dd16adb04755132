"""Jobs, settings and helpers for the worker-job tests."""

from __future__ import annotations

from typing import Any

import anyio
import redis
import redis.asyncio

from gencoach.config.settings import Limits, Settings
from gencoach.constants import RESULT_FIELD, Keys
from gencoach.limits import StageCounts, StageLimits
from gencoach.protocol.jobs import (
    DiagnosisJob,
    ExampleCase,
    JobResult,
    LeaseRef,
    RepairJob,
    RewriteJob,
)

RUN = "run-7"
STAGE: dict[str, Any] = {"id": 2, "goal": "press sw4", "hint": "sw4 is on the left wall"}
FAILURE_ANSWER = {
    "decision_index": 2,
    "reason": "pressed sw0 first",
    "expected_decision": {"say": "sw4", "tool_calls": []},
}


def press(button: str, robot: str = "panda") -> dict[str, Any]:
    """A decision pressing one button."""
    call = {"name": "press_button", "arguments": {"id": button}, "target_robot_name": robot}
    return {"say": "", "tool_calls": [call]}


def executed(button: str, flag: str = "none", reason: str | None = None) -> dict[str, Any]:
    """The per-robot execution of a press, with its error flag and failure reason."""
    return {
        "panda": {
            "tool_calls": [{"name": "press_button", "arguments": {"id": button}}],
            "error_flag": flag,
            "failure_reason": reason,
        }
    }


def step(
    step_id: int,
    button: str,
    *,
    instruction: str = "",
    flag: str = "none",
    reason: str | None = None,
    diagnosable: bool = True,
) -> dict[str, Any]:
    """One trajectory step as JSON: a user instruction (or env feedback), a press, its result."""
    kind, content = ("user", instruction) if instruction else ("env", f"feedback {step_id}")
    return {
        "id": step_id,
        "input": {"id": step_id, "instruction": {"type": kind, "content": content}},
        "output": press(button),
        "execution": executed(button, flag, reason),
        "diagnosable": diagnosable,
    }


def three_steps() -> list[dict[str, Any]]:
    """A validated prefix step (11), then two diagnosable steps (12, 13), the last failing."""
    return [
        step(11, "sw1", instruction="press sw4", diagnosable=False),
        step(12, "sw0"),
        step(13, "sw9", flag="bad_call", reason="sw9 does not exist"),
    ]


def lease(request_id: str = "req-1", lease_s: float = 30.0) -> dict[str, Any]:
    """A lease reference on the test stage."""
    return {"run_id": RUN, "stage_id": STAGE["id"], "request_id": request_id, "lease_s": lease_s}


def diagnosis_job(**changes: Any) -> DiagnosisJob:
    """A multi-step failure diagnosis job on backend `coach`, changed as given."""
    request_id = changes.pop("request_id", "req-1")
    data: dict[str, Any] = {
        "request_id": request_id,
        "run_id": RUN,
        "route": "failure",
        "backend": "coach",
        "lease": lease(request_id, changes.pop("lease_s", 30.0)),
        "stage": STAGE,
        "task_description": "open the door",
        "active_errors": [{"code": "E_WALL", "description": "the left wall is locked"}],
        "failure_reason": "panda: sw9 does not exist",
        "trajectory": three_steps(),
        **changes,
    }
    return DiagnosisJob.parse(data)


def example(number: int) -> ExampleCase:
    """A validated example case whose texts carry its number."""
    return ExampleCase(
        stage_goal=f"goal {number}",
        trajectory=f"DECISION 1: case {number}",
        decision_index=1,
        reason=f"reason {number}",
        expected_decision=f"fix {number}",
    )


def rewrite_job(**changes: Any) -> RewriteJob:
    """A text rewrite job on backend `coach`."""
    data: dict[str, Any] = {
        "request_id": "req-1",
        "run_id": RUN,
        "backend": "coach",
        "lease": lease(),
        "stage": {"id": 2, "goal": "tell the user which button opens the door"},
        "rejected_answer": "Press any button.",
        "rejection_reason": "the answer names no button",
        **changes,
    }
    return RewriteJob.parse(data)


def repair_job(agent_url: str, **changes: Any) -> RepairJob:
    """A failure repair job for the agent at `agent_url`, targeting step 13."""
    steps = [{k: v for k, v in s.items() if k != "diagnosable"} for s in three_steps()]
    coaching = {
        "run_id": RUN,
        "request_id": "req-1",
        "kind": "failure",
        "stage": STAGE,
        "diagnosis": {"explanation": "pressed sw9", "expected_decision": "press sw4"},
        "target_step_id": 13,
        "trajectory": steps,
        "reinjection_points": [{"id": "replacement", "input_step_id": 13}],
    }
    data: dict[str, Any] = {
        "request_id": "req-1",
        "run_id": RUN,
        "agent_url": agent_url,
        "lease": lease(),
        "coaching": coaching,
        "timeout_s": 10.0,
        **changes,
    }
    return RepairJob.parse(data)


def settings_data(endpoint: str, **sections: Any) -> dict[str, Any]:
    """A settings document with one OpenAI-compatible backend `coach` at `endpoint`."""
    coach = {
        "type": "openai",
        "endpoint": endpoint,
        "default_model": "coach-model",
        "timeout_s": 10.0,
        "max_retries": 0,
    }
    return {"backends": {"coach": coach}, "log": {"format": "json"}, **sections}


def settings_for(endpoint: str, **sections: Any) -> Settings:
    """Settings with the backend `coach` at `endpoint` (see `settings_data`)."""
    return Settings.model_validate(settings_data(endpoint, **sections))


def admit(redis_url: str, ref: LeaseRef) -> None:
    """Admit the lease's request to its stage's limits, as the controller does before enqueuing."""

    async def go() -> None:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            limits = StageLimits(client, Keys())
            admission = await limits.admit(
                ref.run_id, ref.stage_id, ref.request_id, Limits(), ref.lease_s
            )
            assert admission.admitted, admission.reason
        finally:
            await client.aclose()

    anyio.run(go)


def release(redis_url: str, ref: LeaseRef) -> None:
    """Take the lease's slot back, as a controller reclaiming it does."""

    async def go() -> None:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            await StageLimits(client, Keys()).release(ref.run_id, ref.stage_id, ref.request_id)
        finally:
            await client.aclose()

    anyio.run(go)


def counts(redis_url: str, ref: LeaseRef) -> StageCounts:
    """The lease's stage counts now."""

    async def go() -> StageCounts:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            return await StageLimits(client, Keys()).counts(ref.run_id, ref.stage_id)
        finally:
            await client.aclose()

    return anyio.run(go)


def results(client: redis.Redis) -> list[JobResult]:
    """Every JobResult published on the results stream, in order."""
    entries: list[tuple[bytes, dict[bytes, bytes]]] = client.xrange(Keys().results)  # type: ignore[assignment]
    return [JobResult.parse_json(fields[RESULT_FIELD.encode()]) for _, fields in entries]
