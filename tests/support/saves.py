"""Save folders made for tests (a long chain of situations, each with a failed sibling), and
checks on the saves a run wrote: written whole, holding the coaching invariants."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gencoach.graph import write_save
from gencoach.graph.audit import AuditReport, audit
from gencoach.protocol import CandidateRecord, RunConfig, SituationRecord


def _candidate(cid: int, parent: int | None, output: dict[str, Any], **fields: Any) -> Any:
    record = {"id": cid, "parent_id": parent, "stage_id": 0, "kind": "agent",
              "response_status": "completed", "output": output, "execution_finished": True,
              "origin": "model", **fields}  # fmt: skip
    return CandidateRecord.parse(record).model_dump(by_alias=True)


def chain_save(folder: Path, situations: int, run_id: str = "big-run") -> None:
    """A chain of `situations` situations, each with a failed sibling; the last succeeds."""
    press = {"name": "press_button", "arguments": {"id": "sw0"}, "target_robot_name": "panda"}
    records = []
    for sid in range(situations):
        parent = None if sid == 0 else 2 * (sid - 1)
        last = sid == situations - 1
        links = [] if last else [{"situation_id": sid + 1, "kind": "next"}]
        good = _candidate(2 * sid, parent, {"tool_calls": [press]},
                          status="optimal" if last else "ongoing", links=links)  # fmt: skip
        bad = _candidate(2 * sid + 1, parent, {"say": f"wrong {sid}"}, status="error")
        instruction = {"type": "env", "content": f"step {sid}"}
        records.append(
            SituationRecord.parse(
                {
                    "id": sid,
                    "stage_id": 0,
                    "parent_id": parent,
                    "input": {"id": sid, "instruction": instruction},
                    "candidates": [good, bad],
                }
            )
        )
    config = RunConfig.parse({
        "run_id": run_id, "scenario": "buttons", "target": "sw0", "target_kind": "button",
        "generator_version": "2.0", "export_complete": False, "agent_id": "saved-agent",
        "agent_version": "1", "roots": [0], "env_options": {}, "task_description": "press",
        "error_statistics": {},
    })  # fmt: skip
    write_save(folder, config, records)


def assert_audit_clean(*paths: Path, max_alternatives: int | None = None) -> AuditReport:
    """Every save under the paths holds the coaching invariants (`gencoach audit`)."""
    report = audit(paths, max_alternatives)
    assert report.saves, f"no save under {paths}"
    assert not report.violations, "\n".join(str(v) for v in report.violations)
    return report


def save_complete(folder: Path) -> bool:
    """Whether the run's save in `folder` is written whole (its config's `export_complete`)."""
    config = folder / "config.json"
    return config.is_file() and bool(json.loads(config.read_text())["export_complete"])
