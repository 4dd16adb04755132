"""tinker-cookbook builds supervised examples from chat exports with its own rendering code.

`FromConversationFileBuilder` hands each row's messages, as `datasets` loads them, to
its renderer; it needs a tokenizer by name, so the GGUF tokenizer is registered with
tinker-cookbook's own `register_tokenizer`. What reads which export, as docs/export.md
states it and these tests hold it to: the builder with `role_colon` (contents only) reads
an export with string contents (`reasoning: false`, or runs that recorded no reasoning)
as written; with `qwen3` (thinking parts, tool calls, tools) it reads a default export
as written when the file holds no tool call, and no file with tool calls, because
tinker-cookbook's renderers take `ToolCall` objects where JSON has dicts. For those,
rows go through that one documented step (`ToolCall.model_validate` on each call, as
tinker-cookbook's `openai_messages_to_tinker` does, keeping `trainable`) and
`conversation_to_datum`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasets
import pytest
from tinker_cookbook import renderers
from tinker_cookbook.renderers import TrainOnWhat
from tinker_cookbook.renderers.base import ToolCall
from tinker_cookbook.supervised.data import FromConversationFileBuilder, conversation_to_datum
from tinker_cookbook.supervised.types import ChatDatasetBuilderCommonConfig
from tinker_cookbook.third_party.openai_compat import openai_tools_to_tinker
from tinker_cookbook.tokenizer_utils import register_tokenizer

from gencoach.export import ExportSettings, run_export
from tests.support.exports import read_rows
from tests.trainers.data import FAILED_BUTTON, RECOVERY_RUN, THINKING

# A demo run and the GGUF tokenizer load once per session, inside the first test's budget.
pytestmark = pytest.mark.timeout(300)

TOKENIZER_NAME = "gencoach-tests/smollm2-135m-gguf"


@pytest.fixture(scope="module")
def registered(tokenizer: Any) -> str:
    """The GGUF tokenizer, registered under a name tinker-cookbook's builders accept."""
    register_tokenizer(TOKENIZER_NAME, lambda: tokenizer)
    return TOKENIZER_NAME


def _builder(path: Path, name: str, renderer: str = "role_colon") -> FromConversationFileBuilder:
    common = ChatDatasetBuilderCommonConfig(
        model_name_for_tokenizer=name,
        renderer_name=renderer,
        max_length=None,
        batch_size=1,
        train_on_what=TrainOnWhat.CUSTOMIZED,
    )
    return FromConversationFileBuilder(file_path=str(path), common_config=common)


def _datums(path: Path, name: str, renderer: str = "role_colon") -> list[Any]:
    dataset, _ = _builder(path, name, renderer)()
    return [datum for index in range(len(dataset)) for datum in dataset.get_batch(index)]


def _weights(datum: Any) -> list[float]:
    return [float(weight) for weight in datum.loss_fn_inputs["weights"].to_torch()]


def test_the_conversation_file_builder_reads_rows_without_reasoning(
    exports: dict[str, Path], registered: str
) -> None:
    """Every row builds under `train_on_what=customized` with the text-only `role_colon`
    renderer, each with trainable tokens (it refuses content parts: `reasoning: false`)."""
    path = exports["chat-no-reasoning"] / "chat.jsonl"
    datums = _datums(path, registered)
    assert len(datums) == len(read_rows(path))
    assert all(sum(_weights(datum)) > 0 for datum in datums)


def test_the_builder_reads_a_default_export_without_tool_calls_with_qwen3(
    text_only: Path, registered: str, tokenizer: Any
) -> None:
    """A default export (thinking parts) of a run that only speaks builds as written with
    `qwen3` under `customized`: each row trains on its last answer's reasoning."""
    path = text_only / "chat.jsonl"
    rows = read_rows(path)
    assert all(isinstance(m["content"], list) for row in rows for m in row["messages"])
    datums = _datums(path, registered, "qwen3")
    assert len(datums) == len(rows)
    for datum in datums:
        targets = [int(t) for t in datum.loss_fn_inputs["target_tokens"].to_torch()]
        trained = tokenizer.decode(
            [t for t, w in zip(targets, _weights(datum), strict=True) if w > 0]
        )
        assert "the next button in order" in trained


def test_the_builder_cannot_render_tool_calls_from_a_file(
    exports: dict[str, Path], registered: str
) -> None:
    """What docs/export.md states: `qwen3` renders tool calls from `ToolCall` objects and
    the builder passes JSON dicts, so a file with tool calls does not build with it, with
    or without reasoning (should a release lift this, the docs' table changes with it)."""
    for variant in ("chat", "chat-no-reasoning"):
        with pytest.raises((AttributeError, TypeError)):
            _datums(exports[variant] / "chat.jsonl", registered, "qwen3")


@pytest.mark.parametrize(
    ("variant", "thought"),
    [
        ("chat", THINKING),
        ("chat-per-turn", THINKING),
        ("chat-reasoning", THINKING),
        ("chat-as-child", THINKING.upper()),
    ],
)
def test_a_thinking_renderer_trains_on_each_rows_last_reasoning(
    exports: dict[str, Path], tokenizer: Any, tmp_path: Path, variant: str, thought: str
) -> None:
    """Rows with thinking parts (reasoning is on by default) and tool calls, through the
    documented `ToolCall` step, build with `qwen3`, a renderer of thinking, under
    `customized`: the last answer's reasoning is among the trained tokens (the renderer
    leaves earlier answers' reasoning out, as sampling does)."""
    loaded = datasets.load_dataset(
        "json",
        data_files=str(exports[variant] / "chat.jsonl"),
        split="train",
        cache_dir=str(tmp_path),
    )
    renderer = renderers.get_renderer("qwen3", tokenizer)
    assert loaded.num_rows > 0
    for row in loaded.to_list():
        messages = [_as_tinker(message) for message in row["messages"]]
        last = messages[-1]
        assert last["content"][0]["type"] == "thinking", variant
        expected = thought.format(row["candidate_id"])
        assert last["content"][0]["thinking"] == expected
        datum = conversation_to_datum(messages, renderer, None, TrainOnWhat.CUSTOMIZED)
        targets = [int(t) for t in datum.loss_fn_inputs["target_tokens"].to_torch()]
        weights = _weights(datum)
        trained = tokenizer.decode([t for t, w in zip(targets, weights, strict=True) if w > 0])
        assert expected in trained, (variant, trained)


def test_the_demo_export_builds_with_the_conversation_file_builder(
    demo_graphs: Path, registered: str, tmp_path: Path
) -> None:
    """A real demo run's chat export builds row by row, each row training on something."""
    run_export(ExportSettings(source=demo_graphs, format="chat", out=tmp_path))
    datums = _datums(tmp_path / "chat.jsonl", registered)
    assert datums
    assert all(sum(_weights(datum)) > 0 for datum in datums)


def _as_tinker(message: dict[str, Any]) -> dict[str, Any]:
    """The step docs/export.md gives for files with tool calls: a message as `datasets`
    loads it, without the null keys it fills in, its calls as tinker's `ToolCall`s."""
    converted = {key: value for key, value in message.items() if value is not None}
    if "tool_calls" in converted:
        converted["tool_calls"] = [ToolCall.model_validate(c) for c in converted["tool_calls"]]
    return converted


def test_demo_rows_train_on_their_trainable_assistant_messages_only(
    demo_graphs: Path, tokenizer: Any, tmp_path: Path
) -> None:
    """Each demo row trains less than "all assistant messages" exactly when it marks one off."""
    run_export(ExportSettings(source=demo_graphs, format="chat", out=tmp_path / "chat"))
    loaded = datasets.load_dataset(
        "json",
        data_files=str(tmp_path / "chat" / "chat.jsonl"),
        split="train",
        cache_dir=str(tmp_path / "cache"),
    )
    renderer = renderers.get_renderer("qwen3", tokenizer)
    for row in loaded.to_list():
        messages = [_as_tinker(message) for message in row["messages"]]
        _, customized = renderer.build_supervised_example(
            messages, train_on_what=TrainOnWhat.CUSTOMIZED
        )
        unmarked = [{k: v for k, v in m.items() if k != "trainable"} for m in messages]
        _, everything = renderer.build_supervised_example(
            unmarked, train_on_what=TrainOnWhat.ALL_ASSISTANT_MESSAGES
        )
        held_back = any(m["role"] == "assistant" and not m["trainable"] for m in messages)
        assert 0 < float(customized.sum()) <= float(everything.sum())
        assert (float(customized.sum()) < float(everything.sum())) == held_back, row["run_id"]


def _recovery_row(exports: dict[str, Path], tmp_path: Path) -> dict[str, Any]:
    loaded = datasets.load_dataset(
        "json",
        data_files=str(exports["chat"] / "chat.jsonl"),
        split="train",
        cache_dir=str(tmp_path),
    )
    (row,) = [row for row in loaded.to_list() if row["run_id"] == RECOVERY_RUN]
    return row


def test_the_failed_step_has_zero_loss_weight_and_the_recovery_trains(
    exports: dict[str, Path], tokenizer: Any, tmp_path: Path
) -> None:
    """Rendered by `qwen3`, the failed call's tokens weigh 0 and the successful call's 1."""
    row = _recovery_row(exports, tmp_path)
    messages = [_as_tinker(message) for message in row["messages"]]
    assert [m["trainable"] for m in messages if m["role"] == "assistant"] == [False, True]
    renderer = renderers.get_renderer("qwen3", tokenizer)
    model_input, weights = renderer.build_supervised_example(
        messages, train_on_what=TrainOnWhat.CUSTOMIZED
    )
    failed = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    flipped = [dict(m) for m in messages]
    flipped[failed]["trainable"] = True
    _, if_trained = renderer.build_supervised_example(flipped, train_on_what=TrainOnWhat.CUSTOMIZED)
    tokens = model_input.to_ints()
    failed_positions = [
        i for i, (w, w2) in enumerate(zip(weights, if_trained, strict=True)) if w == 0 and w2 > 0
    ]
    assert failed_positions, "the failed step must render to some tokens"
    assert FAILED_BUTTON in tokenizer.decode([tokens[i] for i in failed_positions])
    trained = tokenizer.decode([t for t, w in zip(tokens, weights, strict=True) if w > 0])
    assert '"sw4"' in trained
    assert FAILED_BUTTON not in trained
    datum = conversation_to_datum(messages, renderer, None, TrainOnWhat.CUSTOMIZED)
    assert sum(_weights(datum)) > 0


def test_the_row_tools_render_as_a_tool_prefix(
    exports: dict[str, Path], tokenizer: Any, tmp_path: Path
) -> None:
    """tinker-cookbook turns the row's `tools` into its tool-declaring system prefix."""
    row = _recovery_row(exports, tmp_path)
    renderer = renderers.get_renderer("qwen3", tokenizer)
    system = row["messages"][0]["content"]  # parts, as every content of a file with thinking
    text = system if isinstance(system, str) else "".join(part["text"] for part in system)
    prefix = renderer.create_conversation_prefix_with_tools(
        openai_tools_to_tinker(row["tools"]), text
    )
    rendered = json.dumps([str(message["content"]) for message in prefix])
    assert "press_button" in rendered
    assert "target_robot_name" in rendered
