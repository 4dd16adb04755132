"""The datasets the trainers read: every format exported from two tasks of hand-built saves.

Task `sw0-sw4` holds the coached run and a recovery run (c0's call fails, c1 succeeds);
task `other` a second coached run. With a validation ratio of 0.5 each split holds one
task, so every format's train and validation files have rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from gencoach.export import ExportSettings, run_export
from tests.export.saves import (
    FEEDBACK,
    candidate,
    coached_run,
    executed,
    press,
    run_config,
    situation,
    stage,
    write_run,
)

VARIANTS: Final[dict[str, tuple[str, dict[str, Any]]]] = {
    "chat": ("chat", {}),
    "chat-per-turn": ("chat", {"per_turn": True}),
    "chat-reasoning": ("chat", {"reasoning": True}),
    "chat-axolotl": ("chat", {"flavour": "axolotl"}),
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


def write_recovery(folder: Path) -> None:
    """c0 presses sw9 and every call fails; the agent recovers with c1, pressing sw4."""
    first = candidate(
        0,
        press(FAILED_BUTTON),
        "ongoing",
        {"stage_0": stage(1, 0, 0, 1)},
        links=[(1, "next")],
        execution=executed(FAILED_BUTTON, "bad_call"),
    )
    second = candidate(1, press("sw4"), "optimal", {"stage_0": stage(1, 0, 0, 1)})
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
    write_run(source / "coached-a", coached_run(), config=run_config("run-a"))
    write_run(source / "coached-b", coached_run(), config=run_config("run-b", target="other"))
    write_recovery(source / "recovery")
    folders: dict[str, Path] = {}
    for name, (fmt, options) in VARIANTS.items():
        folder = source / "datasets" / name
        settings = ExportSettings(
            source=source, format=fmt, options=options, validation_ratio=0.5, out=folder
        )
        outcome = run_export(settings)
        assert outcome.complete, f"{name}: {outcome.failures}"
        folders[name] = folder
    return folders


def file_names(variant: str) -> list[str]:
    """The full, train and validation files of a variant."""
    full = FILES[VARIANTS[variant][0]]
    stem, dot, suffix = full.rpartition(".")
    return [full, f"{stem}_train{dot}{suffix}", f"{stem}_validation{dot}{suffix}"]
