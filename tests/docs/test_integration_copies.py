"""The code docs/integrations.md shows is the tested code: the FrozenLake adapter verbatim,
and the sizes it (and BENCHMARKS.md) quote are the files' own."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
FROZENLAKE = ROOT / "tests" / "integrations" / "frozenlake.py"
BABYAI = ROOT / "src" / "gencoach" / "integrations" / "minigrid" / "adapter.py"


def test_the_frozenlake_adapter_in_the_docs_is_the_tested_file() -> None:
    """The page's FrozenLake block is `tests/integrations/frozenlake.py` after its module
    docstring, character for character, and the page states its true length."""
    source = FROZENLAKE.read_text(encoding="utf-8")
    body = source[source.index("from __future__") :]
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE, re.MULTILINE | re.DOTALL)
    assert body in blocks, "docs/integrations.md no longer shows frozenlake.py as it is"
    quoted = re.search(r"FrozenLake \((\d+) lines", PAGE)
    assert quoted is not None
    assert int(quoted.group(1)) == len(source.splitlines())


def test_the_babyai_adapter_size_quoted_is_its_own() -> None:
    """The BabyAI adapter's line count the page and BENCHMARKS.md quote is the file's."""
    lines = len(BABYAI.read_text(encoding="utf-8").splitlines())
    quoted = re.search(r"`adapter.py` \((\d+) lines", PAGE)
    assert quoted is not None
    assert int(quoted.group(1)) == lines
    benchmarks = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    measured = re.search(r"`integrations/minigrid/adapter.py`, (\d+) lines", benchmarks)
    assert measured is not None
    assert int(measured.group(1)) == lines
