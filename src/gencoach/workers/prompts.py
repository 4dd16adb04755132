"""What worker jobs ask LLM backends: diagnosis, case selection and text rewrite prompts.

Prompts are module-level templates filled deterministically. A trajectory is written as
MAGMA writes it: user instructions, then `DECISION k` for each decision, then one
`EXECUTION RESULT` line per robot. Diagnosable decisions are numbered 1..n in order
(the numbers the LLM answers with); the others are numbered 0 and cannot be selected.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from gencoach.protocol.agent import AgentDecision
from gencoach.protocol.base import ContractModel
from gencoach.protocol.coaching import CoachingError, CoachingStage
from gencoach.protocol.decision_text import parse_decision
from gencoach.protocol.jobs import DiagnosisJob, ExampleCase, JobStep, RewriteJob
from gencoach.protocol.llm import Text
from gencoach.workers.backends import ChatMessage

MAX_EXAMPLES = 3
"""At most this many example cases go into a diagnosis prompt; more are selected first."""

_COACH = "You are a privileged trajectory coach: you see the whole trajectory and its results."
_PREFIX_RULE = (
    "- Decisions numbered 0 belong to a validated prefix: they are correct and cannot be selected."
)
_JSON_ONLY = "Return exactly one JSON object and nothing else, without Markdown or a code fence:"

FAILURE_SYSTEM = f"""{_COACH}
The agent did not complete its stage goal. Find the EARLIEST decision responsible for
that. Do not repair the trajectory.

Rules:
- A decision is responsible if replacing it, keeping every earlier decision and letting
  later ones change, restores a valid way to the stage goal. Choose the earliest such one.
- Where the failure became visible is not necessarily where it began: a later bad call
  may follow from an earlier wrong commitment.
- A decision that executed successfully can still be wrong (wrong object, robot or
  order, or a prerequisite of a later step left undone).
- An execution flagged injection_error failed by chance: do not select its decision for
  that alone; judge whether the decisions after it recovered.
{_PREFIX_RULE}"""

SUBOPTIMAL_SYSTEM = f"""{_COACH}
The agent completed its stage goal with more decisions than the target. That alone does
not make it suboptimal: chance failures, uncertain feedback and necessary recovery can
justify extra decisions. Decide whether one decision could clearly have been replaced to
reach the SAME goal with fewer decisions, and if so name the EARLIEST one. Do not propose
the replacement.

Rules:
- Judge a decision only by what the agent knew then: its instruction and earlier results.
- Not suboptimal: retries after an injection_error, observations needed to resolve
  uncertain feedback, necessary exploration, appropriate recovery.
- Possibly suboptimal: a needless observation or action, a choice later undone, ignoring
  information already given, a bad call, a skipped prerequisite that forces recovery.
- Do not assume a suboptimal decision exists: when none can be defended, answer false.
{_PREFIX_RULE}"""

SELECTION_SYSTEM = (
    "You choose which stored coaching cases are useful references for diagnosing a new trajectory."
)

REWRITE_SYSTEM = """You correct the answer an agent gave in a text-only stage.
Propose the minimal correction: keep the agent's usual answer style, invent no facts, and
never mention the correction, the rejection or this context to the user."""

ROUTE_ENDINGS = {
    "failure": (
        "The stage failed: the trajectory ended on an invalid or repeated action. That is "
        "where the failure became visible, not necessarily where it began."
    ),
    "no_action": (
        "The stage ended before its goal: the last decision called no tool. The agent "
        "drifted somewhere along the trajectory."
    ),
    "exceeded": (
        "The stage used up its budget of decisions before its goal. Look for ineffective "
        "recovery, needless repetition or missed opportunities; pick the last repeated "
        "decision only if it is the first that made the goal unreachable."
    ),
}

FAILURE_ANSWER = (
    _JSON_ONLY + '\n{{"decision_index": <integer from 1 to {count}>, "reason": "<why this is '
    'the earliest responsible decision>", "expected_decision": <the decision the agent '
    'should have made instead: {{"say": "<words, or empty when it acts>", "tool_calls": '
    '[{{"name": "<one of the offered tools>", "arguments": {{<that tool\'s arguments>}}, '
    '"target_robot_name": "<the robot>"}}]}}, or null when you cannot tell>}}'
)
TOOLS_BLOCK = "OFFERED TOOLS (name and arguments)\n{tools}"
SUBOPTIMAL_ANSWER = (
    _JSON_ONLY + '\n{{"suboptimal": <true or false>, "decision_idx": <integer from 1 to '
    '{count}, or null when false>, "reason": "<concise explanation>"}}'
)
SELECTION_ANSWER = (
    "Return only a JSON array of the numbers of the useful cases, at most {limit}, most "
    "useful first, for example [2, 3]. Return [] when none is useful. No Markdown, no "
    "explanation."
)
REWRITE_ANSWER = _JSON_ONLY + '\n{{"say": "<the corrected answer, as the agent would say it>"}}'

TRAJECTORY_BLOCK = "TRAJECTORY ({count} selectable decisions)\n{trajectory}\nEND OF TRAJECTORY"
OPTIMAL_BLOCK = (
    "REFERENCE EFFICIENT TRAJECTORY\n{optimal}\nEND OF REFERENCE\n"
    "It completed this stage efficiently before; objects, positions and results may "
    "differ, so use it as a reference, not as a rule."
)
EXAMPLES_BLOCK = (
    "VALIDATED SIMILAR CASES\nThese earlier cases were diagnosed correctly. They are "
    "references only: do not copy their decision numbers; analyse the current trajectory "
    "on its own.\n\n{cases}\nEND OF VALIDATED SIMILAR CASES"
)
CASE_BLOCK = (
    "CASE {number}\nSTAGE GOAL\n{goal}\nTRAJECTORY\n{trajectory}\nVALIDATED DIAGNOSIS\n{diagnosis}"
)


class RewriteAnswer(ContractModel):
    """What a text rewrite asks the backend for: the corrected words."""

    say: Text


def decision_numbers(steps: Sequence[JobStep]) -> list[int]:
    """Each step's number in the prompt: 1..n over diagnosable steps, 0 for the others."""
    numbers, count = [], 0
    for step in steps:
        count += step.diagnosable
        numbers.append(count if step.diagnosable else 0)
    return numbers


def format_decision(step: JobStep) -> str:
    """A decision on one line: its words, then each tool call as `robot.tool(arguments)`."""
    if step.output is None:
        if step.error is not None:
            return f"no decision, error {step.error.code}: {step.error.message}"
        return "no decision"
    parts = [f"say {json.dumps(step.output.say, ensure_ascii=False)}"] if step.output.say else []
    for call in step.output.tool_calls:
        arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
        parts.append(f"{call.target_robot_name}.{call.name}({arguments})")
    return "; ".join(parts) or "no tool call and nothing said"


def format_execution(
    execution: Mapping[str, object], decision: AgentDecision | None = None
) -> list[str]:
    """One `EXECUTION RESULT` line per robot status, with its error flag and message when
    it failed. Reads MAGMA-GEN's step summary (`per_robot_status`, its calls matched by
    robot in `decision`, as MAGMA-GEN does) and the per-robot mapping of older saves."""
    statuses = execution.get("per_robot_status")
    if isinstance(statuses, list):
        return _step_summary_lines(statuses, execution, decision)
    lines = []
    for robot, result in execution.items():
        if not isinstance(result, dict):
            lines.append(f"EXECUTION RESULT [{robot}]: {json.dumps(result, ensure_ascii=False)}")
            continue
        calls = result.get("tool_calls")
        first = calls[0] if isinstance(calls, list) and calls else None
        tool = first.get("name") if isinstance(first, dict) else None
        message = result.get("failure_reason") or result.get("message")
        lines.append(_result_line(robot, tool, result.get("error_flag"), message))
    return lines


def _step_summary_lines(
    statuses: list[object], execution: Mapping[str, object], decision: AgentDecision | None
) -> list[str]:
    calls = list(decision.tool_calls) if decision is not None else []
    lines = []
    for status in statuses:
        if not isinstance(status, dict):
            continue
        robot = status.get("robot_name")
        call = next((c for c in calls if c.target_robot_name == robot), None)
        if call is not None:
            calls.remove(call)  # several calls of one robot pair up in order
        message = status.get("mess") if status.get("result") is False else None
        tool = call.name if call else None
        lines.append(_result_line(robot, tool, status.get("error_flag"), message))
    if execution.get("failure_reason"):
        lines.append(f"STAGE FAILED: {execution['failure_reason']}")
    return lines


def _result_line(robot: object, tool: object, flag: object, message: object) -> str:
    line = f"EXECUTION RESULT [{robot}.{tool}]" if tool else f"EXECUTION RESULT [{robot}]"
    if flag not in (None, "none"):
        line += f" ERROR_FLAG={flag}"
    if message:
        line += f"; message={message}"
    return line


def format_trajectory(steps: Sequence[JobStep]) -> str:
    """The trajectory as the LLM reads it (environment feedback shows as execution results)."""
    lines = []
    for position, (number, step) in enumerate(zip(decision_numbers(steps), steps, strict=True)):
        instruction = step.input.instruction
        if instruction.type == "user":
            lines.append(f"INSTRUCTION: {instruction.content}")
        elif position == 0:
            lines.append(f"FEEDBACK: {instruction.content}")
        lines.append(f"DECISION {number}: {format_decision(step)}")
        lines.extend(format_execution(step.execution, step.output))
    return "\n".join(lines)


def format_errors(errors: Sequence[CoachingError]) -> str:
    """The active errors, one `- code: description` line each."""
    return "\n".join(f"- {error.code}: {error.description}" for error in errors)


def format_cases(cases: Sequence[ExampleCase]) -> str:
    """Example cases numbered from 1, each with its goal, trajectory and validated diagnosis."""
    blocks = []
    for number, case in enumerate(cases, start=1):
        # Shown in the shape the answer takes: a decision object when the text is one.
        decision = parse_decision(case.expected_decision)
        diagnosis = {
            "decision_index": case.decision_index,
            "reason": case.reason,
            "expected_decision": decision.model_dump(mode="json")
            if decision is not None
            else case.expected_decision,
        }
        blocks.append(
            CASE_BLOCK.format(
                number=number,
                goal=case.stage_goal,
                trajectory=case.trajectory,
                diagnosis=json.dumps(diagnosis, ensure_ascii=False),
            )
        )
    return "\n\n".join(blocks)


def _context(stage: CoachingStage, task: str = "", errors: Sequence[CoachingError] = ()) -> str:
    sections = [("TASK", task), ("STAGE GOAL", stage.goal), ("HINT", stage.hint or "")]
    sections.append(("ACTIVE ERRORS", format_errors(errors)))
    return "\n\n".join(f"{title}\n{body}" for title, body in sections if body.strip())


def _trajectory(steps: Sequence[JobStep]) -> str:
    count = sum(step.diagnosable for step in steps)
    return TRAJECTORY_BLOCK.format(count=count, trajectory=format_trajectory(steps))


def _tools(steps: Sequence[JobStep]) -> list[str]:
    lines = []
    seen: set[str] = set()
    for step in steps:
        for tool in step.input.tools:
            name, arguments = tool.get("name"), tool.get("arguments")
            if isinstance(name, str) and name not in seen:
                seen.add(name)
                params = ", ".join(arguments) if isinstance(arguments, dict) else ""
                lines.append(f"- {name}({params})")
    return [TOOLS_BLOCK.format(tools="\n".join(lines))] if lines else []


def _examples(cases: Sequence[ExampleCase]) -> list[str]:
    return [EXAMPLES_BLOCK.format(cases=format_cases(cases))] if cases else []


def failure_messages(job: DiagnosisJob, examples: Sequence[ExampleCase]) -> list[ChatMessage]:
    """The prompt diagnosing a failed, idle or exhausted stage (`FailureDiagnosisAnswer`)."""
    ending = ROUTE_ENDINGS[job.route]
    if job.failure_reason:
        ending += f"\nReported failure: {job.failure_reason}"
    count = sum(step.diagnosable for step in job.trajectory)
    parts = [
        _context(job.stage, job.task_description, job.active_errors),
        f"HOW THE STAGE ENDED\n{ending}",
        *_examples(examples),
        _trajectory(job.trajectory),
        *_tools(job.trajectory),
        f"ANSWER\n{FAILURE_ANSWER.format(count=count)}",
    ]
    return [ChatMessage.system(FAILURE_SYSTEM), ChatMessage.user("\n\n".join(parts))]


def suboptimal_messages(job: DiagnosisJob, examples: Sequence[ExampleCase]) -> list[ChatMessage]:
    """The prompt judging a completed but long stage (`SuboptimalDiagnosisAnswer`)."""
    count = sum(step.diagnosable for step in job.trajectory)
    optimal = job.optimal_trajectory
    reference = [OPTIMAL_BLOCK.format(optimal=optimal)] if optimal else []
    parts = [
        _context(job.stage, job.task_description, job.active_errors),
        *reference,
        *_examples(examples),
        _trajectory(job.trajectory),
        f"ANSWER\n{SUBOPTIMAL_ANSWER.format(count=count)}",
    ]
    return [ChatMessage.system(SUBOPTIMAL_SYSTEM), ChatMessage.user("\n\n".join(parts))]


def selection_messages(job: DiagnosisJob, limit: int = MAX_EXAMPLES) -> list[ChatMessage]:
    """The prompt picking the useful example cases (`CaseSelectionAnswer`)."""
    parts = [
        f"CURRENT STAGE GOAL\n{job.stage.goal}",
        f"CURRENT {_trajectory(job.trajectory)}",
        f"STORED CASES\n{format_cases(job.examples)}",
        f"ANSWER\n{SELECTION_ANSWER.format(limit=limit)}",
    ]
    return [ChatMessage.system(SELECTION_SYSTEM), ChatMessage.user("\n\n".join(parts))]


def rewrite_messages(job: RewriteJob) -> list[ChatMessage]:
    """The prompt correcting a rejected text-only answer (`RewriteAnswer`)."""
    parts = [_context(job.stage)]
    if job.trajectory:
        parts.append(_trajectory(job.trajectory))
    parts += [
        f"REJECTED ANSWER\n{job.rejected_answer}",
        f"WHY IT WAS REJECTED\n{job.rejection_reason}",
        f"ANSWER\n{REWRITE_ANSWER.format()}",
    ]
    return [ChatMessage.system(REWRITE_SYSTEM), ChatMessage.user("\n\n".join(parts))]
