"""A browser tab for the console's browser tests (Playwright), with its screenshots and
the errors its scripts raised."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class Pages:
    """One browser tab for a test, its screenshots, and the errors its scripts raised."""

    def __init__(self, browser: Any, folder: Path) -> None:
        self.context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="en-GB")
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)
        self.folder = folder
        self.errors: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def shot(self, name: str) -> Path:
        """Save a full-page screenshot as `<tmp>/screenshots/<name>.png`."""
        path = self.folder / "screenshots" / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path), full_page=True)
        return path
