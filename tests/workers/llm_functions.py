"""Functions the python backend imports by path in tests."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio.lowlevel

CALLS: list[dict[str, Any]] = []


def diagnose(messages: list[dict[str, str]], *, schema: Any, model: str | None) -> str:
    """Answer a valid failure diagnosis naming the last message, remembering the call."""
    CALLS.append({"messages": messages, "schema": schema, "model": model})
    return json.dumps(
        {"decision_index": 1, "reason": messages[-1]["content"], "expected_decision": None}
    )


def diagnose_as_magma(messages: list[dict[str, str]], *, schema: Any, model: str | None) -> str:
    """Answer as MAGMA-GEN's diagnosis does: the expected decision as free text."""
    return json.dumps(
        {
            "decision_index": 1,
            "reason": "pressed the wrong button first",
            "expected_decision": "press_button(id='sw0') with panda",
        }
    )


async def diagnose_async(messages: list[dict[str, str]], *, schema: Any, model: str | None) -> str:
    """The same as `diagnose`, as a coroutine function."""
    await anyio.lowlevel.checkpoint()
    return diagnose(messages, schema=schema, model=model)


def broken(messages: list[dict[str, str]], *, schema: Any, model: str | None) -> str:
    """Fail as a buggy function would."""
    raise ValueError("the coach function is broken")


def slow(messages: list[dict[str, str]], *, schema: Any, model: str | None) -> str:
    """Block longer than the tests' timeout."""
    time.sleep(0.5)
    return "{}"


def not_text(messages: list[dict[str, str]], *, schema: Any, model: str | None) -> Any:
    """Return something other than the answer's text."""
    return {"decision_index": 1}


NOT_A_FUNCTION = 42


def knows_the_job(
    messages: list[dict[str, str]], *, schema: Any, model: str | None, context: dict[str, Any]
) -> str:
    """Answer with what the asking job's context says, to show the context arrives."""
    return json.dumps({"say": f"run {context['run_id']}"})
