"""A known run graph, as the events a generator reports, with its scores worked by hand.

```
S_a  root, stage 0, user instruction
├── c1 press sw0 ─ ongoing ─next─▶ S_b (stage 0, feedback)
│                               ├── c3 press sw4 ─ stage 0 optimal ─next─▶ S_c (stage 1, linked)
│                               │        ├── c5 ─ stage 1 suboptimal (leaf)
│                               │        └── c6 ─ ongoing ─next─▶ S_d ── c7 ─ stage 1 optimal
│                               └── c4 press sw9 ─ stage 0 failure (leaf)
│          └─alternative─▶ S_e (stage 0, coached) ── c8 ─ stage 0 optimal (attempt 1)
└── c2 invalid answer (leaf)
```
Storage ids follow creation order: situations S_a..S_e are 0..4, candidates c1..c8
are 0..7.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gencoach.protocol import AnyEvent, parse_event

if TYPE_CHECKING:
    from gencoach.service.store.graphstore import GraphStore
from gencoach.service.store.nodes import RunGraph

RUN_STARTED: dict[str, Any] = {
    "agent_url": "http://127.0.0.1:8751",
    "scenario": "buttons",
    "target": "sw0-sw4",
    "target_kind": "button_sequence",
    "task_description": "press sw0, then sw4; then say done",
    "env_options": {"seed": 7},
    "generator": {"name": "test-generator", "version": "1.0"},
}

STAGE_0 = {"id": 0, "goal": "press sw0 then sw4", "target_tool_calls": 2, "max_tool_calls": 4}
STAGE_1 = {"id": 1, "goal": "say done", "text_only": False, "linked_to_prev": True}


def _input(index: int, kind: str, content: str) -> dict[str, Any]:
    return {"id": index, "instruction": {"type": kind, "content": content}}


def _press(button: str) -> dict[str, Any]:
    call = {"name": "press_button", "arguments": {"id": button}, "target_robot_name": "panda"}
    return {"say": "", "tool_calls": [call]}


def _feedback(button: str, ok: bool = True) -> dict[str, Any]:
    return {
        "panda": {
            "tool_calls": [{"name": "press_button", "arguments": {"id": button}}],
            "error_flag": "none" if ok else "bad_call",
            "failure_reason": None if ok else f"wrong button {button}",
        }
    }


def _situation(sid: str, parent: str | None, stage: dict[str, Any], inp: dict[str, Any],
               link: str = "next", **extra: Any) -> tuple[str, dict[str, Any]]:  # fmt: skip
    fields = {"situation_id": sid, "parent_candidate_id": parent, "link": link, "stage": stage}
    return "situation.created", {**fields, "input": inp, **extra}


def _candidate(
    cid: str, sid: str, output: dict[str, Any], **extra: Any
) -> tuple[str, dict[str, Any]]:
    fields = {"candidate_id": cid, "situation_id": sid, "response_status": "completed"}
    return "candidate.created", {**fields, "output": output, "memory": {"turns": 1}, **extra}


def _executed(cid: str, status: str, stage_end: dict[str, str] | None = None,
              execution: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:  # fmt: skip
    fields = {"candidate_id": cid, "status": status, "stage_end": stage_end}
    return "candidate.executed", {**fields, "execution": execution or {}}


SUCCESS_OPTIMAL = {"event": "success", "state": "optimal"}
SUCCESS_ACCEPTABLE = {"event": "success", "state": "acceptable"}
FAILURE = {"event": "failure", "state": "exceeded"}


def own_coaching(fields: dict[str, Any]) -> bool:
    """Whether an event of the known run is its own coached alternative (S_e and c8), which
    the generator reports itself: no request of gencoach's made it, so a campaign whose
    saves are audited leaves it out."""
    return fields.get("situation_id") == "S_e" or fields.get("candidate_id") == "c8"


def known_run_events() -> list[tuple[str, dict[str, Any]]]:
    """The events of the known run, in an order a generator could report them."""
    return [
        ("run.started", RUN_STARTED),
        _situation("S_a", None, STAGE_0, _input(0, "user", "press sw0, then sw4")),
        _candidate("c1", "S_a", _press("sw0")),
        _candidate(
            "c2",
            "S_a",
            {"say": "I will press sw0", "tool_calls": _press("sw0")["tool_calls"]},
            invalid_reason="an answer must not both say something and call tools",
        ),
        _executed("c1", "ongoing", execution=_feedback("sw0")),
        _executed("c2", "invalid"),
        _situation(
            "S_b",
            "c1",
            STAGE_0,
            _input(1, "env", '{"infos": "panda: press_button succeed"}'),
            active_errors=[{"code": "injection_error", "description": "temporary error"}],
        ),
        _candidate("c3", "S_b", _press("sw4")),
        _candidate("c4", "S_b", _press("sw9")),
        _executed("c3", "optimal", SUCCESS_OPTIMAL, _feedback("sw4")),
        _executed("c4", "error", FAILURE, _feedback("sw9", ok=False)),
        _situation("S_c", "c3", STAGE_1, _input(2, "user", "now say done")),
        _candidate("c5", "S_c", {"say": "done, I think", "tool_calls": []}),
        _candidate("c6", "S_c", _press("sw0")),
        _executed("c5", "suboptimal", SUCCESS_ACCEPTABLE),
        _executed("c6", "ongoing", execution=_feedback("sw0")),
        _situation("S_d", "c6", STAGE_1, _input(3, "env", '{"infos": "ok"}')),
        _candidate("c7", "S_d", {"say": "done", "tool_calls": []}),
        _executed("c7", "optimal", SUCCESS_OPTIMAL),
        _situation(
            "S_e",
            "c1",
            STAGE_0,
            _input(1, "env", '{"infos": "panda: press_button succeed"}'),
            link="alternative",
            coaching_attempt_ids=[1],
        ),
        _candidate("c8", "S_e", _press("sw4"), origin="coaching", coaching_attempt_ids=[1]),
        _executed("c8", "optimal", SUCCESS_OPTIMAL, _feedback("sw4")),
        ("run.finished", {}),
    ]


def stage(optimal: int, non_optimal: int, unassessed: int, total: int) -> dict[str, int]:
    """A saved stage score."""
    return {
        "optimal": optimal,
        "non-optimal": non_optimal,
        "unassessed": unassessed,
        "total_child": total,
    }


# Candidate storage id -> descendant score, worked out by hand from the picture above.
EXPECTED_SCORES: dict[int, dict[str, dict[str, int]]] = {
    0: {"stage_0": stage(1, 0, 0, 2), "stage_1": stage(1, 1, 0, 2)},  # c1: via S_b only
    1: {"stage_0": stage(0, 0, 0, 1)},  # c2: invalid leaf
    2: {"stage_0": stage(1, 0, 0, 1), "stage_1": stage(1, 1, 0, 2)},  # c3
    3: {"stage_0": stage(0, 0, 0, 1)},  # c4: failed leaf
    4: {"stage_1": stage(0, 1, 0, 1)},  # c5: suboptimal leaf
    5: {"stage_1": stage(1, 0, 0, 1)},  # c6: ongoing, then c7
    6: {"stage_1": stage(1, 0, 0, 1)},  # c7
    7: {"stage_0": stage(1, 0, 0, 1)},  # c8: the coached alternative
}

# Candidate storage id -> saved status.
EXPECTED_STATUSES = {
    0: "finished",
    1: "invalid",
    2: "optimal",
    3: "error",
    4: "suboptimal",
    5: "finished",
    6: "optimal",
    7: "optimal",
}


def known_events(run_id: str = "r1", *, finished: bool = False) -> list[AnyEvent]:
    """The known run's events, parsed, numbered from seq 0."""
    events = known_run_events() if finished else known_run_events()[:-1]
    return [
        parse_event({"type": kind, "run_id": run_id, "seq": seq, **fields})
        for seq, (kind, fields) in enumerate(events)
    ]


async def apply_known(store: GraphStore, run_id: str = "r1") -> RunGraph:
    """Apply the known run (still going) to a store and return its graph."""
    results = await store.apply(known_events(run_id))
    assert {result.outcome for result in results} == {"ok"}
    graph = await store.load(run_id)
    assert graph is not None
    return graph


_PRESS_SW0 = {"name": "press_button", "arguments": {"id": "sw0"}, "target_robot_name": "panda"}


def chain_run_events(run_id: str, situations: int) -> list[AnyEvent]:
    """A long run still going: a chain of situations, each answered by a candidate that
    goes on and one that fails its stage, parsed and numbered from seq 0."""
    raw: list[dict[str, object]] = [
        {"type": "run.started", "agent_url": "http://127.0.0.1:1", "scenario": "buttons",
         "target": "sw0", "target_kind": "button", "task_description": "press",
         "generator": {"name": "bench", "version": "1"}},
    ]  # fmt: skip
    stage = {"id": 0, "goal": "press sw0"}
    for sid in range(situations):
        parent = None if sid == 0 else f"c{sid - 1}"
        instruction = {"type": "env", "content": f"step {sid}: " + "feedback " * 20}
        raw.append({"type": "situation.created", "situation_id": f"s{sid}",
                    "parent_candidate_id": parent, "stage": stage,
                    "input": {"id": sid, "instruction": instruction}})  # fmt: skip
        for cid, output in ((f"c{sid}", {"tool_calls": [_PRESS_SW0]}), (f"x{sid}", {"say": "no"})):
            raw.append({"type": "candidate.created", "candidate_id": cid, "situation_id": f"s{sid}",
                        "response_status": "completed", "output": output})  # fmt: skip
        raw.append({"type": "candidate.executed", "candidate_id": f"c{sid}", "status": "ongoing"})
        raw.append({"type": "candidate.executed", "candidate_id": f"x{sid}", "status": "error",
                    "stage_end": {"event": "failure", "state": "exceeded"}})  # fmt: skip
    return [parse_event({**event, "run_id": run_id, "seq": seq}) for seq, event in enumerate(raw)]
