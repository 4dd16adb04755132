"""The closed-loop benchmark's datasets and fine-tuning.

Rows come from `gencoach export --format chat` (TRL's prompt/completion shape, no
reasoning: the agent's model does not reason). The export writes the trajectory as
OpenAI tool calls and `tool` results; the env agent prompts its model with its own
system message, earlier decisions as text and feedback as user messages
(`gencoach.agents.reference.llm.chat_messages`). `agent_prompt` rewrites a row's prompt
into that shape, so the model is trained on what it is served; the answer (the
completion) is left as exported.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gencoach.protocol import AgentDecision, ToolCall
from gencoach.protocol.decision_text import format_decision

EXPORT_OPTIONS = {"shape": "prompt_completion", "reasoning": False}


def export_rows(saves: Path, out: Path) -> list[dict[str, Any]]:
    """The chat rows gencoach's export selects from the saves below `saves` (none when the
    export finds nothing to write)."""
    options = out.parent / f"{out.name}-options.json"
    options.parent.mkdir(parents=True, exist_ok=True)
    options.write_text(json.dumps(EXPORT_OPTIONS))
    command = [
        sys.executable, "-m", "gencoach", "export", str(saves), "--format", "chat",
        "--options", str(options), "--out", str(out), "--any-agent",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    (out.parent / f"{out.name}-export.log").write_text(done.stdout + done.stderr)
    if done.returncode == 2:
        return []
    path = out / "chat.jsonl"
    if not path.is_file():
        raise RuntimeError(f"gencoach export wrote no {path}:\n{done.stdout}{done.stderr}")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _call_text(message: dict[str, Any], robot: str) -> str:
    calls = [
        ToolCall(
            name=call["function"]["name"],
            arguments=json.loads(call["function"]["arguments"] or "{}"),
            target_robot_name=robot,
        )
        for call in message.get("tool_calls") or []
    ]
    return format_decision(AgentDecision(say=str(message.get("content") or ""), tool_calls=calls))


def agent_prompt(prompt: list[dict[str, Any]], system: str, robot: str) -> list[dict[str, Any]]:
    """A row's prompt as the env agent writes it for its model."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for message in prompt:
        role = message["role"]
        if role == "system":
            continue
        if role == "assistant":
            messages.append({"role": "assistant", "content": _call_text(message, robot)})
        elif role == "tool":
            feedback = f"Environment feedback: {message['content']}"
            messages.append({"role": "user", "content": feedback})
        else:
            messages.append({"role": "user", "content": str(message["content"])})
    return messages


def training_rows(rows: list[dict[str, Any]], system: str, robot: str) -> list[dict[str, Any]]:
    """Prompt/completion rows in the agent's prompt shape, the tools kept."""
    return [
        {
            "prompt": agent_prompt(row["prompt"], system, robot),
            "completion": [
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": row["completion"][-1].get("tool_calls") or [],
                }
            ],
            "tools": row["tools"],
        }
        for row in rows
        if row["completion"] and row["completion"][-1].get("tool_calls")
    ]


def matched(
    first: list[dict[str, Any]], second: list[dict[str, Any]], seed: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Both datasets cut to the same number of rows (a seeded sample of the larger); when
    one is empty (nothing to match), the other is kept whole."""
    size = min(len(first), len(second)) or max(len(first), len(second))
    rng = random.Random(seed)
    return (
        rng.sample(first, size) if len(first) > size else list(first),
        rng.sample(second, size) if len(second) > size else list(second),
    )


def count_tokens(rows: list[dict[str, Any]], tokenizer: Any) -> int:
    """The tokens of the rows as the trainer renders them (prompt and completion)."""
    total = 0
    for row in rows:
        text = tokenizer.apply_chat_template(
            row["prompt"] + row["completion"], tools=row["tools"], tokenize=False
        )
        total += len(tokenizer(text, add_special_tokens=False)["input_ids"])
    return total


@dataclass(frozen=True)
class TrainSettings:
    """The fine-tuning every arm gets, the same."""

    steps: int
    learning_rate: float = 5e-5
    batch_size: int = 2
    max_length: int = 1024
    seed: int = 0


def fine_tune(
    rows: list[dict[str, Any]], tokenizer: Any, settings: TrainSettings, out: Path
) -> tuple[Any, float]:
    """SmolLM2 fine-tuned on the rows with TRL's SFT trainer on the CPU (the loss on the
    completion only); the model and its final training loss."""
    import datasets
    from trl import SFTConfig, SFTTrainer

    from benchmarks.chat_model import load_model

    # Arrow needs one type per column: tool-call arguments stay JSON strings.
    train = datasets.Dataset.from_list(rows)
    args = SFTConfig(
        output_dir=str(out),
        report_to=[],
        max_steps=settings.steps,
        per_device_train_batch_size=settings.batch_size,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        max_length=settings.max_length,
        logging_steps=1,
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        seed=settings.seed,
        dataloader_num_workers=0,
    )
    model = load_model()
    trainer = SFTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    result = trainer.train()
    model.eval()
    return model, float(result.training_loss)
