"""Which corrections validate the decisions before them, as MAGMA-GEN's router reads it, and
what stays diagnosable after one that does not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gencoach.protocol import CoachingMarker
from gencoach.reporting.client import Reporter
from gencoach.service.branching.coached_branches import (
    applies_trajectory_diagnostic,
    correction_markers,
)
from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import branch_orders, coaching_settings, requests_of
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import RUN_STARTED, _candidate, _executed, _input, _press, _situation
from tests.support.llm_server import ScriptedLLMServer, json_reply


@pytest.mark.parametrize(
    ("type_coaching", "validates"),
    [
        ("failure:diagnosis", True),
        ("no_action:diagnosis", True),
        ("exceeded:diagnosis", True),
        ("finish_suboptimal:suboptimal_diagnosis", True),
        ("format_error:format_fix", False),
        ("failure:text_only_rewrite", False),
        ("nonsense", False),
    ],
)
def test_only_diagnoses_validate_the_prefix(type_coaching: str, validates: bool) -> None:
    """A format fix or a text rewrite leaves earlier decisions diagnosable; a diagnosis
    (failure, no_action, exceeded or suboptimal) does not."""
    assert applies_trajectory_diagnostic(type_coaching) is validates


@pytest.mark.parametrize(
    ("type_coaching", "already", "kind", "marked"),
    [
        ("failure:diagnosis", False, "replacement", True),
        ("format_error:format_fix", False, "replacement", False),
        ("format_error:format_fix", True, "replacement", True),
        ("failure:text_only_rewrite", True, "replacement", True),
        ("failure:diagnosis", True, "recovery", False),
    ],
)
def test_a_replacement_is_marked_when_its_faulty_decision_is(
    type_coaching: str, already: bool, kind: str, marked: bool
) -> None:
    """As MAGMA-GEN's coaching mixin: a replacement carries `trajectory_diagnostic_applied`
    when its faulty decision does, from this correction (a diagnosis) or an earlier one
    (then even a format fix's replacement does); a recovery node never does."""
    faulty = CoachingMarker(trajectory_diagnostic_applied=already)
    coached, after = correction_markers(faulty, type_coaching, kind)
    assert coached.trajectory_diagnostic_applied is marked
    assert coached.coaching_role == ("recovery_node" if kind == "recovery" else "fixed_node")
    validates = applies_trajectory_diagnostic(type_coaching)
    assert after.trajectory_diagnostic_applied is (already or validates)
    assert after.diagnosed_as_faulty is (kind == "replacement")


@pytest.mark.slow
def test_earlier_wrong_moves_are_still_blamed_after_a_format_fix(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """A wrong press, then a malformed answer whose format fix is executed, then a failure
    on the coached branch: the press before the fix is still diagnosable, and the failure's
    diagnosis blames it (the generator's truth)."""
    llm.script(
        json_reply({"decision_index": 1, "reason": "sw9 was wrong", "expected_decision": None})
    )
    settings = coaching_settings(llm, suboptimal=False)
    controller = controller_factory(settings=settings)
    controller.start()
    controller.start_workers()
    stage = {"id": 0, "goal": "press sw0", "target_tool_calls": 1, "max_tool_calls": 4}
    say_and_press = {"say": "pressing", "tool_calls": _press("sw0")["tool_calls"]}
    with Reporter("blame", redis_url=redis_url) as generator:
        generator.emit("run.started", **{**RUN_STARTED, "agent_url": scripted_agent.url})
        emit_all(
            generator,
            _situation("S_a", None, stage, _input(0, "user", "press sw0")),
            _candidate("c1", "S_a", _press("sw9")),
            _executed("c1", "ongoing"),
            _situation("S_b", "c1", stage, _input(1, "env", "sw9 pressed")),
            _candidate("c2", "S_b", say_and_press, invalid_reason="say or call, not both"),
            _executed("c2", "invalid"),
        )
        (fixed,) = branch_orders(generator, 1, 90)
        assert fixed.coaching.type_coaching == "format_error:format_fix"
        assert fixed.coaching.trajectory_diagnostic_applied is False
        attempts = [fixed.attempt_id]
        failure = {"event": "failure", "state": "optimal", "faulty_candidate_id": "c1"}
        emit_all(
            generator,
            _executed(fixed.candidate_id, "ongoing"),
            _situation(
                "S_c",
                fixed.candidate_id,
                stage,
                _input(2, "env", "sw0 pressed"),
                coaching_attempt_ids=attempts,
            ),
            _candidate("c5", "S_c", _press("sw9"), coaching_attempt_ids=attempts),
            _executed("c5", "finished", failure),
        )
        diagnosed = wait_for(
            lambda: (r := requests_of(controller, "blame").get("failure")) and r["diagnosis"] and r,
            timeout_s=90,
            what="the failure's diagnosis",
        )
    assert diagnosed["blame"] == "right", diagnosed
    assert diagnosed["faulty_candidate_id"] == "c1"


def emit_all(reporter: Reporter, *events: tuple[str, dict[str, Any]]) -> None:
    """Report these events and send them."""
    for kind, fields in events:
        reporter.emit(kind, **fields)
    reporter.flush()
