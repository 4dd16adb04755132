"""Find the decision to correct: a deterministic rule for one candidate, else ask a backend.

`diagnose` names the step to correct and the expected decision, by `single_step_verdict`
when one step is diagnosable and by a contract-checked backend answer otherwise;
`choose_examples` picks the example cases its prompt shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from gencoach.errors import BackendAnswerError
from gencoach.protocol.base import JsonObject
from gencoach.protocol.decision_text import decision_line
from gencoach.protocol.jobs import Diagnosis, DiagnosisJob, ExampleCase, JobStep
from gencoach.protocol.llm import CaseSelectionAnswer
from gencoach.runtime.logs import get_logger
from gencoach.workers.backends import Backend
from gencoach.workers.contracts import failure_contract, suboptimal_contract
from gencoach.workers.prompts import (
    MAX_EXAMPLES,
    failure_messages,
    selection_messages,
    suboptimal_messages,
)
from gencoach.workers.transcripts import Transcript

log = get_logger("diagnosis")

# What the single-step rule says when the stage end carries no failure reason.
STAGE_ENDS = {
    "failure": "The stage failed on this decision, its only diagnosable one.",
    "no_action": "The stage stopped without an executable action after this decision.",
    "exceeded": "The stage ran out of decisions; this is its only diagnosable one.",
    "suboptimal": (
        "The stage succeeded with more decisions than its target, and this is its only "
        "diagnosable decision."
    ),
}
# The fix the single-step rule recommends (MAGMA-GEN's deterministic rules, reworded).
RULE_FIXES = {
    "failure": "Check that the tool is the right one and choose arguments that serve the goal.",
    "no_action": "Call the tool the stage goal needs, with valid arguments, instead of stopping.",
    "exceeded": (
        "Take the most direct valid action from the current state, without repeating an "
        "action that does not advance the stage goal."
    ),
}
NOTHING_TO_IMPROVE = "the backend found no decision that could have been spared"


@dataclass(frozen=True)
class Verdict:
    """A diagnosis (`done`), or a suboptimal trajectory with nothing to fix (`declined`)."""

    status: Literal["done", "declined"]
    diagnosis: Diagnosis | None = None
    reason: str | None = None


def diagnosable_steps(job: DiagnosisJob) -> list[JobStep]:
    """The steps the diagnosis may select, in order: decision k is the k-th of them."""
    return [step for step in job.trajectory if step.diagnosable]


def single_step_verdict(job: DiagnosisJob, step: JobStep) -> Verdict:
    """The deterministic diagnosis of a trajectory with one diagnosable step."""
    reason = (job.failure_reason or "").strip()
    suboptimal = job.route == "suboptimal"
    diagnosis = Diagnosis(
        step_id=step.id,
        decision_index=1,
        explanation=STAGE_ENDS[job.route] if suboptimal or not reason else reason,
        expected_decision=None if suboptimal else RULE_FIXES[job.route],
        rule="single_step",
    )
    return Verdict("done", diagnosis)


async def diagnose(
    job: DiagnosisJob, backend: Backend, transcript: Transcript, context: JsonObject | None = None
) -> Verdict:
    """Diagnose the job's trajectory; raises BackendError when the backend gives no answer.

    With one diagnosable step there is nothing to choose, so no LLM is called (as
    MAGMA-GEN does). Otherwise the backend answers with a 1-based decision number over
    the diagnosable steps, mapped back to the step's id. The answer is checked by a
    contract made for the request (`gencoach.workers.contracts`): one naming a decision
    that does not exist, or a tool the agent was not offered, is refused like any
    malformed answer, asked again once, and abandoned after a second refusal (with both
    raw answers in the logs). The expected decision, an object or text (MAGMA-GEN's
    form), is handed on as one line of text (`decision_line`), which agents' coaches can
    parse back when it follows the convention.

    `context` is what an in-process backend may know beyond the prompt (default: the job).
    """
    context = context if context is not None else job.model_dump(mode="json")
    steps = diagnosable_steps(job)
    if len(steps) == 1:
        verdict = single_step_verdict(job, steps[0])
        assert verdict.diagnosis is not None
        shown = json.dumps(verdict.diagnosis.model_dump(mode="json"), indent=2)
        transcript.note(
            _coaching_type(job),
            f"# Deterministic diagnosis\n\nRequest `{job.request_id}`, route `{job.route}`: "
            f"one diagnosable decision (step {steps[0].id}), no model call.\n\n"
            f"```json\n{shown}\n```\n",
        )
        return verdict
    examples = await choose_examples(job, backend, transcript)
    if job.route == "suboptimal":
        return await _suboptimal(job, steps, examples, backend, transcript, context)
    contract = failure_contract(steps)
    messages = failure_messages(job, examples)
    answer = await transcript.ask(backend, messages, contract, _coaching_type(job), context)
    expected = answer.expected_decision
    diagnosis = Diagnosis(
        step_id=steps[answer.decision_index - 1].id,
        decision_index=answer.decision_index,
        explanation=answer.reason,
        # The coaching protocol carries it as text, in the convention agents parse back.
        expected_decision=decision_line(expected) if expected is not None else None,
    )
    return Verdict("done", diagnosis)


async def _suboptimal(
    job: DiagnosisJob,
    steps: list[JobStep],
    examples: list[ExampleCase],
    backend: Backend,
    transcript: Transcript,
    context: JsonObject,
) -> Verdict:
    contract = suboptimal_contract(steps)
    messages = suboptimal_messages(job, examples)
    answer = await transcript.ask(backend, messages, contract, _coaching_type(job), context)
    if not answer.suboptimal or answer.decision_idx is None:
        return Verdict("declined", reason=answer.reason.strip() or NOTHING_TO_IMPROVE)
    diagnosis = Diagnosis(
        step_id=steps[answer.decision_idx - 1].id,
        decision_index=answer.decision_idx,
        explanation=answer.reason.strip() or STAGE_ENDS["suboptimal"],
    )
    return Verdict("done", diagnosis)


async def choose_examples(
    job: DiagnosisJob, backend: Backend, transcript: Transcript
) -> list[ExampleCase]:
    """The example cases for the prompt: all of few, else those the backend selects (at most 3).

    A selection the backend cannot give is not worth failing the diagnosis for (MAGMA-GEN
    goes on without examples too); case numbers that do not exist are ignored.
    """
    cases = job.examples
    if len(cases) <= MAX_EXAMPLES:
        return list(cases)
    try:
        answer = await transcript.ask(
            backend, selection_messages(job), CaseSelectionAnswer, "case_selection"
        )
    except BackendAnswerError as error:
        log.warning("diagnosis.selection_ignored", reason=error.reason)
        return []
    known = [number for number in answer.root if number <= len(cases)]
    if len(known) < len(answer.root):
        log.warning("diagnosis.unknown_cases", selected=answer.root, offered=len(cases))
    return [cases[number - 1] for number in known[:MAX_EXAMPLES]]


def _coaching_type(job: DiagnosisJob) -> str:
    return "suboptimal_diagnosis" if job.route == "suboptimal" else "diagnosis"
