"""Hand-built MAGMA-GEN 2.0 saves for the export, library, trainer and browser tests, written
with the real save writer.

The coached run, with its descendant scores worked by hand (as in tests/support/graphs.py):

```
S0 root, stage 0, user "press sw0, then sw4"
├── c0 press sw0 ─ ongoing ─next─▶ S1 (stage 0, env feedback)
│                              ├── c2 press sw4 ─ stage 0 optimal ─next─▶ S2 (stage 1, user)
│                              │        ├── c4 "done, I think" ─ stage 1 suboptimal (leaf)
│                              │        └── c5 press sw0 ─ ongoing ─next─▶ S3 ── c6 "done" ─ optimal
│                              └── c3 press sw9 ─ bad call, stage 0 failure, diagnosed faulty
│        └─alternative─▶ S4 (copy of S1, coached) ── c7 press sw4 ─ optimal (attempt 1, coaching)
└── c1 invalid answer (leaf)
```
Selection scores: c0 0.32, c2 0.52, c4 0.2 (dropped: 0.2 below c5), c5 0.4, c6 0.4, c7 0.4.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from gencoach.graph import write_save
from gencoach.protocol import RunConfig, SituationRecord

Json = dict[str, Any]

TOOLS: list[Json] = [
    {
        "name": "press_button",
        "description": "Press a button once with the robot.",
        "arguments": {"id": {"description": "id of the button to press", "type": "str"}},
    },
    {"name": "cancel_current_action", "description": "Cancel the robot's current action."},
]
ATTRIBUTES: Json = {"known_robots": ["panda"], "buttons": ["sw0", "sw4", "sw9"]}
MEMORY: Json = {"memory_list": ["press buttons in order", "say done at the end"], "turns": 1}


def stage(optimal: int, non_optimal: int, unassessed: int, total: int) -> Json:
    """A saved stage score."""
    return {
        "optimal": optimal,
        "non-optimal": non_optimal,
        "unassessed": unassessed,
        "total_child": total,
    }


def press(button: str, robot: str = "panda") -> Json:
    """A decision pressing one button."""
    call = {"name": "press_button", "arguments": {"id": button}, "target_robot_name": robot}
    return {"say": "", "tool_calls": [call]}


def say(text: str) -> Json:
    """A decision that only speaks."""
    return {"say": text, "tool_calls": []}


def executed(button: str, flag: str = "none") -> Json:
    """The execution of a press: one result for the robot, with its error flag."""
    call = {"name": "press_button", "arguments": {"id": button}}
    reason = None if flag == "none" else f"wrong button {button}"
    return {"panda": {"tool_calls": [call], "error_flag": flag, "failure_reason": reason}}


def candidate(
    cid: int,
    output: Json | None,
    status: str,
    score: Json | None = None,
    *,
    links: Sequence[tuple[int, str]] = (),
    faulty: bool = False,
    attempts: Sequence[int] = (),
    origin: str = "model",
    kind: str = "agent",
    finished: bool = True,
    execution: Json | None = None,
    internal_steps: Sequence[Json] = (),
) -> Json:
    """A candidate record (parent and stage are filled in by `situation`)."""
    record: Json = {
        "id": cid,
        "kind": kind,
        "response_status": "completed" if output is not None else "error",
        "output": output,
        "error": None if output is not None else {"code": "invalid_response", "message": "bad"},
        "internal_steps": list(internal_steps),
        "execution": execution or {},
        "status": status,
        "execution_finished": finished,
        "score": score or {},
        "coaching_attempt_ids": list(attempts),
        "origin": origin,
        "links": [{"situation_id": sid, "kind": link} for sid, link in links],
    }
    if faulty:
        record["coaching"] = {"diagnosed_as_faulty": True, "coaching_role": "fixed_node"}
    return record


def situation(
    sid: int,
    parent: int | None,
    candidates: Iterable[Json],
    *,
    content: str = "press sw0, then sw4",
    kind: str = "user",
    stage_id: int = 0,
    input_id: int | None = None,
    tools: list[Json] | None = None,
    attributes: Json | None = None,
    memory: Json | None = None,
) -> SituationRecord:
    """A situation record whose candidates answer it."""
    return SituationRecord.parse(
        {
            "id": sid,
            "stage_id": stage_id,
            "parent_id": parent,
            "input": {
                "id": sid if input_id is None else input_id,
                "instruction": {"type": kind, "content": content},
                "tools": TOOLS if tools is None else tools,
                "attributes": ATTRIBUTES if attributes is None else attributes,
                "memory": MEMORY if memory is None else memory,
            },
            "candidates": [
                {**record, "parent_id": parent, "stage_id": stage_id} for record in candidates
            ],
        }
    )


def run_config(
    run_id: str = "run-1",
    *,
    scenario: str = "buttons",
    target: str = "sw0-sw4",
    roots: Sequence[int] = (0,),
    agent_id: str = "reference-agent",
    agent_version: str = "1.0.0",
    started_at: str | None = None,
    single_agent: bool = False,
) -> RunConfig:
    """A complete run config (`started_at`: when the run started, ISO 8601)."""
    producer: Json = {"package": "gencoach", "version": "0.1.0"}
    if started_at is not None:
        producer["started_at"] = datetime.fromisoformat(started_at).timestamp()
    return RunConfig.parse(
        {
            "run_id": run_id,
            "scenario": scenario,
            "target": target,
            "target_kind": "button_sequence",
            "generator_version": "2.0",
            "export_complete": True,
            "agent_id": agent_id,
            "agent_version": agent_version,
            "roots": list(roots),
            "env_options": {"seed": 7},
            "task_description": "press sw0, then sw4; then say done",
            "error_statistics": {},
            "producer": producer,
            "single_agent": single_agent,
        }
    )


FEEDBACK = '{"infos": "panda: press_button succeed"}'


PLAIN_TOOLS: list[Json] = TOOLS[:1]
PLAIN_ATTRIBUTES: Json = {"known_robots": ["panda"]}
PLAIN_MEMORY: Json = {"memory_list": ["press buttons in order"], "turns": 1}


def coached_run(plain: bool = False) -> list[SituationRecord]:
    """The situations of the coached run pictured above.

    `plain` gives every situation one tool, one attribute and one rule, so no shuffle
    can change a row and tests may spell rows out whole.
    """
    if plain:
        given: dict[str, Any] = {
            "tools": PLAIN_TOOLS,
            "attributes": PLAIN_ATTRIBUTES,
            "memory": PLAIN_MEMORY,
        }
        return [
            situation(
                record.id,
                record.parent_id,
                [c.model_dump(mode="json", by_alias=True) for c in record.candidates],
                content=record.input.instruction.content,
                kind=record.input.instruction.type,
                stage_id=record.stage_id,
                input_id=record.input.id,
                **given,
            )
            for record in coached_run()
        ]
    return [
        situation(
            0,
            None,
            [
                candidate(
                    0,
                    press("sw0"),
                    "ongoing",
                    {"stage_0": stage(1, 0, 0, 2), "stage_1": stage(1, 1, 0, 2)},
                    links=[(1, "next"), (4, "alternative")],
                    execution=executed("sw0"),
                ),
                candidate(1, None, "invalid", {"stage_0": stage(0, 0, 0, 1)}),
            ],
        ),
        situation(
            1,
            0,
            [
                candidate(
                    2,
                    press("sw4"),
                    "optimal",
                    {"stage_0": stage(1, 0, 0, 1), "stage_1": stage(1, 1, 0, 2)},
                    links=[(2, "next")],
                    execution=executed("sw4"),
                ),
                candidate(
                    3,
                    press("sw9"),
                    "error",
                    {"stage_0": stage(0, 0, 0, 1)},
                    faulty=True,
                    execution=executed("sw9", "bad_call"),
                ),
            ],
            content=FEEDBACK,
            kind="env",
        ),
        situation(
            2,
            2,
            [
                candidate(4, say("done, I think"), "suboptimal", {"stage_1": stage(0, 1, 0, 1)}),
                candidate(
                    5,
                    press("sw0"),
                    "ongoing",
                    {"stage_1": stage(1, 0, 0, 1)},
                    links=[(3, "next")],
                    execution=executed("sw0"),
                ),
            ],
            content="now say done",
            stage_id=1,
        ),
        situation(
            3,
            5,
            [candidate(6, say("done"), "optimal", {"stage_1": stage(1, 0, 0, 1)})],
            content='{"infos": "ok"}',
            kind="env",
            stage_id=1,
        ),
        situation(
            4,
            0,
            [
                candidate(
                    7,
                    press("sw4"),
                    "optimal",
                    {"stage_0": stage(1, 0, 0, 1)},
                    attempts=[1],
                    origin="coaching",
                    execution=executed("sw4"),
                )
            ],
            content=FEEDBACK,
            kind="env",
            input_id=1,
        ),
    ]


def write_run(
    folder: Path,
    situations: Iterable[SituationRecord] | None = None,
    config: RunConfig | None = None,
) -> Path:
    """Write a save (the coached run by default) and return its folder."""
    write_save(folder, config or run_config(), coached_run() if situations is None else situations)
    return folder


def single_situation(folder: Path, candidates: Iterable[Json], **config: Any) -> Path:
    """A save of one root situation answered by `candidates`."""
    return write_run(folder, [situation(0, None, candidates)], run_config(**config))
