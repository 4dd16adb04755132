"""The token prompt of a controller that has a token, and the read-only console over saves."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.saves_console import saves_console_at
from tests.support.browser import Pages
from tests.support.controller import ControllerProcess
from tests.support.saves import chain_save

TOKEN = "console-secret"


@pytest.fixture
def guarded(tmp_path: Path, redis_url: str, redis_client: Any) -> Iterator[ControllerProcess]:
    """A controller whose changes need a bearer token."""
    process = ControllerProcess(
        tmp_path,
        redis_url,
        api={"token_env": "GC_CONSOLE_TOKEN"},
        env={"GC_CONSOLE_TOKEN": TOKEN},
    )
    process.start()
    yield process
    process.stop()


def test_token_is_asked_once_checked_and_kept_out_of_urls(
    tab: Pages, guarded: ControllerProcess
) -> None:
    """With a token set, the console asks for it, refuses a wrong one, keeps the right one
    in session storage only, and sends it with a budget change."""
    page = tab.page
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(guarded.url + "/")
    dialog = page.get_by_role("dialog", name="API token")
    dialog.wait_for()
    tab.shot("token")
    dialog.get_by_label("Bearer token").fill("wrong")
    dialog.get_by_role("button", name="Use token").click()
    dialog.get_by_text("The controller refused this token.").wait_for()
    dialog.get_by_label("Bearer token").fill(TOKEN)
    dialog.get_by_role("button", name="Use token").click()
    dialog.wait_for(state="hidden")
    assert page.evaluate("sessionStorage.getItem('gencoach.api-token')") == TOKEN
    assert page.get_by_role("button", name="API token: set").is_visible()

    page.get_by_role("link", name="Stages and budgets").click()
    field = page.get_by_label("Max unproven per stage")
    page.wait_for_function("document.getElementById('budget-max_unproven_per_stage').value !== ''")
    field.fill("2")
    page.get_by_role("button", name="Apply").click()
    page.get_by_text("Budgets changed").wait_for()
    budgets = httpx.get(f"{guarded.url}/v1/budgets").json()
    assert budgets["overrides"] == {"max_unproven_per_stage": 2}
    assert not any(TOKEN in url for url in requests), requests

    page.reload()  # same tab: the token is remembered, no prompt
    page.get_by_role("heading", name="Runs").wait_for()
    assert not page.get_by_role("dialog", name="API token").is_visible()


@pytest.fixture
def saves_console(tmp_path: Path) -> Iterator[str]:
    """`gencoach console --saves` over a 2,000-situation save, on a free port."""
    chain_save(tmp_path / "saves" / "big-run", 2000)
    with saves_console_at(tmp_path / "saves", tmp_path / "console.log") as url:
        yield url


def test_saved_runs_are_browsed_read_only_and_large_graphs_stay_small(
    tab: Pages, saves_console: str
) -> None:
    """Without Redis the saved run is listed and its 2,000-situation graph opens with a
    bounded number of situations drawn; a deep candidate is reached by its id."""
    page = tab.page
    page.goto(saves_console + "/")
    row = page.locator('tr[data-run="big-run"]')
    row.wait_for()
    assert "saved" in row.inner_text()
    assert not page.get_by_role("link", name="Coaching funnel").is_visible()
    row.get_by_role("link", name="big-run").click()
    page.locator("[data-situation]").first.wait_for()
    drawn = page.locator("[data-situation]").count()
    assert 0 < drawn <= 200, drawn
    assert page.get_by_role("button", name="Expand all").is_disabled()
    page.get_by_label("Go to candidate").fill("3999")
    page.get_by_role("button", name="Go", exact=True).click()
    target = page.locator('button[data-candidate="3999"]')
    target.wait_for()
    assert target.get_attribute("aria-pressed") == "true"
    page.locator("#node-detail").get_by_text("wrong 1999").first.wait_for()
    assert page.locator("#node-detail form.correction").count() == 0
    tab.shot("saved-graph")
