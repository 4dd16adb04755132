"""Browser fixtures: Debian's chromium driven by Playwright, skipped when either is missing.

`make test-browser` installs both (the `browser` extra and `apt-get install chromium`).
Every test saves a screenshot of each page it visits under its tmp dir.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import Pages
from tests.support.coaching import coaching_settings
from tests.support.controller import ControllerProcess
from tests.support.llm_server import ScriptedLLMServer, scripted_llm_servers

CHROMIUM = Path("/usr/bin/chromium")


def _missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed: `make test-browser` installs the `browser` extra"
    if not CHROMIUM.exists() and shutil.which("chromium") is None:
        return "no chromium at /usr/bin/chromium: `make test-browser` installs Debian's package"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the browser tests, and skip them with the reason when the tools are missing."""
    reason = _missing()
    for item in items:
        if "tests/browser/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.timeout(180))  # several pages, each polled live
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless chromium for the module; Playwright's event loop ends with it, so the
    async tests of other modules keep theirs."""
    from playwright.sync_api import sync_playwright

    executable = CHROMIUM if CHROMIUM.exists() else Path(shutil.which("chromium") or CHROMIUM)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(executable), headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


@pytest.fixture
def tab(browser: Any, tmp_path: Path) -> Iterator[Pages]:
    """A fresh browser context and tab; no script error may happen in it."""
    pages = Pages(browser, tmp_path)
    yield pages
    pages.context.close()
    assert pages.errors == [], f"script errors in the page: {pages.errors}"


@pytest.fixture
def llm() -> Iterator[ScriptedLLMServer]:
    """A scripted OpenAI-compatible server on loopback."""
    with scripted_llm_servers() as start:
        yield start()


@pytest.fixture
def controller(
    tmp_path: Path, redis_url: str, redis_client: Any, llm: ScriptedLLMServer
) -> Iterator[ControllerProcess]:
    """A controller with two workers, coaching failures through the scripted LLM."""
    process = ControllerProcess(tmp_path, redis_url, settings=coaching_settings(llm))
    process.start()
    process.start_workers()
    yield process
    process.stop()
