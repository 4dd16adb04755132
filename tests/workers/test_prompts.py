"""Diagnosis, case-selection and rewrite prompts: what the LLM reads, exactly."""

from __future__ import annotations

import json

from gencoach.protocol import AgentDecision
from gencoach.protocol.jobs import JobStep
from gencoach.workers.prompts import (
    MAX_EXAMPLES,
    RewriteAnswer,
    decision_numbers,
    failure_messages,
    format_cases,
    format_execution,
    format_trajectory,
    rewrite_messages,
    selection_messages,
    suboptimal_messages,
)
from tests.workers.builders import diagnosis_job, example, rewrite_job, step

TRAJECTORY = (
    "TRAJECTORY (2 selectable decisions)\n"
    "INSTRUCTION: press sw4\n"
    'DECISION 0: panda.press_button({"id": "sw1"})\n'
    "EXECUTION RESULT [panda.press_button]\n"
    'DECISION 1: panda.press_button({"id": "sw0"})\n'
    "EXECUTION RESULT [panda.press_button]\n"
    'DECISION 2: panda.press_button({"id": "sw9"})\n'
    "EXECUTION RESULT [panda.press_button] ERROR_FLAG=bad_call; message=sw9 does not exist\n"
    "END OF TRAJECTORY"
)


def test_diagnosable_decisions_are_numbered_from_one_and_the_prefix_zero() -> None:
    """Only diagnosable steps get the numbers 1..n the LLM answers with; the others get 0."""
    steps = [
        JobStep.parse(step(1, "a", diagnosable=False)),
        JobStep.parse(step(2, "b")),
        JobStep.parse(step(3, "c", diagnosable=False)),
        JobStep.parse(step(4, "d")),
    ]
    assert decision_numbers(steps) == [0, 1, 0, 2]


def test_the_failure_prompt_holds_the_case_and_the_numbered_trajectory() -> None:
    """The failure prompt shows goal, hint, task, active errors, the ending and the trajectory."""
    system, user = failure_messages(diagnosis_job(), [])
    assert system.role == "system"
    assert "EARLIEST decision responsible" in system.content
    assert "Decisions numbered 0 belong to a validated prefix" in system.content
    assert user.content.startswith("TASK\nopen the door\n\nSTAGE GOAL\npress sw4\n\n")
    assert "HINT\nsw4 is on the left wall\n\n" in user.content
    assert "ACTIVE ERRORS\n- E_WALL: the left wall is locked\n\n" in user.content
    assert "HOW THE STAGE ENDED\nThe stage failed:" in user.content
    assert "\nReported failure: panda: sw9 does not exist\n\n" in user.content
    assert TRAJECTORY in user.content
    assert '{"decision_index": <integer from 1 to 2>, "reason":' in user.content
    assert "VALIDATED SIMILAR CASES" not in user.content


def test_each_failure_route_explains_its_ending() -> None:
    """no_action and exceeded stages are described as such, not as a failed action."""
    idle = failure_messages(diagnosis_job(route="no_action", failure_reason=None), [])[1]
    assert (
        "HOW THE STAGE ENDED\nThe stage ended before its goal: the last decision called no tool"
        in idle.content
    )
    assert "Reported failure" not in idle.content
    exceeded = failure_messages(diagnosis_job(route="exceeded"), [])[1]
    assert "The stage used up its budget of decisions" in exceeded.content


def test_examples_are_offered_as_numbered_validated_cases() -> None:
    """Example cases come before the trajectory, numbered, each with its validated diagnosis."""
    job = diagnosis_job(examples=[example(1).model_dump(), example(2).model_dump()])
    user = failure_messages(job, job.examples)[1].content
    assert "VALIDATED SIMILAR CASES\nThese earlier cases were diagnosed correctly." in user
    assert (
        "CASE 1\nSTAGE GOAL\ngoal 1\nTRAJECTORY\nDECISION 1: case 1\nVALIDATED DIAGNOSIS\n"
        '{"decision_index": 1, "reason": "reason 1", "expected_decision": "fix 1"}' in user
    )
    assert "\n\nCASE 2\nSTAGE GOAL\ngoal 2\n" in user
    assert user.index("END OF VALIDATED SIMILAR CASES") < user.index("TRAJECTORY (2 selectable")


def test_the_suboptimal_prompt_carries_the_optimal_trajectory_when_known() -> None:
    """A cached efficient trajectory is shown as a reference block; without one, no block."""
    optimal = 'DECISION 1: panda.press_button({"id": "sw4"})'
    job = diagnosis_job(route="suboptimal", optimal_trajectory=optimal)
    system, user = suboptimal_messages(job, [])
    assert "with more decisions than the target" in system.content
    assert f"REFERENCE EFFICIENT TRAJECTORY\n{optimal}\nEND OF REFERENCE\n" in user.content
    assert TRAJECTORY in user.content
    assert '{"suboptimal": <true or false>, "decision_idx": <integer from 1 to 2, or null' in (
        user.content
    )
    plain = suboptimal_messages(diagnosis_job(route="suboptimal"), [])[1].content
    assert "REFERENCE EFFICIENT TRAJECTORY" not in plain


def test_the_selection_prompt_lists_every_stored_case_and_the_limit() -> None:
    """Case selection shows the current trajectory and all offered cases, asking for at most 3."""
    job = diagnosis_job(examples=[example(n).model_dump() for n in range(1, 6)])
    user = selection_messages(job)[1].content
    assert "CURRENT STAGE GOAL\npress sw4\n\nCURRENT TRAJECTORY (2 selectable decisions)" in user
    assert all(f"CASE {n}\nSTAGE GOAL\ngoal {n}\n" in user for n in range(1, 6))
    assert f"JSON array of the numbers of the useful cases, at most {MAX_EXAMPLES}," in user


def test_the_rewrite_prompt_asks_for_json_with_the_corrected_words() -> None:
    """The rewrite prompt shows the rejected answer and why, and asks for {"say": ...}."""
    system, user = rewrite_messages(rewrite_job())
    assert "text-only stage" in system.content
    assert "STAGE GOAL\ntell the user which button opens the door" in user.content
    assert (
        "REJECTED ANSWER\nPress any button.\n\nWHY IT WAS REJECTED\nthe answer names no button"
        in (user.content)
    )
    assert user.content.endswith('{"say": "<the corrected answer, as the agent would say it>"}')
    assert RewriteAnswer.parse_json('{"say": "Press sw4."}').say == "Press sw4."


def test_a_trajectory_shows_words_errors_and_unknown_execution_shapes() -> None:
    """Said words, agent errors and executions that are not per-robot objects are all rendered."""
    spoke = step(1, "a", instruction="hello")
    spoke["output"] = {"say": "Hi there", "tool_calls": []}
    spoke["execution"] = {"speech": "heard"}
    failed = step(2, "b")
    failed.update(output=None, error={"code": "timeout", "message": "no answer"}, execution={})
    text = format_trajectory([JobStep.parse(spoke), JobStep.parse(failed)])
    assert text == (
        "INSTRUCTION: hello\n"
        'DECISION 1: say "Hi there"\n'
        'EXECUTION RESULT [speech]: "heard"\n'
        "DECISION 2: no decision, error timeout: no answer"
    )


def test_example_cases_show_a_parsable_expected_decision_as_a_decision_object() -> None:
    """A stored case whose expected decision is a one-line decision is shown as the object
    the answer must give; other text stays as it was written."""
    case = example(1).model_copy(update={"expected_decision": 'panda.press_button(id="sw4")'})
    shown = format_cases([case, example(2)])
    call = {"name": "press_button", "arguments": {"id": "sw4"}, "target_robot_name": "panda"}
    expected = json.dumps({"say": "", "tool_calls": [call]})
    assert f'"expected_decision": {expected}' in shown
    assert '"expected_decision": "fix 2"' in shown


def test_a_magma_step_summary_reads_as_one_line_per_robot_status() -> None:
    """MAGMA-GEN's `per_robot_status` pairs with the decision's calls by robot; a failed
    status shows its flag and message, and a stage failure its reason."""
    decision = AgentDecision.parse(
        {"tool_calls": [
            {"name": "take_obj", "arguments": {"obj": "cube"}, "target_robot_name": "panda"},
            {"name": "depose", "arguments": {"target": "shelf"}, "target_robot_name": "ur5"},
        ]}
    )  # fmt: skip
    execution = {
        "per_robot_status": [
            {"robot_name": "panda", "mess": "", "result": True, "error_flag": "none",
             "mess_is_public": False},
            {"robot_name": "ur5", "mess": "nothing is held", "result": False,
             "error_flag": "bad_call", "mess_is_public": False},
        ],
        "stage_success": -1, "stage_state": 1, "tool_calls": 2, "forgiven_tool_calls": 0,
        "failure_reason": "the cube is not on the shelf", "failure_diagnostics": None,
        "reward": None,
    }  # fmt: skip
    assert format_execution(execution, decision) == [
        "EXECUTION RESULT [panda.take_obj]",
        "EXECUTION RESULT [ur5.depose] ERROR_FLAG=bad_call; message=nothing is held",
        "STAGE FAILED: the cube is not on the shelf",
    ]
