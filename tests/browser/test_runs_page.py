"""The runs page in chromium over 10,000 runs: the total, paging, and a filter kept live."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.protocol import AnyEvent, parse_event
from gencoach.service.store.graphstore import GraphStore
from tests.support.browser import Pages
from tests.support.controller import ControllerProcess
from tests.support.graphs import RUN_STARTED

RUNS = 10_000
SCENARIOS = ("buttons", "colors", "stack", "sort")


def _events() -> list[AnyEvent]:
    events: list[AnyEvent] = []
    for index in range(RUNS):
        run_id = f"many-{index:05d}"
        started = {**RUN_STARTED, "type": "run.started", "run_id": run_id, "seq": 0,
                   "scenario": SCENARIOS[index % len(SCENARIOS)]}  # fmt: skip
        events.append(parse_event(started))
        if index % 10 == 0:
            events.append(parse_event({"type": "run.finished", "run_id": run_id, "seq": 1}))
    return events


async def _seed(redis_url: str) -> None:
    """Apply the runs through the store's own write path (faster than the event stream)."""
    client = Redis.from_url(redis_url)
    store = GraphStore(client, Keys())
    events = _events()
    for start in range(0, len(events), 1000):
        await store.apply(events[start : start + 1000])
    await client.aclose()


@pytest.fixture
def controller(tmp_path: Path, redis_url: str, redis_client: Any) -> Iterator[ControllerProcess]:
    """A controller over 10,000 runs, 1,000 of them finished."""
    # Playwright's event loop runs in this thread: the seeding gets a thread of its own.
    seeding = threading.Thread(target=anyio.run, args=(_seed, redis_url))
    seeding.start()
    seeding.join(120)
    process = ControllerProcess(tmp_path, redis_url)
    process.start()
    yield process
    process.stop()


def test_the_runs_page_shows_the_total_pages_and_filters_10000_runs(
    tab: Pages, controller: ControllerProcess
) -> None:
    """The page shows the total of 10,000 runs and 50 rows, the next page other runs,
    the previous one the first again, and a scenario filter its 2,500 runs only, kept
    across the live updates."""
    page = tab.page
    started = time.perf_counter()
    page.goto(controller.url + "/")
    total = page.locator("#runs-total")
    page.wait_for_function(
        "document.querySelector('#runs-total')?.textContent.includes('of 10,000 matching')"
    )
    print(f"first page of 10,000 runs shown {time.perf_counter() - started:.2f} s after goto")
    assert "Runs 1–50 of 10,000 matching" in total.inner_text()
    rows = page.locator("tbody tr")
    assert rows.count() == 50
    first = rows.first.get_attribute("data-run")
    assert first == "many-09999"  # newest first
    tab.shot("runs-10000")

    page.get_by_role("button", name="Next page").click()
    page.wait_for_function("document.querySelector('#runs-total').textContent.includes('51–100')")
    assert rows.first.get_attribute("data-run") == "many-09949"
    page.get_by_role("button", name="Previous page").click()
    page.wait_for_function("document.querySelector('#runs-total').textContent.includes('1–50')")
    assert rows.first.get_attribute("data-run") == first

    page.get_by_label("Scenario").select_option("colors")
    page.wait_for_function(
        "document.querySelector('#runs-total').textContent.includes('of 2,500 matching')"
    )
    page.wait_for_timeout(2500)  # a live update comes and goes; the filter stays
    assert page.get_by_label("Scenario").input_value() == "colors"
    assert "of 2,500 matching" in total.inner_text()
    scenarios = {row.locator("td").nth(1).inner_text() for row in rows.all()}
    assert scenarios == {"colors"}
    tab.shot("runs-colors")
