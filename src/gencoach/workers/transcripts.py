"""What a job keeps of its LLM exchanges: one coaching log per exchange, and the tokens spent.

Each round of `Backend.ask` (the prompt sent and the raw answer, refused or accepted)
becomes a Markdown `CoachingLog`, also when the answer is finally abandoned, so the
saved run shows what the backend was asked and what it said.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from gencoach.errors import BackendAnswerError
from gencoach.protocol.base import ContractModel, ContractRootModel, JsonObject
from gencoach.protocol.coaching import CoachingLog
from gencoach.protocol.jobs import Usage
from gencoach.workers.backends import Backend, ChatMessage, Exchange

ContractT = TypeVar("ContractT", bound=ContractModel | ContractRootModel[Any])

_TITLES = {
    "diagnosis": "Diagnosis",
    "suboptimal_diagnosis": "Suboptimal diagnosis",
    "case_selection": "Similar-case selection",
    "text_rewrite": "Text rewrite",
}


def _fence(text: str) -> str:
    """A fence longer than any backtick run in `text`, so the block cannot end early."""
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _block(text: str) -> str:
    fence = _fence(text)
    return f"{fence}text\n{text}\n{fence}"


def exchange_markdown(
    coaching_type: str, backend: str, exchange: Exchange, number: int, shown_from: int = 0
) -> str:
    """One round as Markdown: the messages from `shown_from` on, the raw answer, the refusal."""
    title = _TITLES.get(coaching_type, coaching_type.replace("_", " ").capitalize())
    completion = exchange.completion
    lines = [
        f"# {title}, round {number}",
        "",
        f"Backend `{backend}`, model `{completion.model}`, {completion.attempts} request(s), "
        f"{completion.usage.total_tokens} tokens.",
    ]
    if shown_from:
        lines += ["", "The prompt of the previous round, its answer, then:"]
    for message in exchange.prompt[shown_from:]:
        lines += ["", f"## {message.role}", "", _block(message.content)]
    lines += ["", "## answer", "", _block(exchange.answer)]
    if exchange.error is not None:
        lines += ["", f"Refused: {exchange.error}"]
    return "\n".join(lines) + "\n"


class Transcript:
    """The coaching logs and token usage a job gathers as it goes."""

    def __init__(self) -> None:
        self.logs: list[CoachingLog] = []
        self.usage = Usage()

    def note(self, coaching_type: str, content: str) -> None:
        """Keep a log written by the job itself (a deterministic diagnosis, say)."""
        self.logs.append(CoachingLog(coaching_type=coaching_type, content=content))

    def record(self, coaching_type: str, backend: str, exchanges: Sequence[Exchange]) -> None:
        """Keep one log per round of an `ask`, and add the tokens it cost."""
        previous: Sequence[ChatMessage] = ()
        for number, exchange in enumerate(exchanges, start=1):
            content = exchange_markdown(coaching_type, backend, exchange, number, len(previous))
            self.note(coaching_type, content)
            used = exchange.completion.usage
            self.usage = Usage(
                prompt_tokens=self.usage.prompt_tokens + used.prompt_tokens,
                completion_tokens=self.usage.completion_tokens + used.completion_tokens,
                total_tokens=self.usage.total_tokens + used.total_tokens,
            )
            previous = exchange.prompt

    async def ask(
        self,
        backend: Backend,
        messages: Sequence[ChatMessage],
        contract: type[ContractT],
        coaching_type: str,
        context: JsonObject | None = None,
    ) -> ContractT:
        """`backend.ask`, with every round recorded, also when the answer is abandoned."""
        try:
            answer = await backend.ask(messages, contract, context=context)
        except BackendAnswerError as error:
            self.record(coaching_type, backend.name, error.transcript)
            raise
        self.record(coaching_type, backend.name, answer.transcript)
        return answer.value
