"""Schemathesis against a live controller: the API keeps to its own OpenAPI document.

`make test-api` runs it (the `api-test` extra installs schemathesis). The controller
serves its document at `/openapi.json`; schemathesis generates requests from it, a
bounded number per operation, and checks every answer against it (status documented,
body matching its schema, no server error), once without a token and once with the
API's token, against a controller on a Redis of its own. Before the pass the test
reports two runs (one active, one finished whose id has a `/`) and a person's
intervention; schemathesis draws run, candidate and request ids from them half the time,
so the run-scoped routes are reached past their 404. Any warning schemathesis gives (an
operation that only ever answered 404, or refused every schema-valid body) fails the run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from gencoach.reporting.client import Reporter
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import known_run_events
from tests.support.processes import STARTUP_S, free_port
from tests.support.restartable_redis import RestartableRedis

# A pass is about 3 minutes on a loaded 2-core machine (GC_API_EXAMPLES=25).
pytestmark = [pytest.mark.api, pytest.mark.slow, pytest.mark.timeout(900)]

TOKEN = "schemathesis-token-0123456789"
EXAMPLES = os.environ.get("GC_API_EXAMPLES", "25")
SCHEMATHESIS = shutil.which("schemathesis", path=str(Path(sys.executable).parent))


ACTIVE, FINISHED = "api-active", "api/finished"
CANDIDATES = ["c1", "c3", "c4", "c5", "c6", "c7"]  # of the known run's graph
INTERVENTION = {
    "candidate_id": "c4",
    "diagnosis": {"explanation": "pressed sw9", "expected_decision": "press sw4"},
    "decision": {"say": "I press sw4 instead"},
}


def _seed(controller: ControllerProcess, redis_url: str, headers: dict[str, str]) -> str:
    """Report the two runs (their agent is unreachable: no branch is ever recorded, so no
    exploration budget is spent) and a person's intervention; the intervention's id."""
    agent_url = f"http://127.0.0.1:{free_port()}"
    for run_id, events in ((ACTIVE, known_run_events()[:-1]), (FINISHED, known_run_events())):
        with Reporter(run_id, redis_url=redis_url) as reporter:
            for kind, fields in events:
                extra = {"agent_url": agent_url} if kind == "run.started" else {}
                reporter.emit(kind, **{**fields, **extra})

    def state(run_id: str) -> Any:
        answer = httpx.get(f"{controller.url}/v1/runs/{quote(run_id, safe='')}", headers=headers)
        return answer.json()["state"] if answer.status_code == 200 else None

    wait_for(lambda: state(ACTIVE) == "active", STARTUP_S, f"{ACTIVE} to be applied")
    wait_for(lambda: state(FINISHED) in ("finished", "saved"), STARTUP_S, f"{FINISHED} to end")
    url = f"{controller.url}/v1/runs/{ACTIVE}/interventions"
    accepted = httpx.post(url, json=INTERVENTION, headers=headers)
    assert accepted.status_code == 202, accepted.text
    return str(accepted.json()["request_id"])


def _config(folder: Path, request_id: str) -> Path:
    """Schemathesis's config: the seeded ids as dictionaries each id parameter draws from
    half the time, and every warning a failure."""
    values = {
        "runs": [ACTIVE, FINISHED],
        "candidates": CANDIDATES,
        "storage_ids": list(range(8)),  # the known run's candidates as the console names them
        "requests": [request_id],
    }
    bound = {
        "path.run_id": "runs",
        "query.run": "runs",
        "body.candidate_id": "candidates",
        "query.candidate": "storage_ids",
        "query.request": "requests",
    }
    lines = ["warnings = { fail-on = true }", ""]
    for name, entries in values.items():
        lines += [f"[dictionaries.{name}]", f"values = {json.dumps(entries)}", ""]
    lines.append("[parameters]")
    for key, name in bound.items():
        lines.append(f'"{key}" = {{ dictionary = "{name}", probability = 0.5 }}')
    path = folder / "schemathesis.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(controller: ControllerProcess, redis_url: str, *headers: str) -> None:
    if SCHEMATHESIS is None:
        pytest.skip("schemathesis is not installed: `make test-api` installs it")
    sent = dict(header.split(": ", 1) for header in headers)
    config = _config(controller.folder, _seed(controller, redis_url, sent))
    command = [
        SCHEMATHESIS,
        "--config-file",
        str(config),
        "run",
        f"{controller.url}/openapi.json",
        "--checks",
        "all",
        # The document gives each body's shape; the server also refuses what a schema
        # cannot say (5.0 as a budget, an event of no known type), so a schema-valid body
        # may be a documented 422.
        "--exclude-checks",
        "positive_data_acceptance",
        "--max-examples",
        EXAMPLES,
        "--seed",
        "1",
        "--request-timeout",
        "30",
        *[arg for header in headers for arg in ("-H", header)],
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    output = result.stdout + result.stderr
    log = controller.log_text()[-4000:]
    assert result.returncode == 0, f"{output}\n--- the controller's log, its end ---\n{log}"


def test_the_api_keeps_to_its_document_without_a_token(
    tmp_path: Path, private_redis: RestartableRedis
) -> None:
    """No token configured: every route open; every answer is one the document names."""
    controller = ControllerProcess(tmp_path, private_redis.url)
    try:
        controller.start()
        _run(controller, private_redis.url)
    finally:
        controller.stop()


def test_the_api_keeps_to_its_document_with_a_token(
    tmp_path: Path, private_redis: RestartableRedis
) -> None:
    """A token configured and sent: the writing routes are reached and keep to it too."""
    controller = ControllerProcess(
        tmp_path,
        private_redis.url,
        api={"token_env": "GC_SCHEMATHESIS_TOKEN"},
        env={"GC_SCHEMATHESIS_TOKEN": TOKEN},
    )
    try:
        controller.start()
        _run(controller, private_redis.url, f"Authorization: Bearer {TOKEN}")
    finally:
        controller.stop()
