"""The README, BENCHMARKS.md and the reference docs link only to files in the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]
# A Markdown link or image target: `](target)`, without a scheme (not http:, mailto:).
LINK = re.compile(r"\]\((?![a-z][a-z0-9+.-]*:)([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page: Path) -> None:
    """Every relative link of a page names a file or folder that exists."""
    missing = [
        target for target in LINK.findall(page.read_text()) if not (page.parent / target).exists()
    ]
    assert missing == [], f"{page.name} links to files not in the repository: {missing}"


def test_no_page_or_source_mentions_a_design_file_outside_the_repository() -> None:
    """No page, and no module (whose text `check-agent` and the help print), points readers
    to a DESIGN document, which the repository does not carry."""
    sources = sorted((ROOT / "src").rglob("*.py"))
    for page in [*PAGES, *sources]:
        assert "DESIGN" not in page.read_text(), f"{page.relative_to(ROOT)} mentions DESIGN"
