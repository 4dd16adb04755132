"""The reference agent never logs a session's credentials in clear: a backend that echoes
the API key or the `X-Api-Key` value in its refusals gets `***` into the agent's log and
its coaching logs, as the controller and workers mask theirs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from gencoach.config.scrubbing import SECRET_MASK
from tests.agents.payloads import coaching_request, session_config
from tests.support.llm_server import ScriptedLLMServer, error
from tests.support.processes import answers_200, free_port, kill_tree, wait_started

pytestmark = pytest.mark.slow

KEY = "sk-live-0123456789abcdef"
HEADER_KEY = "xk-9876543210fedcba"


def test_echoed_session_credentials_are_masked_in_the_agents_log(
    llm: ScriptedLLMServer, tmp_path: Path
) -> None:
    """Refusals quoting both credentials are logged (`backend.structured_output_refused`,
    `backend.refused`) with `***` in their place; neither value appears in the log or in
    the coach's answer."""
    echo = f"Incorrect API key provided: {KEY}; X-Api-Key {HEADER_KEY} is unknown"
    llm.script(*[error(401, echo)] * 6)
    port = free_port()
    log_path = tmp_path / "agent.log"
    command = [sys.executable, "-m", "gencoach", "agent", "serve", "--port", str(port)]
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_started(lambda: answers_200(f"{url}/health"), process, log_path, "the agent")
        config = session_config(llm.endpoint)
        backend = config["backends"]["checker"]
        backend["max_retry"] = 0
        backend["headers"].update({"Authorization": f"Bearer {KEY}", "X-Api-Key": HEADER_KEY})
        opened = httpx.put(f"{url}/v1/coaching/sessions/leak", json=config, timeout=30)
        assert opened.status_code == 204, opened.text
        body = coaching_request("failure", "leak", "r1", {})
        body["diagnosis"]["expected_decision"] = "press the second button"
        answer = httpx.post(f"{url}/v1/coaching", json=body, timeout=60)
        assert answer.status_code == 200, answer.text
    finally:
        kill_tree(process.pid)
        process.wait(10)
    text = log_path.read_text()
    refusals = [
        line
        for line in text.splitlines()
        if "backend.structured_output_refused" in line or '"backend.refused"' in line
    ]
    assert any("backend.structured_output_refused" in line for line in refusals), text
    assert any('"backend.refused"' in line for line in refusals), text
    assert all(f"provided: {SECRET_MASK}; X-Api-Key {SECRET_MASK}" in line for line in refusals)
    for seen in (text, answer.text):
        assert KEY not in seen
        assert HEADER_KEY not in seen
