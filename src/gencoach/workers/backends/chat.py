"""What a backend exchanges: chat messages in, completions with token usage out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

T = TypeVar("T")

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class ChatMessage:
    """One message of a chat-completions prompt."""

    role: Role
    content: str

    @classmethod
    def system(cls, content: str) -> ChatMessage:
        """A system message: the instructions."""
        return cls("system", content)

    @classmethod
    def user(cls, content: str) -> ChatMessage:
        """A user message: the case to answer."""
        return cls("user", content)

    @classmethod
    def assistant(cls, content: str) -> ChatMessage:
        """An assistant message: an earlier answer of the model."""
        return cls("assistant", content)

    def as_json(self) -> dict[str, str]:
        """The message as OpenAI's chat-completions API spells it."""
        return {"role": self.role, "content": self.content}


def _count(value: object) -> int:
    # Servers report usage loosely (missing, null, floats): anything else counts as unknown.
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return 0
    return int(value)


@dataclass(frozen=True)
class Usage:
    """Tokens one completion consumed; zeros where the backend did not say."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    @classmethod
    def from_json(cls, data: object) -> Usage:
        """Read an OpenAI `usage` object, leniently: missing or odd counts are zero."""
        if not isinstance(data, Mapping):
            return cls()
        prompt = _count(data.get("prompt_tokens"))
        completion = _count(data.get("completion_tokens"))
        total = _count(data.get("total_tokens")) or prompt + completion
        return cls(prompt, completion, total)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )


@dataclass(frozen=True)
class Completion:
    """A backend's answer to one prompt: its text, the model, usage, tries and time taken.

    `attempts` counts the HTTP requests it took (1 without retries); `latency_s` is the
    time the caller waited, retries and backoff included.
    """

    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    attempts: int = 1
    latency_s: float = 0.0
    # The answer's size in UTF-8 bytes when it was above the backend's `max_answer_bytes`
    # (then `text` holds its first bytes only); 0 when it was kept whole.
    oversized_bytes: int = 0


@dataclass(frozen=True)
class Exchange:
    """One round of `Backend.ask`: the prompt sent, the completion, and why it was refused."""

    prompt: tuple[ChatMessage, ...]
    completion: Completion
    error: str | None = None  # the validation error; None when the answer was accepted

    @property
    def answer(self) -> str:
        """The raw text the backend answered."""
        return self.completion.text


@dataclass(frozen=True)
class Answer(Generic[T]):
    """A validated answer and the transcript of every round it took (one or two)."""

    value: T
    transcript: list[Exchange]

    @property
    def usage(self) -> Usage:
        """The tokens of every round together."""
        total = Usage()
        for exchange in self.transcript:
            total += exchange.completion.usage
        return total
