"""A controller coached by the reference simulator's privileged teacher, and an agent
repair that follows the teacher's diagnosis: the whole loop without a model."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gencoach.protocol import REPLACEMENT_POINT
from gencoach.protocol.decision_text import parse_decision
from tests.support.controller import ControllerProcess

TEACHER_SETTINGS: dict[str, Any] = {
    "coaching": {
        "enabled": True,
        "lease_s": 5,
        "routes": {"format": False, "suboptimal": False, "text_rewrite": False},
    },
    "backends": {"teacher": {"type": "python", "endpoint": "gencoach.sim.teacher:diagnose"}},
    "workers": {"processes": 2, "job_timeout_s": 60},
}


def follow_the_diagnosis(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The agent's repair: replace the faulty decision by the expected one, when it parses."""
    diagnosis = request.get("diagnosis") or {}
    decision = parse_decision(diagnosis.get("expected_decision") or "")
    answer: dict[str, Any] = {"request_id": request["request_id"], "logs": [], "proposals": []}
    if decision is None:
        return 200, {**answer, "status": "abandoned", "reason": "no decision to follow"}
    payload = {"kind": "replace_decision", "decision": decision.model_dump(mode="json")}
    proposal = {"reinjection_point_id": REPLACEMENT_POINT, "extra_keys": payload}
    return 200, {**answer, "status": "corrected", "proposals": [proposal], "reason": None}


@contextmanager
def teacher_controller(
    folder: Path, redis_url: str, settings: dict[str, Any] | None = None
) -> Iterator[ControllerProcess]:
    """A controller with a teacher (the reference one by default) as its one backend, and
    its workers; killed after."""
    process = ControllerProcess(folder, redis_url, settings=settings or TEACHER_SETTINGS)
    process.start()
    process.start_workers()
    try:
        yield process
    finally:
        process.stop()
