"""TRL's data utilities render chat and preference rows, tools included, and its trainers
prepare them: `SFTTrainer` and `DPOTrainer` tokenize the datasets before any training.

SmolLM2's own chat template ignores tools and content parts, so the rows are rendered
with a ChatML template that declares the tools, writes tool calls and renders each
content part, a thinking part as `<think>` (docs/export.md names this setting: a chat
template that renders tools and content parts; the chat rows carry thinking parts, as
reasoning is on by default). The trainers get a tiny model built from a config,
random weights, nothing downloaded; only their dataset preparation is exercised.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import datasets
import pytest
from transformers import LlamaConfig, LlamaForCausalLM
from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer
from trl.data_utils import apply_chat_template, is_conversational

from tests.trainers.data import THINKING

# A demo run and the GGUF tokenizer load once per session, inside the first test's budget.
pytestmark = pytest.mark.timeout(300)

TOOL_TEMPLATE = (
    "{% set nl = '\\n' %}"
    "{% macro text(content) %}{% if content is string %}{{ content }}{% else %}"
    "{% for part in content %}{% if part['type'] == 'thinking' %}"
    "{{ '<think>\\n' + part['thinking'] + '\\n</think>\\n' }}"
    "{% else %}{{ part['text'] or '' }}{% endif %}{% endfor %}{% endif %}{% endmacro %}"
    "{% if tools %}{{ '<|im_start|>system' + nl }}"
    "{% if messages[0]['role'] == 'system' %}{{ text(messages[0]['content']) + nl + nl }}"
    "{% endif %}"
    "{{ '# Tools' + nl + '<tools>' + nl }}"
    "{% for tool in tools %}{{ tool | tojson }}{{ nl }}{% endfor %}"
    "{{ '</tools><|im_end|>' + nl }}"
    "{% elif messages[0]['role'] == 'system' %}"
    "{{ '<|im_start|>system' + nl + text(messages[0]['content']) + '<|im_end|>' + nl }}"
    "{% endif %}"
    "{% for message in messages %}{% if message['role'] != 'system' %}"
    "{{ '<|im_start|>' + message['role'] + nl + text(message['content'] or '') }}"
    "{% for call in message.get('tool_calls') or [] %}"
    "{{ nl + '<tool_call>' + nl + '{\"name\": \"' + call['function']['name'] }}"
    "{{ '\", \"arguments\": ' + call['function']['arguments'] + '}' + nl + '</tool_call>' }}"
    "{% endfor %}{{ '<|im_end|>' + nl }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant' + nl }}{% endif %}"
)
"""ChatML with tools, tool calls and content parts: a thinking part as `<think>` before
the text (what a reasoning model's template does with its reasoning)."""


@pytest.fixture(scope="module")
def tool_tokenizer(tokenizer: Any) -> Any:
    """The GGUF tokenizer with a chat template that renders tools and tool calls."""
    tool_aware = copy.deepcopy(tokenizer)
    tool_aware.chat_template = TOOL_TEMPLATE
    if tool_aware.pad_token is None:
        tool_aware.pad_token = tool_aware.eos_token
    return tool_aware


def _load(folder: Path, name: str, cache: Path) -> Any:
    return datasets.load_dataset(
        "json", data_files=str(folder / name), split="train", cache_dir=str(cache)
    )


def test_chat_rows_render_with_their_tools_and_calls(
    exports: dict[str, Path], tool_tokenizer: Any, tmp_path: Path
) -> None:
    """`apply_chat_template` renders each chat row with its tools and its tool calls."""
    for row in _load(exports["chat"], "chat_train.jsonl", tmp_path):
        assert is_conversational(row)
        text = apply_chat_template(
            {"messages": row["messages"]}, tool_tokenizer, tools=row["tools"]
        )["text"]
        assert '"name": "press_button"' in text
        assert "<tools>" in text
        assert '"target_robot_name": "panda"' in text
        assert f"<think>\n{THINKING.format(row['candidate_id'])}\n</think>" in text


def test_preference_rows_render_prompt_chosen_and_rejected_with_tools(
    exports: dict[str, Path], tool_tokenizer: Any, tmp_path: Path
) -> None:
    """A preference row renders as TRL's prompt, chosen and rejected texts, tools declared."""
    rows = _load(exports["preference"], "preference_train.jsonl", tmp_path)
    assert rows.num_rows > 0
    for row in rows:
        example = {key: row[key] for key in ("prompt", "chosen", "rejected")}
        rendered = apply_chat_template(example, tool_tokenizer, tools=row["tools"])
        assert "<tools>" in rendered["prompt"]
        assert rendered["prompt"].endswith("<|im_start|>assistant\n")
        assert "<tool_call>" in rendered["chosen"]
        assert rendered["chosen"] != rendered["rejected"]


def _tiny_model(tokenizer: Any) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=4096,
    )
    return LlamaForCausalLM(config)


def _sft_prepared(train: Any, tokenizer: Any, tmp_path: Path) -> Any:
    """The dataset as SFTTrainer prepares it (tokenized, masks folded into labels)."""
    args = SFTConfig(
        output_dir=str(tmp_path / "sft"), report_to=[], max_length=None, use_cpu=True, bf16=False
    )
    trainer = SFTTrainer(
        model=_tiny_model(tokenizer), args=args, train_dataset=train, processing_class=tokenizer
    )
    return trainer.train_dataset


def test_sft_trainer_prepares_the_chat_dataset(
    exports: dict[str, Path], tool_tokenizer: Any, tmp_path: Path
) -> None:
    """SFTTrainer tokenizes the chat rows (tools from the `tools` column) without error."""
    train = _load(exports["chat"], "chat_train.jsonl", tmp_path)
    prepared = _sft_prepared(train, tool_tokenizer, tmp_path)
    assert prepared.num_rows == train.num_rows
    first = tool_tokenizer.decode(prepared[0]["input_ids"])
    assert "<tools>" in first
    assert THINKING.format(train[0]["candidate_id"]) in first


def test_dpo_trainer_prepares_the_preference_dataset(
    exports: dict[str, Path], tool_tokenizer: Any, tmp_path: Path
) -> None:
    """DPOTrainer tokenizes prompt, chosen and rejected, with the row's tools declared."""
    train = _load(exports["preference"], "preference_train.jsonl", tmp_path)
    args = DPOConfig(
        output_dir=str(tmp_path / "dpo"), report_to=[], max_length=None, use_cpu=True, bf16=False
    )
    trainer = DPOTrainer(
        model=_tiny_model(tool_tokenizer),
        ref_model=_tiny_model(tool_tokenizer),
        args=args,
        train_dataset=train,
        processing_class=tool_tokenizer,
    )
    prepared = trainer.train_dataset
    assert prepared.num_rows == train.num_rows
    assert "<tools>" in tool_tokenizer.decode(prepared[0]["prompt_ids"])
    assert "<tool_call>" in tool_tokenizer.decode(prepared[0]["chosen_ids"])


def test_prompt_completion_rows_render_and_prepare_for_the_sft_trainer(
    exports: dict[str, Path], tool_tokenizer: Any, tmp_path: Path
) -> None:
    """TRL's own preparation of conversational prompt/completion rows: the prompt ends
    where the assistant starts, the completion is the answer, and SFTTrainer tokenizes
    them with a completion mask over the answer only."""
    train = _load(exports["chat-prompt-completion"], "chat_train.jsonl", tmp_path)
    assert train.num_rows > 0
    for row in train:
        assert is_conversational(row)
        example = {"prompt": row["prompt"], "completion": row["completion"]}
        rendered = apply_chat_template(example, tool_tokenizer, tools=row["tools"])
        assert "<tools>" in rendered["prompt"]
        assert rendered["prompt"].endswith("<|im_start|>assistant\n")
        assert rendered["completion"].endswith("<|im_end|>\n")
        thought = THINKING.format(row["candidate_id"])
        assert rendered["completion"].startswith(f"<think>\n{thought}\n</think>\n")
    prepared = _sft_prepared(train, tool_tokenizer, tmp_path)
    assert prepared.num_rows == train.num_rows
    first = prepared[0]
    # TRL folds the completion mask into the labels: the prompt's tokens are -100.
    mask = [label != -100 for label in first["labels"]]
    assert 0 < sum(mask) < len(mask)
    answer = tool_tokenizer.decode(
        [token for token, kept in zip(first["input_ids"], mask, strict=True) if kept]
    )
    assert "<tools>" not in answer
    assert answer.endswith("<|im_end|>\n")
