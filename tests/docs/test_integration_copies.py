"""The code docs/integrations.md shows is the tested code: the FrozenLake adapter verbatim,
and the sizes it (and BENCHMARKS.md) quote are the files' own."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
FROZENLAKE = ROOT / "tests" / "integrations" / "frozenlake.py"
BABYAI = ROOT / "src" / "gencoach" / "integrations" / "minigrid" / "adapter.py"


def _quoted_counts(text: str, *patterns: str) -> list[int]:
    """The line counts a page quotes for a file, wherever one of the patterns finds one."""
    return [int(found) for pattern in patterns for found in re.findall(pattern, text)]


def test_the_frozenlake_adapter_in_the_docs_is_the_tested_file() -> None:
    """The page's FrozenLake block is `tests/integrations/frozenlake.py` after its module
    docstring, character for character."""
    source = FROZENLAKE.read_text(encoding="utf-8")
    body = source[source.index("from __future__") :]
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE, re.MULTILINE | re.DOTALL)
    assert body in blocks, "docs/integrations.md no longer shows frozenlake.py as it is"


def test_the_adapter_sizes_quoted_are_the_files_own() -> None:
    """Any line count the page or BENCHMARKS.md quotes for the FrozenLake or the BabyAI
    adapter is the file's (the wording around it is the page's own business)."""
    benchmarks = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    for path, patterns in (
        (FROZENLAKE, (r"FrozenLake \((\d+) lines", r"frozenlake\.py`, (\d+) lines")),
        (BABYAI, (r"`adapter\.py` \((\d+) lines", r"minigrid/adapter\.py`, (\d+) lines")),
    ):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        quoted = _quoted_counts(PAGE, *patterns) + _quoted_counts(benchmarks, *patterns)
        assert all(count == lines for count in quoted), (path.name, lines, quoted)
