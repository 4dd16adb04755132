"""What a job keeps of its LLM exchanges: one coaching log per exchange, and the tokens spent.

`Transcript` gathers them, each round of `Backend.ask` as a Markdown `CoachingLog`
(`exchange_markdown`), bounded in size and count (docs/operations.md, "Bounded state").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, TypeVar

from gencoach.errors import BackendAnswerError
from gencoach.protocol.base import ContractModel, ContractRootModel, JsonObject
from gencoach.protocol.coaching import CoachingLog
from gencoach.protocol.jobs import Usage
from gencoach.workers.backends import Backend, ChatMessage, Exchange
from gencoach.workers.clipping import clip

ContractT = TypeVar("ContractT", bound=ContractModel | ContractRootModel[Any])
_BACKTICKS = re.compile("`+")  # runs of backticks: linear in the text, in C

_TITLES = {
    "diagnosis": "Diagnosis",
    "suboptimal_diagnosis": "Suboptimal diagnosis",
    "case_selection": "Similar-case selection",
    "text_rewrite": "Text rewrite",
}


def _fence(text: str) -> str:
    """A fence longer than any backtick run in `text`, so the block cannot end early."""
    longest = max(map(len, _BACKTICKS.findall(text)), default=0)
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
    """The coaching logs and token usage a job gathers as it goes.

    Each round of an `ask` (the prompt sent and the raw answer, refused or accepted) is
    kept, also when the answer is finally abandoned, so the saved run shows what the
    backend was asked and what it said. At most `max_logs` logs of at most
    `max_log_bytes` each (`workers.max_logs_per_job`, `workers.max_log_bytes`): longer
    ones are cut with a note, and past the count the last log says how many more were
    not kept.
    """

    def __init__(self, max_log_bytes: int = 65_536, max_logs: int = 8) -> None:
        self.max_log_bytes = max_log_bytes
        self.max_logs = max(1, max_logs)
        self._logs: list[CoachingLog] = []
        self._dropped = 0
        self.usage = Usage()

    @property
    def logs(self) -> list[CoachingLog]:
        """The logs kept, the last one saying how many were not when there were too many."""
        if not self._dropped:
            return list(self._logs)
        left_out = self._dropped + 1
        note = (
            f"{left_out} more coaching log(s) of this job were not kept: a job keeps "
            f"{self.max_logs} at most (workers.max_logs_per_job)."
        )
        dropped = CoachingLog(coaching_type="logs_dropped", content=note)
        return [*self._logs[: self.max_logs - 1], dropped]

    def keep(self, log: CoachingLog) -> None:
        """Keep a log (an agent's, say), cut to `max_log_bytes`."""
        if len(self._logs) >= self.max_logs:
            self._dropped += 1
            return
        content = clip(log.content, self.max_log_bytes)
        self._logs.append(CoachingLog(coaching_type=log.coaching_type, content=content))

    def note(self, coaching_type: str, content: str) -> None:
        """Keep a log written by the job itself (a deterministic diagnosis, say)."""
        self.keep(CoachingLog(coaching_type=coaching_type, content=content))

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
