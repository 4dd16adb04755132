"""Every row the trainers read is valid, and a model's own chat template renders the rows
as written: tools declared, every call made and every call answered.

The template is Qwen3's, as TRL ships it (`trl/chat_templates/qwen3.jinja`, the Hub
model's own, read offline). Like the Hub templates of its kind it reads reasoning from
`reasoning_content` and content as a string, so it takes the exports with
`reasoning: false` (docs/export.md says which export goes with which reader); rows are
loaded with `datasets` first, as trainers load them (absent keys become nulls).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import datasets
import pytest
import trl

from gencoach.export import ExportSettings, run_export
from tests.support.rows import check_file
from tests.trainers.data import VARIANTS, file_names

# A demo run and the GGUF tokenizer load once per session, inside the first test's budget.
pytestmark = pytest.mark.timeout(300)

QWEN3 = Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja"


@pytest.fixture(scope="module")
def qwen3(tokenizer: Any) -> Any:
    """The GGUF tokenizer with Qwen3's own chat template."""
    templated = copy.deepcopy(tokenizer)
    templated.chat_template = QWEN3.read_text(encoding="utf-8")
    return templated


@pytest.mark.parametrize(
    "variant", sorted(v for v, (fmt, _) in VARIANTS.items() if fmt != "full-history")
)
def test_every_exported_row_passes_the_row_validator(
    exports: dict[str, Path], variant: str
) -> None:
    """Chat, per-turn, prompt/completion and preference files, full and split: no
    unanswered call, no empty part, tools in one shape."""
    for name in file_names(variant):
        assert check_file(exports[variant] / name) > 0, f"{variant}/{name} has no row"


def test_the_demo_exports_pass_the_row_validator(demo_graphs: Path, tmp_path: Path) -> None:
    """A real demo run (two stages, calls cut by a stage end) in every chat shape and as
    preference pairs: every row valid."""
    shapes: dict[str, dict[str, Any]] = {
        "chat": {},
        "per-turn": {"per_turn": True},
        "pc": {"shape": "prompt_completion"},
    }
    for name, options in shapes.items():
        run_export(ExportSettings(source=demo_graphs, format="chat", options=options,
                                  out=tmp_path / name))  # fmt: skip
        assert check_file(tmp_path / name / "chat.jsonl") > 0
    run_export(ExportSettings(source=demo_graphs, format="preference", out=tmp_path / "pref"))
    check_file(tmp_path / "pref" / "preference.jsonl")


def _load(path: Path, cache: Path) -> list[dict[str, Any]]:
    loaded = datasets.load_dataset(
        "json", data_files=str(path), split="train", cache_dir=str(cache)
    )
    rows: list[dict[str, Any]] = loaded.to_list()
    return rows


def _conversations(variant: str, row: dict[str, Any]) -> list[list[dict[str, Any]]]:
    if "messages" in row:
        return [row["messages"]]
    if "completion" in row:
        return [row["prompt"] + row["completion"]]
    return [row["prompt"] + row["chosen"], row["prompt"] + row["rejected"]]


@pytest.mark.parametrize(
    "variant",
    ["chat-no-reasoning", "chat-per-turn-no-reasoning", "chat-prompt-completion-no-reasoning",
     "preference"],
)  # fmt: skip
def test_qwen3s_own_template_renders_the_rows_as_written(
    exports: dict[str, Path], qwen3: Any, tmp_path: Path, variant: str
) -> None:
    """Each row, as `datasets` loads it, renders with its tools declared, every tool call
    written as a `<tool_call>` and every tool message as a `<tool_response>`, its result
    text included."""
    rows = _load(exports[variant] / file_names(variant)[0], tmp_path)
    assert rows
    for row in rows:
        for messages in _conversations(variant, row):
            text = qwen3.apply_chat_template(messages, tools=row["tools"], tokenize=False)
            calls = [c for m in messages for c in m.get("tool_calls") or []]
            answers = [m for m in messages if m["role"] == "tool"]
            assert text.count('<tool_call>\n{"name": "') == len(calls)
            assert text.count("<tool_response>") == len(answers)
            for call in calls:
                assert json.dumps(call["function"]["name"]) in text
            for answer in answers:
                assert answer["content"] in text
            assert "<tools>" in text
