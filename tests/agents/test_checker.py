"""`check-agent`: every check passes on the reference agent, and each broken rule is caught."""

from __future__ import annotations

from typing import Any

import pytest

from gencoach.agents import CheckResult, check_agent, run_check_agent
from gencoach.agents.app import create_agent_app
from gencoach.agents.reference import (
    MistakeRates,
    ReferenceOptions,
    ScriptedPolicy,
    reference_app,
    reference_info,
)
from tests.agents.broken import broken_agent
from tests.support.agent_server import Serve
from tests.support.llm_server import ScriptedLLMServer
from tests.support.processes import free_port

ALL_CHECKS = [
    "health", "info.strict", "info.protocol_version", "responses.single",
    "responses.candidates", "responses.strict", "memory.replacement", "errors.well_formed",
    "coaching.session_open", "coaching.session_idempotent", "coaching.session_conflict",
]  # fmt: skip


def _failures(results: list[CheckResult]) -> dict[str, str]:
    return {result.name: result.reason for result in results if not result.passed}


@pytest.mark.asyncio
async def test_the_reference_agent_passes_every_check(serve: Serve) -> None:
    """Against the reference agent, every check passes, coaching ones included."""
    results = await check_agent(serve(reference_app()), timeout_s=10)
    assert _failures(results) == {}
    names = [result.name for result in results]
    assert names[: len(ALL_CHECKS)] == ALL_CHECKS
    assert names[len(ALL_CHECKS) :] == [
        "coaching.failure", "coaching.suboptimal", "coaching.format",
        "coaching.reinjection", "coaching.session_close",
    ]  # fmt: skip


@pytest.mark.asyncio
async def test_a_reference_agent_making_mistakes_still_conforms(serve: Serve) -> None:
    """Mistakes are about decisions, not the protocol: a sloppy reference agent still passes."""
    rates = MistakeRates(wrong_argument=0.3, malformed=0.3, no_action=0.3)
    results = await check_agent(serve(reference_app(ReferenceOptions(rates=rates))))
    assert _failures(results) == {}


@pytest.mark.asyncio
async def test_a_correct_hand_written_agent_passes(serve: Serve) -> None:
    """The hand-written agent without a flaw passes, so each flaw below is the only failure."""
    assert _failures(await check_agent(serve(broken_agent()))) == {}


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("flaw", "check", "reason"),
    [
        ("protocol_version", "info.protocol_version",
         "protocol_version is '1.0'; gencoach speaks '2.0'"),
        ("info_extra_field", "info.strict", "model_name: unknown field"),
        ("out_of_order", "responses.candidates",
         "out of order or misnumbered: 0.source_id: expected 7, got 11"),
        ("wrong_count", "responses.candidates",
         "asks for 6 candidates (2 for input 7, 3 for input 3, 1 for input 11), the answer has 3"),
        ("merged_memory", "memory.replacement",
         "carries 'Press sw1 twice, then sw2.' from an earlier request"),
        ("unoffered_point", "coaching.suboptimal",
         "unknown reinjection point 'recovery'; the request offered ['replacement']"),
        ("put_not_idempotent", "coaching.session_idempotent",
         "the same config again answered 409, expected 204"),
        ("lenient_requests", "responses.strict",
         "a request with duplicate input ids was answered 200"),
        ("delete_keeps_session", "coaching.session_close", "DELETE answered 200, expected 204"),
        ("ignores_coaching", "coaching.reinjection",
         "a reinjected replace_decision under extra_keys.coaching was not applied: "
         'the answer is {"say":"ok","tool_calls":[]}, the correction {"say":"fixed"'),
        ("flat_coaching", "coaching.reinjection",
         "not ignore it nor look for it flat in extra_keys"),
        ("wrapped_proposal", "coaching.failure",
         "proposal at 'recovery' wraps its payload as {'coaching': ...}; its extra_keys must be "
         "the payload itself"),
    ],
)  # fmt: skip
async def test_each_broken_rule_is_caught_with_a_clear_reason(
    serve: Serve, flaw: str, check: str, reason: str | None
) -> None:
    """Each flaw fails its check, with a reason that says what was wrong."""
    failures = _failures(await check_agent(serve(broken_agent(flaw))))
    assert check in failures, failures
    if reason is not None:
        assert reason in failures[check]


@pytest.mark.asyncio
async def test_an_unreachable_agent_fails_health_and_stops(serve: Serve) -> None:
    """Nothing listening: one failed check saying the agent is not reachable."""
    results = await check_agent(f"http://127.0.0.1:{free_port()}", timeout_s=2)
    assert [r.name for r in results] == ["health"]
    assert "is the agent running" in results[0].reason


def test_run_check_agent_prints_one_line_per_check_and_exits_non_zero(
    serve: Serve, capsys: pytest.CaptureFixture[str]
) -> None:
    """The printed lines are `PASS name` or `FAIL name: reason`, and a failure exits 1."""
    code = run_check_agent(serve(broken_agent("info_extra_field")))
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert "PASS health" in lines
    assert "FAIL info.strict: model_name: unknown field" in lines
    assert lines[-1] == f"{len(lines) - 2} of {len(lines) - 1} checks passed"


def test_run_check_agent_exits_zero_when_everything_passes(
    serve: Serve, capsys: pytest.CaptureFixture[str], llm: ScriptedLLMServer
) -> None:
    """Against the reference agent, with a given backend endpoint, every line passes: exit 0."""
    code = run_check_agent(serve(reference_app()), backend_endpoint=llm.endpoint)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "FAIL" not in out
    assert out.splitlines()[-1].startswith("all ")


class RaisingCoach:
    """A coach with a bug: every repair looks up a key the request does not have."""

    requires_session = False

    async def coach(self, request: Any, session: Any) -> Any:
        """Break as a buggy coach does."""
        nothing: dict[str, Any] = {}
        return nothing["expected_decision"]


@pytest.mark.asyncio
async def test_a_coach_that_raises_fails_the_coaching_checks(serve: Serve) -> None:
    """An agent whose coach raises answers `error`: coaching.format (and the other kinds) fail,
    naming the exception, the missing key and where it was raised."""
    app = create_agent_app(reference_info(), ScriptedPolicy(), RaisingCoach())
    failures = _failures(await check_agent(serve(app)))
    assert "the coach failed: KeyError: 'expected_decision'" in failures["coaching.format"]
    assert "in coach)" in failures["coaching.format"]
    assert "coaching.failure" in failures
