"""How the graph shows an instruction: environment feedback as its text, JSON on demand."""

from __future__ import annotations

import json

from gencoach.console.graphview import feedback


def test_magma_gen_feedback_reads_as_its_infos_then_what_failed() -> None:
    raw = {
        "infos": "panda: press_button sw0 succeed\npanda: press_button sw9 failed",
        "previous_tool_call": [{"name": "press_button", "arguments": {"id": "sw9"}}],
        "failure_reason": "panda: there is no button sw9",
    }
    text, parsed = feedback(json.dumps(raw))
    assert text == (
        "panda: press_button sw0 succeed\npanda: press_button sw9 failed\n"
        "(failure: panda: there is no button sw9)"
    )
    assert parsed == raw


def test_feedback_without_a_failure_is_the_infos_alone() -> None:
    assert feedback('{"infos": "ok", "failure_reason": null}') == (
        "ok", {"infos": "ok", "failure_reason": None}
    )  # fmt: skip


def test_other_json_objects_keep_their_text_and_their_json() -> None:
    assert feedback('{"state": "open"}') == ('{"state": "open"}', {"state": "open"})


def test_plain_text_and_broken_json_are_shown_as_written() -> None:
    assert feedback("press sw0, then sw4") == ("press sw0, then sw4", None)
    assert feedback('{"infos": ') == ('{"infos": ', None)
    assert feedback("[1, 2]") == ("[1, 2]", None)
