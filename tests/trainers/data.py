"""The datasets the trainers read: every format exported from two tasks of hand-built saves.

Task `sw0-sw4` holds the coached run and a recovery run (c0's call fails, c1 succeeds);
task `other` a second coached run. With a validation ratio of 0.5 each split holds one
task, so every format's train and validation files have rows. Every agent answer carries
its reasoning (an internal step's `reasoning`, as agents record it), so the chat rows,
reasoning being on by default, have thinking parts; `chat-no-reasoning` has none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from gencoach.export import ExportSettings, run_export
from gencoach.protocol import SituationRecord
from tests.support.saved_runs import (
    FEEDBACK,
    candidate,
    coached_run,
    executed,
    press,
    run_config,
    say,
    situation,
    stage,
    write_run,
)

VARIANTS: Final[dict[str, tuple[str, dict[str, Any]]]] = {
    "chat": ("chat", {}),
    "chat-per-turn": ("chat", {"per_turn": True}),
    "chat-reasoning": ("chat", {"reasoning": True}),
    "chat-no-reasoning": ("chat", {"reasoning": False}),
    "chat-axolotl": ("chat", {"flavour": "axolotl"}),
    "chat-prompt-completion": ("chat", {"shape": "prompt_completion"}),
    "chat-per-turn-no-reasoning": ("chat", {"per_turn": True, "reasoning": False}),
    "chat-prompt-completion-no-reasoning": (
        "chat",
        {"shape": "prompt_completion", "reasoning": False},
    ),
    "chat-as-child": (
        "chat",
        {
            "per_turn": True,
            "as": {
                "agent_id": "child-agent",
                "instructions": "You are the child agent.",
                "reasoning_transform": "tests.export.hooks:shout",
            },
        },
    ),
    "preference": ("preference", {}),
    "full-history": ("full-history", {}),
}
FILES: Final = {
    "chat": "chat.jsonl",
    "preference": "preference.jsonl",
    "full-history": "hr_data.json",
}
RECOVERY_RUN: Final = "run-recovery"
FAILED_BUTTON: Final = "sw9"
THINKING: Final = "answer {} of the run: the next button in order"
"""Each answer's reasoning, by candidate id."""


def thinking(candidate_id: int) -> list[dict[str, Any]]:
    """The internal steps of an answer that reasoned before answering."""
    return [{"reasoning": THINKING.format(candidate_id)}]


def with_reasoning(situations: list[SituationRecord]) -> list[SituationRecord]:
    """The situations with every agent answer's reasoning recorded."""
    return [
        record.model_copy(
            update={
                "candidates": [
                    c.model_copy(update={"internal_steps": thinking(c.id)}) if c.output else c
                    for c in record.candidates
                ]
            }
        )
        for record in situations
    ]


def write_recovery(folder: Path) -> None:
    """c0 presses sw9 and every call fails; the agent recovers with c1, pressing sw4."""
    first = candidate(
        0,
        press(FAILED_BUTTON),
        "ongoing",
        {"stage_0": stage(1, 0, 0, 1)},
        links=[(1, "next")],
        execution=executed(FAILED_BUTTON, "bad_call"),
        internal_steps=thinking(0),
    )
    second = candidate(
        1, press("sw4"), "optimal", {"stage_0": stage(1, 0, 0, 1)}, internal_steps=thinking(1)
    )
    write_run(
        folder,
        [
            situation(0, None, [first]),
            situation(1, 0, [second], content=FEEDBACK, kind="env"),
        ],
        config=run_config(RECOVERY_RUN),
    )


def export_all(source: Path) -> dict[str, Path]:
    """Write the saves below `source`, export every variant; each variant's folder."""
    coached = with_reasoning(coached_run())
    write_run(source / "coached-a", coached, config=run_config("run-a"))
    write_run(source / "coached-b", coached, config=run_config("run-b", target="other"))
    write_recovery(source / "recovery")
    folders: dict[str, Path] = {}
    for name, (fmt, options) in VARIANTS.items():
        folder = source / "datasets" / name
        # The two coached runs hold the same conversation: without `dedupe` off, the
        # second task's rows would all be repeats and its split file empty.
        deduping = fmt in ("chat", "full-history")
        settings = ExportSettings(
            source=source,
            format=fmt,
            options=options,
            validation_ratio=0.5,
            out=folder,
            dedupe=False if deduping else None,
        )
        outcome = run_export(settings)
        assert outcome.complete, f"{name}: {outcome.failures}"
        folders[name] = folder
    return folders


def export_text_only(source: Path) -> Path:
    """The default chat export of a run whose answers only speak, each with its reasoning:
    a file with thinking parts and no tool call; its folder."""
    first = candidate(0, say("which button first?"), "ongoing", {"stage_0": stage(1, 0, 0, 1)},
                      links=[(1, "next")], internal_steps=thinking(0))  # fmt: skip
    second = candidate(1, say("done"), "optimal", {"stage_0": stage(1, 0, 0, 1)},
                       internal_steps=thinking(1))  # fmt: skip
    write_run(
        source / "talk",
        [
            situation(0, None, [first]),
            situation(1, 0, [second], content="press sw0 first", kind="user"),
        ],
        config=run_config("run-talk"),
    )
    settings = ExportSettings(source=source, format="chat", out=source / "datasets" / "chat")
    outcome = run_export(settings)
    assert outcome.complete, outcome.failures
    return source / "datasets" / "chat"


def file_names(variant: str) -> list[str]:
    """The full, train and validation files of a variant."""
    full = FILES[VARIANTS[variant][0]]
    stem, dot, suffix = full.rpartition(".")
    return [full, f"{stem}_train{dot}{suffix}", f"{stem}_validation{dot}{suffix}"]
