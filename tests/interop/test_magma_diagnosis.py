"""MAGMA-GEN's diagnosis format through gencoach: a scripted LLM answers as MAGMA-GEN's
`DiagnosisResult` does (the expected decision as text), gencoach accepts it, a MAGMA
agent repairs with it, and MAGMA's own parser reads every answer gencoach accepted."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from magma_gen.coaching.coach_structure import DiagnosisResult
from magma_runs import agent_inputs, simulate_until_proven, start_agent

from conftest import Processes, Stack

RUN = "interop-magma-diagnosis"
TASK = re.compile(r"Press (\w+) twice, then (\w+)\.")
COUNT = re.compile(r"integer from 1 to (\d+)")


class MagmaFormatLLM:
    """An OpenAI-compatible chat endpoint answering every diagnosis in MAGMA-GEN's format:
    the last decision, and the task's second button pressed, as MAGMA-GEN's free text."""

    def __init__(self) -> None:
        self.answers: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())

    @property
    def endpoint(self) -> str:
        """The chat-completions URL."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/chat/completions"

    def answer(self, body: dict[str, Any]) -> str:
        """The diagnosis, built and serialised by MAGMA-GEN's own `DiagnosisResult`."""
        prompt = "\n".join(str(message.get("content", "")) for message in body["messages"])
        task, count = TASK.search(prompt), COUNT.search(prompt)
        button = task.group(2) if task else "sw0"
        result = DiagnosisResult(
            root_cause_step=int(count.group(1)) if count else 1,
            explanation="the last press repeated the first button instead of the second",
            recommended_repair=f'press_button(id="{button}") with panda',
        )
        text = json.dumps(result.to_output_dict())
        if count is None:  # not a diagnosis prompt (a reachability probe): any words do
            return "ok"
        self.answers.append(text)
        return text

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        llm = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                message = {"role": "assistant", "content": llm.answer(body)}
                data = json.dumps({"choices": [{"index": 0, "message": message}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        return Handler


@pytest.fixture
def magma_llm() -> Iterator[MagmaFormatLLM]:
    """The MAGMA-format LLM, served on loopback for one test."""
    llm = MagmaFormatLLM()
    thread = threading.Thread(target=llm.server.serve_forever, daemon=True)
    thread.start()
    yield llm
    llm.server.shutdown()
    llm.server.server_close()


def _settings(endpoint: str) -> dict[str, Any]:
    routes = {"format": False, "no_action": False, "exceeded": False, "suboptimal": False}
    return {
        "coaching": {"enabled": True, "lease_s": 10, "routes": {**routes, "text_rewrite": False}},
        "backends": {
            "magma-format": {"type": "openai", "endpoint": endpoint, "default_model": "m"}
        },
        "workers": {"processes": 2, "job_timeout_s": 60},
    }


def test_magma_format_diagnoses_are_accepted_and_read_alike_by_magmas_parser(
    gencoach_stack: Callable[[dict[str, Any]], Stack],
    gencoach_bin: Path,
    magma_python: Path,
    processes: Processes,
    redis_url: str,
    magma_llm: MagmaFormatLLM,
    tmp_path: Path,
) -> None:
    """Each MAGMA-format answer is accepted the first time (no re-ask); MAGMA's
    `DiagnosisResult.from_raw_output` reads every answer gencoach accepted as gencoach's
    diagnosis says (decision, reason, expected text); the MAGMA agent's repair from that
    text is reinjected, and its branch is proven."""
    stack = gencoach_stack(_settings(magma_llm.endpoint))
    agent_url, log = start_agent(magma_python, processes, tmp_path)
    proven = simulate_until_proven(gencoach_bin, agent_url, redis_url, stack, RUN, tmp_path)
    diagnosed = [r for r in stack.requests_of(RUN) if r["diagnosis"] is not None]
    assert len(magma_llm.answers) == len(diagnosed), "every answer accepted, none asked again"
    by_answer = {
        (d.root_cause_step, d.explanation, d.recommended_repair)
        for d in map(DiagnosisResult.from_raw_output, magma_llm.answers)
        if d is not None
    }
    accepted = {
        (r["diagnosis"]["decision_index"], r["diagnosis"]["explanation"],
         r["diagnosis"]["expected_decision"])
        for r in diagnosed
    }  # fmt: skip
    assert accepted == by_answer
    assert proven[0]["decision_source"] == "unknown", "a MAGMA agent says nothing of it"
    coached = [item for item in agent_inputs(log) if "coaching" in item["extra_keys"]]
    assert coached, "the agent never received a reinjected correction"
    plan = coached[0]["memory"]["plan"]
    press = coached[0]["extra_keys"]["coaching"]["decision"]["tool_calls"][0]
    assert press["arguments"] == {"id": plan[2]}  # the button the MAGMA text named
