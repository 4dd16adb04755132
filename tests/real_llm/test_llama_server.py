"""gencoach against a real llama.cpp server (SmolLM2-135M-Instruct on CPU): diagnosis and
rewrite jobs in every structured-output mode, bounded calls, and one correction through
the whole loop. A 135M model is weak: answers may be refused, but always with a reason."""

from __future__ import annotations

import json
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from gencoach.config.settings import Settings
from gencoach.protocol.jobs import AnyJob, JobResult
from gencoach.reporting.client import Reporter
from gencoach.workers.context import worker_context
from gencoach.workers.job_functions import perform
from gencoach.workers.resources import JobResources
from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import requests_of, two_step_run
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import RUN_STARTED
from tests.support.llama_server import CALLS, MODEL_ALIAS, LlamaServer
from tests.workers.builders import admit, diagnosis_job, rewrite_job

MAX_TOKENS = 256


def _settings(server: LlamaServer, mode: str) -> Settings:
    backend = {
        "type": "openai",
        "endpoint": server.endpoint,
        "default_model": MODEL_ALIAS,
        "timeout_s": 60.0,
        "max_retries": 1,
        "structured_output": mode,
        "max_tokens": MAX_TOKENS,
    }
    return Settings.model_validate({"backends": {"coach": backend}, "log": {"format": "json"}})


def _perform(
    job: AnyJob, settings: Settings, redis_url: str
) -> tuple[JobResult, list[MutableMapping[str, Any]]]:
    """Run the job as a worker does, its request admitted first; return its result and logs."""
    admit(redis_url, job.lease)

    async def run() -> JobResult:
        with worker_context(settings, redis_url) as context:
            async with JobResources(context) as resources:
                return await perform(job, resources)

    with capture_logs() as logs:
        result = anyio.run(run)
    completed = [entry for entry in logs if entry["event"] == "backend.completed"]
    CALLS.extend(dict(entry) for entry in completed)
    return result, logs


def _json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def _events(logs: list[MutableMapping[str, Any]], name: str) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == name]


def _answered_or_refused_with_reason(result: JobResult) -> None:
    if result.status == "done":
        assert result.diagnosis is not None or result.rewrite is not None
    else:
        assert result.status in ("abandoned", "error")
        assert result.reason, "a refused answer says why"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", ["auto", "json_object", "none"])
def test_a_diagnosis_job_in_each_working_mode(
    llama: LlamaServer, redis_url: str, mode: str
) -> None:
    """auto falls back from json_schema to json_object; json_object and none are used as
    set; the answer is validated or refused with its reason, within two model calls."""
    result, logs = _perform(
        diagnosis_job(request_id=f"diag-{mode}"), _settings(llama, mode), redis_url
    )
    _answered_or_refused_with_reason(result)
    completed = _events(logs, "backend.completed")
    # A small model may run into max_tokens: that call ends the job with its reason.
    calls = completed + _events(logs, "backend.truncated")
    assert 1 <= len(calls) <= 2, "one answer, and at most one re-ask"
    assert _events(logs, "backend.retry") == [], "no retry storm"
    assert all(entry["completion_tokens"] <= MAX_TOKENS for entry in completed)
    if mode == "auto":
        refused = _events(logs, "backend.structured_output_refused")
        assert [entry["mode"] for entry in refused] == ["json_schema"]
        assert [e["mode"] for e in _events(logs, "backend.structured_output")] == ["json_object"]
    if result.status == "done":
        assert result.diagnosis is not None
        assert 1 <= result.diagnosis.decision_index <= 2, "the schema bounds the number"


@pytest.mark.timeout(120)
def test_json_schema_set_explicitly_is_refused_naming_the_setting(
    llama: LlamaServer, redis_url: str
) -> None:
    """llama.cpp refuses json_schema: the job ends in error at once, saying what to set."""
    result, logs = _perform(
        diagnosis_job(request_id="diag-strict"), _settings(llama, "json_schema"), redis_url
    )
    assert result.status == "error"
    assert result.reason is not None
    assert "set structured_output: json_object" in result.reason
    assert _events(logs, "backend.retry") == []
    assert _events(logs, "backend.completed") == []


@pytest.mark.timeout(120)
def test_a_rewrite_job_against_the_real_server(llama: LlamaServer, redis_url: str) -> None:
    """A text rewrite gets a validated `say`, or an error with its reason, within max_tokens."""
    result, logs = _perform(rewrite_job(), _settings(llama, "auto"), redis_url)
    _answered_or_refused_with_reason(result)
    if result.status == "done":
        assert result.rewrite is not None
        assert result.rewrite.strip()
    assert all(e["completion_tokens"] <= MAX_TOKENS for e in _events(logs, "backend.completed"))


@pytest.mark.timeout(300)
def test_one_correction_through_the_loop_with_the_real_model(
    llama: LlamaServer,
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    redis_url: str,
) -> None:
    """A failed two-decision stage is diagnosed by the real model (default settings but a
    tighter token bound) and repaired by the scripted agent: the request reaches at least
    corrected (a 135M model's corrections are not expected to be proven)."""
    backend = {
        "type": "openai",
        "endpoint": llama.endpoint,
        "default_model": MODEL_ALIAS,
        "timeout_s": 60,
        "max_tokens": MAX_TOKENS,
    }
    settings = {
        "coaching": {"enabled": True, "routes": {"format": False, "suboptimal": False}},
        "backends": {"llama": backend},
        "workers": {"processes": 2, "job_timeout_s": 200},
    }
    controller = controller_factory(settings=settings)
    controller.start()
    controller.start_workers()
    with Reporter("real", redis_url=redis_url) as reporter:
        reporter.emit("run.started", **{**RUN_STARTED, "agent_url": scripted_agent.url})
        two_step_run(
            reporter,
            "real",
            {"id": 0, "goal": "press sw0"},
            {"event": "failure", "state": "exceeded"},
        )
    reached = {"corrected", "reinjected", "executed", "proven", "unproven"}
    ended = reached | {"abandoned", "error", "declined", "skipped"}
    request = wait_for(
        lambda: (r := requests_of(controller, "real").get("failure")) and r["state"] in ended and r,
        timeout_s=240,
        what="the failure request to be diagnosed by the real model and repaired",
    )
    CALLS.extend(
        event
        for log in controller.folder.glob("workers-*.log")
        for event in _json_lines(log)
        if event.get("event") == "backend.completed"
    )
    assert request["state"] in reached, request["reason"]
    assert request["diagnosis"]["rule"] == "llm"
    assert scripted_agent.coaching_requests, "the agent was asked for the repair"
