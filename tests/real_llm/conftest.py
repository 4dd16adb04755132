"""Real-LLM tests run only when asked for (`-m real_llm`, as `make test-llm` does), against
one llama.cpp server for the session; without the `llm` extra they skip saying so."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.llama_server import CALLS, LlamaServer, missing_extra, start_server


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test here `real_llm`; skip them unless the run selects that marker."""
    selected = "real_llm" in (config.getoption("markexpr") or "")
    for item in items:
        if "tests/real_llm/" in item.nodeid:
            item.add_marker(pytest.mark.real_llm)
            if not selected:
                item.add_marker(pytest.mark.skip(reason="real-LLM tests run with make test-llm"))


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The real server, started once; the tests skip with the reason when it cannot be."""
    reason = missing_extra()
    if reason is not None:
        pytest.skip(reason)
    server = start_server(tmp_path_factory.mktemp("llama") / "server.log")
    yield server
    server.stop()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the latency and tokens of every real model call (for BENCHMARKS.md)."""
    if not CALLS:
        return
    latencies = sorted(float(call["latency_s"]) for call in CALLS)
    prompts = sorted(int(call["prompt_tokens"]) for call in CALLS)
    completions = sorted(int(call["completion_tokens"]) for call in CALLS)

    def spread(values: list[Any]) -> str:
        return f"median {statistics.median(values)}, min {values[0]}, max {values[-1]}"

    terminalreporter.section("real LLM calls")
    terminalreporter.write_line(f"calls: {len(CALLS)}")
    terminalreporter.write_line(f"latency_s: {spread(latencies)}")
    terminalreporter.write_line(f"prompt_tokens: {spread(prompts)}")
    terminalreporter.write_line(f"completion_tokens: {spread(completions)}")
