"""A run's graph at 1280x800: nested coached alternatives keep readable columns, the
candidate panel never covers the tree, nothing overlaps; environment feedback reads as
text with its JSON on demand, the score badge has a legend, and the header names the task."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gencoach.protocol import TaskDescription
from tests.browser.saves_console import saves_console_at
from tests.support.browser import Pages
from tests.support.saved_runs import (
    candidate,
    executed,
    press,
    run_config,
    situation,
    stage,
    write_run,
)

RUN = "nested-run"
FAILED = json.dumps(
    {
        "infos": "panda: press_button sw9 failed: there is no button sw9 on the table",
        "previous_tool_call": [
            {"name": "press_button", "arguments": {"id": "sw9"}, "target_robot_name": "panda"}
        ],
        "failure_reason": "panda: there is no button sw9",
    }
)
OK = json.dumps({"infos": "panda: press_button sw4 succeed", "failure_reason": None})
DESCRIPTION = "Press the buttons the instruction names, in order."


def _nested_save(folder: Path) -> None:
    """Three levels of an original branch beside a coached alternative."""
    score = {"stage_0": stage(1, 1, 0, 3)}

    def branching(cid: int, nxt: int, alternative: int) -> dict[str, Any]:
        return candidate(cid, press(f"sw{cid}"), "ongoing", score,
                         links=[(nxt, "next"), (alternative, "alternative")],
                         execution=executed(f"sw{cid}"))  # fmt: skip

    def coached(cid: int) -> dict[str, Any]:
        return candidate(cid, press("sw4"), "optimal", {"stage_0": stage(1, 0, 0, 1)},
                         attempts=[cid], origin="coaching", execution=executed("sw4"))  # fmt: skip

    failed = candidate(7, press("sw9"), "error", {"stage_0": stage(0, 0, 0, 1)},
                       execution=executed("sw9", "bad_call"))  # fmt: skip
    situations = [
        situation(0, None, [branching(0, 1, 2)]),
        situation(1, 0, [branching(1, 3, 4)], content=OK, kind="env"),
        situation(2, 0, [coached(2)], content=FAILED, kind="env", input_id=1),
        situation(3, 1, [branching(3, 5, 6)], content=OK, kind="env"),
        situation(4, 1, [coached(4)], content=FAILED, kind="env", input_id=3),
        situation(5, 3, [failed], content=FAILED, kind="env"),
        situation(6, 3, [coached(6)], content=OK, kind="env", input_id=5),
    ]
    # As the reference simulator reports a run: the target is the scenario's description.
    task = TaskDescription.model_validate(
        {"task_description": DESCRIPTION, "stages_description": [{"goal_description": "press sw4"}]}
    )
    config = run_config(RUN, roots=(0,)).model_copy(
        update={"target": DESCRIPTION, "target_kind": "scenario", "task_description": task}
    )
    write_run(folder, situations, config)


@pytest.fixture
def nested_console(tmp_path: Path) -> Iterator[str]:
    """`gencoach console --saves` over the nested save, on a free port."""
    _nested_save(tmp_path / "saves" / RUN)
    with saves_console_at(tmp_path / "saves", tmp_path / "console.log") as url:
        yield url


# Rectangles of the page's parts, and which of them overlap what they must not.
_LAYOUT = """() => {
  const box = (el) => { const r = el.getBoundingClientRect();
    return {left: r.left, top: r.top, right: r.right, bottom: r.bottom, width: r.width}; };
  const tree = document.querySelector('.tree');
  const panel = document.querySelector('#node-detail');
  const t = tree.getBoundingClientRect();
  const rows = [...document.querySelectorAll('.tree .cand')];
  const covered = rows.filter((row) => {
    const r = row.getBoundingClientRect();
    const x = r.left + 12, y = r.top + r.height / 2;
    if (x < t.left || x > t.right || y < 0 || y > innerHeight) return false;  // out of view
    const top = document.elementFromPoint(x, y);
    return !(top && row.contains(top));
  }).map((row) => row.dataset.candidate);
  return {
    tree: box(tree), panel: box(panel), covered,
    rows: rows.map(box),
    branches: [...document.querySelectorAll('.branches > .branch')].map(box),
    overflow: getComputedStyle(tree).overflowX,
  };
}"""


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["left"] < b["right"] - 0.5
        and b["left"] < a["right"] - 0.5
        and (a["top"] < b["bottom"] - 0.5 and b["top"] < a["bottom"] - 0.5)
    )


def test_nested_alternatives_at_1280x800_overlap_nothing(browser: Any, tmp_path: Path,
                                                         nested_console: str) -> None:  # fmt: skip
    tab = Pages(browser, tmp_path)
    tab.context.close()
    tab.context = browser.new_context(viewport={"width": 1280, "height": 800}, locale="en-GB")
    page = tab.page = tab.context.new_page()
    page.on("pageerror", lambda error: tab.errors.append(str(error)))
    try:
        page.goto(f"{nested_console}/#/run?id={RUN}")
        page.locator('button[data-candidate="6"]').wait_for()
        page.locator('button[data-candidate="1"]').click()  # the panel opens beside the tree
        page.locator("#node-detail").get_by_role("heading", name="Candidate #1").wait_for()
        tab.shot("nested-graph-1280")

        # The header names the task, and the scenario with its description (no "Target").
        facts = page.locator(".run-header .facts")
        assert facts.locator('[data-fact="task"]').inner_text() == "press sw4"
        assert facts.locator('[data-fact="scenario"]').inner_text() == f"buttons — {DESCRIPTION}"
        assert "Target" not in facts.inner_text()

        layout = page.evaluate(_LAYOUT)
        assert not _overlap(layout["tree"], layout["panel"]), layout
        assert layout["covered"] == [], layout
        rows = layout["rows"]
        assert len(rows) == 7
        for index, row in enumerate(rows):
            for other in rows[index + 1 :]:
                assert not _overlap(row, other), (row, other)
        assert len(layout["branches"]) == 6  # three levels, original and coached each
        assert min(branch["width"] for branch in layout["branches"]) >= 300, layout["branches"]
        assert layout["overflow"] == "auto"  # wider than its column: the tree scrolls
        page.evaluate("document.querySelector('.tree').scrollLeft = 1e6")
        page.locator('button[data-candidate="6"]').scroll_into_view_if_needed()
        scrolled = page.evaluate(_LAYOUT)
        assert scrolled["covered"] == [], scrolled
        assert not _overlap(scrolled["tree"], scrolled["panel"]), scrolled
        tab.shot("nested-graph-scrolled")

        # Feedback as text, its JSON on demand; the score badge explained.
        head = page.locator('[data-situation="5"] .sit-head')
        assert "there is no button sw9" in head.locator(".instr").inner_text()
        assert '{"infos"' not in head.locator(".instr").inner_text()
        raw = head.locator("details.raw")
        assert not raw.locator("pre").is_visible()
        raw.locator("summary").click()
        assert '"previous_tool_call"' in raw.locator("pre").inner_text()
        legend = page.locator("#score-legend")
        assert "optimal (✓)" in legend.inner_text()
        assert "not assessed (?)" in legend.inner_text()
        score = page.locator('button[data-candidate="0"] .score')
        assert score.get_attribute("aria-describedby") == "score-legend"
        detail = page.locator("#node-detail")
        detail.get_by_text("Input: instruction (env)").click()
        assert detail.locator("pre.feedback").inner_text() == "panda: press_button sw4 succeed"
        detail.get_by_text("raw JSON").click()
        assert '"failure_reason": null' in detail.locator("pre.json").first.inner_text()
        tab.shot("nested-graph-raw")
    finally:
        tab.context.close()
    assert tab.errors == [], tab.errors
