"""docs/reporting.md's example runs as written and produces a save."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gencoach.errors import SaveError
from gencoach.graph import SavedGraph, read_save
from tests.support.controller import ControllerProcess, wait_for

pytestmark = pytest.mark.slow

PAGE = Path(__file__).parents[2] / "docs" / "reporting.md"


def _complete(folder: Path) -> SavedGraph | None:
    try:
        return read_save(folder)
    except SaveError:
        return None


def test_reporting_example_is_saved(controller: ControllerProcess, redis_url: str) -> None:
    """The example's events are accepted and its run is saved with one situation."""
    match = re.search(r"```python\n(from gencoach.*?)```", PAGE.read_text(), re.S)
    assert match is not None
    code = match.group(1).replace("redis://127.0.0.1:6379/0", redis_url)
    exec(compile(code, str(PAGE), "exec"), {})  # noqa: S102 - our own docs
    folder = controller.output_dir / "run-1"
    save = wait_for(lambda: _complete(folder), what="the save")
    assert len(save.situations) == 1
    assert save.candidates[0].status == "optimal"
