"""The demo's summary names why nothing was proven, from the controller's and workers' logs,
and its waits stretch for a slow model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gencoach.demo.causes import causes
from gencoach.demo.pacing import Pacing, demo_pacing
from tests.support.llm_server import delayed, reply, scripted_llm_servers


def _log(path: Path, *events: dict[str, Any]) -> Path:
    path.write_text("not json\n" + "".join(json.dumps(event) + "\n" for event in events))
    return path


def test_a_refused_structured_output_is_named_with_the_setting_to_change(tmp_path: Path) -> None:
    """backend.refused with the strict-mode advice becomes one sentence naming the setting,
    ranked before the requests it ended; repeated events are said once."""
    refused = {
        "event": "backend.refused",
        "backend": "llm",
        "cause": "HTTP 500: ...; it refuses structured_output json_schema: "
        "set structured_output: json_object (or auto)",
    }
    ended = {"event": "coaching.ended", "state": "error", "reason": "backend 'llm': HTTP 500"}
    workers = _log(tmp_path / "workers.log", refused, refused)
    controller = _log(tmp_path / "controller.log", ended)
    assert causes([controller, workers]) == [
        "backend llm refused json_schema; set structured_output: json_object",
        "coaching requests ended error: backend 'llm': HTTP 500",
    ]


def test_truncation_timeouts_and_idle_queues_are_named(tmp_path: Path) -> None:
    """Cut answers, jobs past their timeout and unconsumed queues each say what to change."""
    log = _log(
        tmp_path / "workers.log",
        {"event": "backend.truncated", "backend": "llm", "max_tokens": 64},
        {"event": "job.finished", "reason": "the job did not finish within 120.0 s"},
        {"event": "queue.backlog", "message": "gencoach-diagnosis: 3 jobs waiting", "workers": 1},
    )
    assert causes([log, tmp_path / "missing.log"]) == [
        "backend llm answers were cut at max_tokens 64; raise max_tokens",
        "coaching jobs timed out (the job did not finish within 120.0 s); raise --job-timeout",
        "gencoach-diagnosis: 3 jobs waiting: the model is slower than the run; "
        "raise --max-wall-s or --branch-grace",
    ]


def test_waits_scale_with_a_slow_first_call_unless_given() -> None:
    """A model answering in about 4 s doubles the default waits; a given wait is kept."""
    with scripted_llm_servers() as start:
        llm = start()
        llm.script(delayed(4.0, reply('{"ok": true}')))
        pacing, call_s = demo_pacing(llm.endpoint, "m", {"job_timeout_s": 30.0})
    assert call_s is not None
    assert call_s >= 4.0
    assert pacing.job_timeout_s == 30.0
    assert pacing.agent_timeout_s >= 2 * Pacing().agent_timeout_s
    assert pacing.max_wall_s >= 2 * Pacing().max_wall_s
    assert pacing.branch_grace_s >= 2 * Pacing().branch_grace_s
    prompt = llm.requests[0].body["messages"][0]["content"]
    assert len(prompt) > 2000, "the probe is about as long as a diagnosis prompt"


def test_without_a_model_the_default_waits_hold() -> None:
    """No endpoint: no call is measured and the defaults stand."""
    assert demo_pacing(None, None, {}) == (Pacing(), None)


def test_a_very_slow_model_stretches_timeouts_fully_but_scenario_time_at_most_fourfold() -> None:
    """At 200 s a call, timeouts and grace grow a hundredfold; each scenario's time fourfold."""
    scaled = Pacing().scaled(200.0)
    assert scaled.job_timeout_s == 100 * Pacing().job_timeout_s
    assert scaled.branch_grace_s == 100 * Pacing().branch_grace_s
    assert scaled.max_wall_s == 4 * Pacing().max_wall_s
