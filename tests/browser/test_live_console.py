"""The console on a real controller, workers, scripted agent and scripted LLM, in chromium."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx

from tests.browser.runs import BranchExecutor, report_run
from tests.support.agent_server import ScriptedAgent
from tests.support.browser import Pages
from tests.support.coaching import PRESS_SW4, coaching_settings
from tests.support.controller import ControllerProcess, wait_for
from tests.support.llm_server import ScriptedLLMServer, json_reply

RUN = "console:run-1"


def _text(tab: Pages, selector: str) -> str:
    return str(tab.page.locator(selector).first.inner_text()).strip()


def _wait_count(tab: Pages, controller: ControllerProcess, step: str, value: str) -> None:
    """Wait until the failure route's `step` cell shows `value`; else show the funnel's data."""
    cell = f"tr[data-route=failure] [data-step={step}] .count"
    try:
        tab.page.wait_for_function(
            f"document.querySelector('{cell}')?.textContent === '{value}'", timeout=60_000
        )
    except Exception:
        funnel = httpx.get(f"{controller.url}/console/api/funnel").json()["routes"]
        requests = httpx.get(f"{controller.url}/console/api/runs").json()
        raise AssertionError(f"{step} never showed {value}: {funnel} {requests}") from None


def test_runs_funnel_graph_correction_and_budgets(
    tab: Pages,
    controller: ControllerProcess,
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """A run appears live, its funnel counts move to proven, its graph shows the coached
    alternative beside the original, a person's correction through the form is followed
    to its proven branch, and a budget edit changes the stage gauge's limit."""
    llm.script(
        json_reply({"decision_index": 2, "reason": "sw9 is wrong", "expected_decision": PRESS_SW4})
    )
    page = tab.page
    page.goto(controller.url + "/")
    page.get_by_role("heading", name="Runs").wait_for()
    with BranchExecutor(redis_url, RUN) as generator:
        report_run(redis_url, RUN, scripted_agent.url)
        row = page.locator(f'tr[data-run="{RUN}"]')
        row.wait_for()  # appeared without a reload
        assert "active" in row.inner_text()
        tab.shot("runs")
        page.get_by_label("State").select_option("active")
        page.get_by_label("Scenario").select_option("buttons")
        row.wait_for()
        page.evaluate("location.hash = '#/runs'")  # filters kept; the list is polled again

        page.get_by_role("link", name="Coaching funnel").click()
        failure = 'tr[data-route="failure"]'
        _wait_count(tab, controller, "corrected", "1")
        assert _text(tab, f"{failure} [data-step=seen] .count") == "1"
        assert _text(tab, f"{failure} [data-step=proven] .count") == "0"
        generator.release.set()  # the generator executes the coached branch: it is proven
        _wait_count(tab, controller, "proven", "1")
        assert _text(tab, 'tr[data-backend="llm"] td') == "1"  # one LLM call so far
        tab.shot("funnel")

        page.get_by_role("link", name="Runs").click()
        page.locator(f'tr[data-run="{RUN}"] a').click()
        coached = page.locator(".branches .branch.coached [data-candidate]").first
        coached.wait_for()
        assert "coaching" in coached.inner_text()
        assert page.locator(".branches .branch.original").first.is_visible()

        page.locator('button[data-candidate="1"]').click()  # c1, the failed decision
        detail = page.locator("#node-detail")
        detail.get_by_role("heading", name="Candidate #1 c1").wait_for()
        tab.shot("node")
        detail.locator("article.request").first.wait_for()
        assert "proven" in detail.locator("article.request").first.inner_text()
        form = detail.locator("form.correction")
        form.get_by_label("Diagnosis: what went wrong").fill("sw9 is not part of the task")
        form.get_by_label("Expected decision, in words (optional)").fill("press sw4")
        assert form.get_by_label("Tool", exact=True).input_value() == "press_button"
        assert form.get_by_label("Robot (target_robot_name)").input_value() == "panda"
        form.get_by_label(re.compile(r"^id")).fill("sw4")
        form.get_by_role("button", name="Submit correction").click()
        try:
            detail.get_by_text("Outcome: proven").wait_for(timeout=60_000)
        finally:
            tab.shot("following")
        assert "Accepted as request" in detail.inner_text()
        page.locator(".branch.coached .badge.human").first.wait_for()  # the tree shows it too
        tab.shot("graph")
    assert len(generator.executed) == 2  # the automatic correction's branch and the person's

    page.get_by_role("link", name="Stages and budgets").click()
    gauge = page.locator(f'section[data-run="{RUN}"] [data-stage="0"] [data-gauge="pending"]')
    gauge.wait_for()
    assert _text(tab, f'section[data-run="{RUN}"] [data-stage="0"] .gauge-limit') == "5"
    page.get_by_label("Max pending per stage").fill("3")
    page.get_by_role("button", name="Apply").click()
    page.get_by_text("Budgets changed").wait_for()
    page.wait_for_function(
        "document.querySelector('[data-gauge=pending] .gauge-limit')?.textContent === '3'"
    )
    assert "changed over HTTP" in _text(tab, "#override-max_pending_per_stage")
    tab.shot("stages")
    page.get_by_role("button", name="Reset to the file's values").click()
    page.wait_for_function(
        "document.querySelector('[data-gauge=pending] .gauge-limit')?.textContent === '5'"
    )


def test_exploration_budget_refusal_is_a_message(
    tab: Pages,
    tmp_path: Path,
    redis_url: str,
    redis_client: Any,
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
) -> None:
    """With the exploration budget spent, the form shows the 409's reason as a message."""
    settings = coaching_settings(llm)
    settings["coaching"]["max_alternatives_per_situation"] = 1
    controller = ControllerProcess(tmp_path, redis_url, settings=settings)
    controller.start()
    try:
        _refused(tab, controller, scripted_agent, redis_url)
    finally:
        controller.stop()


def _refused(
    tab: Pages, controller: ControllerProcess, scripted_agent: ScriptedAgent, redis_url: str
) -> None:
    report_run(redis_url, "spent", scripted_agent.url)
    first = {
        "candidate_id": "c1",
        "diagnosis": {"explanation": "wrong button"},
        "decision": {
            "say": "",
            "tool_calls": [
                {"name": "press_button", "arguments": {"id": "sw4"}, "target_robot_name": "panda"}
            ],
        },
    }
    wait_for(
        lambda: (
            httpx.post(f"{controller.url}/v1/runs/spent/interventions", json=first).status_code
            == 202
        ),
        timeout_s=30,
        what="the first intervention accepted",
    )
    page = tab.page
    page.goto(f"{controller.url}/#/run?id=spent&node=1")
    form = page.locator("#node-detail form.correction")
    form.wait_for()
    form.get_by_label("Diagnosis: what went wrong").fill("wrong button")
    form.get_by_label("Raw JSON").check()
    form.get_by_label(re.compile(r"^Decision as JSON")).fill('{"say": "x", "tool_calls": [{}]}')
    form.get_by_role("button", name="Submit correction").click()
    invalid = page.locator("#node-detail .notice.error")
    try:
        invalid.wait_for()
    finally:
        tab.shot("invalid")
    assert "The correction is invalid" in invalid.inner_text()
    form.get_by_label("Tool calls").check()
    form.get_by_label(re.compile(r"^id")).fill("sw4")
    form.get_by_role("button", name="Submit correction").click()
    notice = page.locator("#node-detail .notice.warning")
    try:
        notice.wait_for()
    finally:
        tab.shot("refused")
    assert "exploration budget" in notice.inner_text()
    assert page.url.endswith("node=1")  # still the console page, no error page
