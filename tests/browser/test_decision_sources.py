"""Who made a proven correction, in chromium: the funnel lists proven corrections by
decision source, and the graph marks a fallback-made candidate with a badge."""

from __future__ import annotations

from typing import Any

import httpx

from tests.browser.runs import BranchExecutor, report_run
from tests.support.agent_server import ScriptedAgent, correction
from tests.support.browser import Pages
from tests.support.coaching import PRESS_SW4
from tests.support.controller import ControllerProcess
from tests.support.llm_server import ScriptedLLMServer, json_reply

RUN = "console:fallback"


def _fallback(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The agent's correction, made by its fallback."""
    reply = correction(request)
    for proposal in reply["proposals"]:
        proposal["extra_keys"]["decision_source"] = "fallback"
    return 200, reply


def test_a_fallback_made_proof_is_named_in_the_funnel_and_badged_in_the_graph(
    tab: Pages,
    controller: ControllerProcess,
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """The failure's correction comes from the agent's fallback: once proven, the funnel's
    proven cell lists `1 fallback` and the coached candidate carries the `fallback` badge,
    which the original branch does not."""
    llm.script(
        json_reply({"decision_index": 2, "reason": "sw9 is wrong", "expected_decision": PRESS_SW4})
    )
    scripted_agent.coaching_replies.append(_fallback)
    page = tab.page
    with BranchExecutor(redis_url, RUN) as generator:
        generator.release.set()
        report_run(redis_url, RUN, scripted_agent.url)
        page.goto(controller.url + "/#/funnel")
        source = page.locator('tr[data-route="failure"] [data-step=proven] li[data-source]')
        try:
            source.wait_for(timeout=90_000)
        except Exception:
            funnel = httpx.get(f"{controller.url}/console/api/funnel").json()["routes"]
            raise AssertionError(f"no proven correction by source: {funnel}") from None
        finally:
            tab.shot("funnel")
        assert source.get_attribute("data-source") == "fallback"
        assert source.inner_text() == "1 fallback"

        page.get_by_role("link", name="Runs").click()
        page.locator(f'tr[data-run="{RUN}"] a').click()
        badge = page.locator(".branches .branch.coached .badge.fallback")
        badge.first.wait_for()
        tab.shot("graph")
        assert badge.first.inner_text() == "fallback"
        assert "not the coach" in str(badge.first.get_attribute("title"))
        assert page.locator(".branches .branch.original .badge.fallback").count() == 0
