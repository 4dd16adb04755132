"""Token budgets: each row's length in a model's tokens, and rows over a budget.

`TokenBudget` counts each row with the tokenizer `TokenSettings` names (`load_tokenizer`)
and applies `--max-tokens` and `--over-budget`; `TokenReport` sums it up for the summary
and the manifest. See docs/export.md ("Token budgets").
"""

from __future__ import annotations

import functools
import json
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from gencoach.errors import ExportError

OVER_BUDGET: Final = ("keep", "drop", "truncate")
_MARKS: Final = ("trainable", "weight")


@dataclass(frozen=True)
class TokenSettings:
    """Which tokenizer counts, the budget per row, and what happens over it."""

    tokenizer: Path
    max_tokens: int | None = None
    over_budget: str = "keep"

    def __post_init__(self) -> None:
        if self.over_budget not in OVER_BUDGET:
            known = ", ".join(OVER_BUDGET)
            raise ExportError(f"--over-budget must be one of {known}, got {self.over_budget!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ExportError(f"--max-tokens must be at least 1, got {self.max_tokens}")
        if self.over_budget != "keep" and self.max_tokens is None:
            raise ExportError(f"--over-budget {self.over_budget} needs --max-tokens")

    def to_json(self) -> dict[str, Any]:
        """As the manifest's settings record them."""
        return {
            "tokenizer": str(self.tokenizer),
            "max_tokens": self.max_tokens,
            "over_budget": self.over_budget,
        }


def load_tokenizer(path: Path) -> Any:
    """A transformers tokenizer from a GGUF file or a model folder, offline."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ExportError(
            "--tokenizer needs transformers (and gguf for a GGUF file): install "
            "gencoach's tokens extra, pip install 'gencoach[tokens]'"
        ) from None
    if not path.exists():
        raise ExportError(f"--tokenizer {path}: no such file or folder")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        return _loaded(AutoTokenizer, path.resolve(), _version(path))
    except Exception as error:  # transformers raises many kinds for an unreadable model
        reason = " ".join(str(error).split())
        raise ExportError(f"--tokenizer {path} cannot be loaded: {reason}") from None


def _version(path: Path) -> tuple[tuple[str, int, int], ...]:
    """What changes when the file, or a file of the folder, is written again."""
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    stats = [(item.name, item.stat()) for item in files]
    return tuple((name, found.st_mtime_ns, found.st_size) for name, found in stats)


@functools.lru_cache(maxsize=4)
def _loaded(auto: Any, path: Path, version: tuple[tuple[str, int, int], ...]) -> Any:
    """The tokenizer at `path` as it was at `version`, read once per process: reading one
    from a GGUF file takes seconds, and the exports of one process share it."""
    if path.is_file():
        return auto.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)
    return auto.from_pretrained(str(path), local_files_only=True)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(
            str(part.get("thinking") or part.get("text") or "")
            for part in content
            if isinstance(part, dict)
        )
    return "" if content is None else str(content)


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    """A message as chat templates take it: string content, no training marks."""
    out = {key: value for key, value in message.items() if key not in _MARKS}
    out["content"] = _text(message.get("content"))
    return out


def _target(message: dict[str, Any]) -> bool:
    return message.get("role") == "assistant" and (
        message.get("trainable") is True or message.get("weight") == 1
    )


@dataclass(frozen=True)
class TokenReport:
    """Token counts per row, and what the budget did."""

    rows: int
    minimum: int
    median: float
    maximum: int
    max_tokens: int | None
    over: int
    dropped: int
    truncated: int

    def to_json(self) -> dict[str, Any]:
        """As the manifest records it."""
        return {
            "rows": self.rows,
            "min": self.minimum,
            "median": self.median,
            "max": self.maximum,
            "max_tokens": self.max_tokens,
            "over": self.over,
            "dropped": self.dropped,
            "truncated": self.truncated,
        }

    def summary(self) -> str:
        """One clause for the command's summary line."""
        line = f"tokens per row {self.minimum}/{self.median:g}/{self.maximum} (min/median/max)"
        if self.max_tokens is not None:
            line += f", {self.over} over {self.max_tokens}"
            if self.dropped or self.truncated:
                line += f" ({self.dropped} dropped, {self.truncated} truncated)"
        return line


@dataclass
class TokenBudget:
    """Counts each row's tokens and applies the budget to it."""

    settings: TokenSettings
    tokenizer: Any = None
    counts: list[int] = field(default_factory=list)
    over: int = 0
    dropped: int = 0
    truncated: int = 0

    def __post_init__(self) -> None:
        if self.tokenizer is None:
            self.tokenizer = load_tokenizer(self.settings.tokenizer)

    def count(self, messages: list[dict[str, Any]], tools: Any) -> int:
        """The tokens of a conversation as the chat template renders it, tools included
        (plain text, one JSON message a line, when the template has none or cannot render
        it)."""
        plain = [_plain(message) for message in messages]
        text: str | None = None
        if getattr(self.tokenizer, "chat_template", None):
            try:
                rendered = self.tokenizer.apply_chat_template(
                    plain, tools=tools or None, tokenize=False
                )
                text = rendered if isinstance(rendered, str) else None
            except Exception:  # a template that cannot render tools or a role
                text = None
        if text is None:
            text = "\n".join(json.dumps(message, ensure_ascii=False) for message in plain)
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def fit(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The row within the budget (itself, cut at a turn boundary, or None: dropped).

        A preference row counts its prompt and chosen answer. `truncate` cuts a row after
        its last training target that fits and drops a row whose first target does not
        fit; a row with one target only (per-turn, prompt/completion, preference) cannot
        be cut. `full-history` rows hold no conversation: counting them is refused.
        """
        messages = row.get("messages")
        prompt_completion = messages is None
        if prompt_completion:  # prompt/completion rows, or preference rows (the chosen side)
            answer = row.get("completion", row.get("chosen"))
            messages = [*row.get("prompt", []), *(answer or [])]
        if not isinstance(messages, list) or not messages:
            raise ExportError(
                "--tokenizer counts conversations: chat rows (messages or prompt/completion) "
                "and preference rows (prompt and chosen)"
            )
        tools = row.get("tools")
        tokens = self.count(messages, tools)
        self.counts.append(tokens)
        limit = self.settings.max_tokens
        if limit is None or tokens <= limit:
            return row
        self.over += 1
        if self.settings.over_budget == "keep":
            return row
        if self.settings.over_budget == "truncate" and not prompt_completion:
            ends = [i for i, message in enumerate(messages) if _target(message)]
            for end in reversed(ends[:-1]):
                if self.count(messages[: end + 1], tools) <= limit:
                    self.truncated += 1
                    return {**row, "messages": messages[: end + 1], "truncated": True}
        self.dropped += 1
        return None

    def report(self) -> TokenReport | None:
        """The counts so far, or None when no row was counted."""
        if not self.counts:
            return None
        return TokenReport(
            rows=len(self.counts),
            minimum=min(self.counts),
            median=statistics.median(self.counts),
            maximum=max(self.counts),
            max_tokens=self.settings.max_tokens,
            over=self.over,
            dropped=self.dropped,
            truncated=self.truncated,
        )
