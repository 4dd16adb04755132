"""A privileged teacher for the reference world: exact diagnoses from the saved world states.

`diagnose` is the `python` backend (`gencoach.sim.teacher:diagnose`, docs/running.md);
its docstring says what it sees and how it answers each contract, through
`failure_diagnosis`, `suboptimal_diagnosis`, `rewrite` and `select_cases`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from gencoach.errors import ContractError
from gencoach.protocol.jobs import JobStep
from gencoach.runtime.logs import get_logger
from gencoach.sim.departures import Judgement, judge
from gencoach.sim.episode import Episode, EpisodeState

log = get_logger("sim.teacher")

GENERIC_FIX = "Take the next action the stage goal needs, with valid arguments."
_CASE = re.compile(r"^CASE (\d+)$", re.M)
_LIMIT = re.compile(r"at most (\d+)")


def diagnose(
    messages: Sequence[dict[str, Any]],
    *,
    schema: dict[str, Any] | None = None,
    model: str | None = None,
    context: dict[str, Any] | None = None,
) -> str:
    """Answer the contract `schema` names for the job in `context`, as an LLM would.

    Like the privileged AI teacher of LEAP (Choudhury and Sodhi, "Better than Your
    Teacher: LLM Agents that Learn from Privileged AI Feedback"), it sees what the agent
    cannot: the world state behind every situation, which the reference generator saves
    as each situation's teacher state (one episode state per input id, handed to `python`
    backends in `context["teacher_state"]`, see docs/backends.md), and the stage's optimal
    plans. It serves the reference world only, so the demo and the tests coach with
    meaningful corrections without any model.

    - failure, no_action, exceeded (`FailureDiagnosisAnswer`): the first diagnosable
      decision that departs from every optimal plan from its state (see
      `gencoach.sim.departures`), why, and the optimal next decision from that state as a
      decision object (null when no plan names one);
    - suboptimal (`SuboptimalDiagnosisAnswer`): that first departure, or `false` when
      every decision stayed on an optimal plan (injected failures make no departure);
    - text rewrite (`RewriteAnswer`): the exact answer the text-only stage expects;
    - similar-case selection (`CaseSelectionAnswer`): the first cases, up to the limit.

    Without the states (no context, a run that saved none) it never fails: it blames the
    last diagnosable decision and says it had no privileged state (a suboptimal diagnosis
    declines instead).
    """
    contract = (schema or {}).get("title")
    job = context or {}
    if contract == "CaseSelectionAnswer":
        return json.dumps(select_cases(messages))
    if contract == "RewriteAnswer" or job.get("job") == "rewrite":
        return json.dumps({"say": rewrite(job)})
    if contract == "SuboptimalDiagnosisAnswer" or job.get("route") == "suboptimal":
        return json.dumps(suboptimal_diagnosis(job))
    return json.dumps(failure_diagnosis(job))


def failure_diagnosis(job: dict[str, Any]) -> dict[str, Any]:
    """`{"decision_index", "reason", "expected_decision"}` for a failed, idle or exhausted stage
    (the expected decision as an agent decision object, or null)."""
    steps = _diagnosable(job)
    states, missing = load_states(job, steps)
    found = first_departure(steps, states)
    if found is not None:
        index, judgement = found
        expected = judgement.expected_text
        reason = f"Decision {index} departs from every optimal plan: {judgement.why}."
        if expected is not None:
            reason += f" From that state, the optimal next decision was {expected}."
        else:
            reason += f" {GENERIC_FIX}"
        decision = judgement.expected
        return {
            "decision_index": index,
            "reason": reason,
            "expected_decision": decision.model_dump(mode="json") if decision else None,
        }
    last = max(len(steps), 1)
    why = missing or "no decision departs from an optimal plan from the saved states"
    return {
        "decision_index": last,
        "reason": f"The privileged teacher could not judge the trajectory ({why}); "
        f"it names the last decision. {GENERIC_FIX}",
        "expected_decision": None,
    }


def suboptimal_diagnosis(job: dict[str, Any]) -> dict[str, Any]:
    """`{"suboptimal", "decision_idx", "reason"}` for a stage completed beyond its target."""
    steps = _diagnosable(job)
    states, missing = load_states(job, steps)
    found = first_departure(steps, states)
    if found is None:
        reason = (
            f"The privileged teacher had no saved world state ({missing})."
            if missing
            else "Every decision stayed on an optimal plan; the extra ones followed injected "
            "failures."
        )
        return {"suboptimal": False, "decision_idx": None, "reason": reason}
    index, judgement = found
    reason = f"Decision {index} departs from every optimal plan: {judgement.why}."
    if judgement.expected_text is not None:
        reason += f" From that state, the optimal next decision was {judgement.expected_text}."
    return {"suboptimal": True, "decision_idx": index, "reason": reason}


def rewrite(job: dict[str, Any]) -> str:
    """The exact answer the text-only stage of the rejected step expects."""
    last = _steps(job)[-1:]
    states, _ = load_states(job, last)
    state = states.get(last[0].input.id) if last else None
    plan = Episode.restore(state).optimal_plan() if state is not None else None
    if plan is not None and plan.say:
        return plan.say
    rejected = job.get("rejected_answer")
    return rejected if isinstance(rejected, str) and rejected.strip() else "I do not know."


def select_cases(messages: Sequence[dict[str, Any]]) -> list[int]:
    """The first offered cases, up to the limit the prompt states (3 when it states none)."""
    text = "\n".join(str(message.get("content", "")) for message in messages)
    offered = len(set(_CASE.findall(text)))
    limit = _LIMIT.search(text)
    return list(range(1, min(offered, int(limit[1]) if limit else 3) + 1))


def first_departure(
    steps: Sequence[JobStep], states: dict[int, EpisodeState]
) -> tuple[int, Judgement] | None:
    """The first step (1-based) that departs from an optimal plan, with the judgement."""
    for index, step in enumerate(steps, start=1):
        state = states.get(step.input.id)
        if state is None:
            continue
        judgement = judge(state, step.output)
        if judgement is not None and judgement.departs:
            return index, judgement
    return None


def load_states(
    job: dict[str, Any], steps: Sequence[JobStep]
) -> tuple[dict[int, EpisodeState], str | None]:
    """The teacher states of the steps' situations from the job's context, and why some are
    missing (None: none is)."""
    ids = [step.input.id for step in steps]
    if not ids:
        return {}, "the job names no step"
    saved = job.get("teacher_state")
    if not isinstance(saved, dict):
        return {}, "the context carries no teacher state"
    states: dict[int, EpisodeState] = {}
    for input_id in ids:
        value = saved.get(str(input_id))
        if value is None:
            continue
        try:
            states[input_id] = EpisodeState.model_validate(value)
        except ValidationError:
            log.warning("teacher.state_unreadable", run_id=job.get("run_id"), input_id=input_id)
    if not states:
        return {}, f"no state is saved for run {job.get('run_id')}"
    return states, None


def _steps(job: dict[str, Any]) -> list[JobStep]:
    steps = []
    for raw in job.get("trajectory") or []:
        try:
            steps.append(JobStep.parse(raw))
        except ContractError as error:
            log.warning("teacher.step_unreadable", error=str(error))
    return steps


def _diagnosable(job: dict[str, Any]) -> list[JobStep]:
    return [step for step in _steps(job) if step.diagnosable]
