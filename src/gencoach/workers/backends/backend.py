"""What every LLM backend does: complete a chat, and ask for an answer that fits a contract."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

import anyio
import redis.asyncio
from pydantic import BaseModel

from gencoach.config.settings import BackendSettings
from gencoach.constants import Keys
from gencoach.errors import (
    BackendAnswerError,
    BackendError,
    BackendRequestError,
    BackendTruncatedError,
    BackendUnavailable,
    ContractError,
)
from gencoach.metrics import MetricsRecorder
from gencoach.metrics.catalog import LLM_ANSWERS, LLM_CALLS, LLM_SECONDS, LLM_TOKENS
from gencoach.protocol.base import ContractModel, ContractRootModel, JsonObject
from gencoach.protocol.llm import parse_llm_answer
from gencoach.runtime.logs import get_logger
from gencoach.workers.backends.chat import Answer, ChatMessage, Completion, Exchange, Usage
from gencoach.workers.backends.concurrency import RedisSemaphore, new_holder_id
from gencoach.workers.backends.wakeups import SlotWakeups
from gencoach.workers.clipping import clip, utf8_size

ContractT = TypeVar("ContractT", bound=ContractModel | ContractRootModel[Any])

# How long a slot lease outlives the request it covers, for clock skew and slow releases.
LEASE_MARGIN_S = 5.0
# The cap when neither the backend's `max_concurrency` nor the caller sets one (the
# default of `workers.concurrency`).
DEFAULT_CONCURRENCY = 32

log = get_logger("backends")


def reask_prompt(error: ContractError | str) -> str:
    """The message that asks again after an answer was refused, naming why."""
    return (
        f"Your answer was refused: {error}. Answer again with only the corrected JSON "
        "value, with no other text."
    )


@dataclass(frozen=True)
class Reply:
    """What an implementation returns from one completion; the base adds the latency."""

    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    attempts: int = 1


def call_outcome(error: BackendError) -> str:
    """The `outcome` label of a completion that failed with `error`."""
    if isinstance(error, BackendUnavailable):
        return "unavailable"
    if isinstance(error, BackendRequestError):
        return "refused"
    if isinstance(error, BackendTruncatedError):
        return "truncated"
    return "error"


class Backend(ABC):
    """One configured LLM backend, used inside `async with` (which opens its connections).

    With a Redis client, at most `settings.max_concurrency` (else `concurrency`) requests
    run at once across every worker process; without one, the cap holds for this object
    only. Calls, latencies and tokens are counted in `metrics` (`LLM_CALLS`, `LLM_TOKENS`),
    which the process flushes to the shared metrics hash. Waiting for a slot is bounded by
    `slot_wait_s` and woken through `wakeups` when given. Objects open once and serve any
    number of concurrent jobs on the event loop that opened them.
    """

    def __init__(
        self,
        name: str,
        settings: BackendSettings,
        *,
        redis: redis.asyncio.Redis | None = None,
        keys: Keys | None = None,
        slot_wait_s: float = 300.0,
        concurrency: int = DEFAULT_CONCURRENCY,
        wakeups: SlotWakeups | None = None,
        metrics: MetricsRecorder | None = None,
    ) -> None:
        self.name = name
        self.metrics = metrics or MetricsRecorder()
        self.settings = settings
        self.slot_wait_s = slot_wait_s
        self.concurrency = settings.max_concurrency or concurrency
        keys = keys or Keys()
        lease_s = settings.timeout_s + LEASE_MARGIN_S
        self._semaphore = (
            RedisSemaphore(
                redis, keys.backend_slots(name), self.concurrency, lease_s, wakeups=wakeups
            )
            if redis is not None
            else None
        )
        self._local_slots: anyio.Semaphore | None = None
        self._state: Literal["new", "open", "closed"] = "new"

    async def __aenter__(self) -> Self:
        if self._state != "new":
            raise RuntimeError(f"backend {self.name!r} was opened before; make a new one")
        if self._semaphore is None:
            self._local_slots = anyio.Semaphore(self.concurrency)
        await self._open()
        self._state = "open"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._state = "closed"
        await self._close()

    async def _open(self) -> None:
        """Make what the backend's requests need (clients, the function to call)."""
        return None  # a hook: nothing to make by default

    async def _close(self) -> None:
        """Release what `_open` made."""
        return None  # a hook: nothing to release by default

    @abstractmethod
    async def _complete(
        self,
        messages: list[ChatMessage],
        *,
        schema: type[BaseModel] | None,
        model: str | None,
        max_tokens: int | None,
        context: JsonObject | None = None,
    ) -> Reply:
        """Get one completion, retrying as the backend's kind allows.

        `context` describes the job asking (its JSON); only in-process backends see it.
        """

    @asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        """Hold one of the backend's concurrency slots for the block."""
        if self._semaphore is None:
            assert self._local_slots is not None
            async with self._local_slots:
                yield
            return
        holder = new_holder_id()
        if not await self._semaphore.acquire(holder, self.slot_wait_s):
            raise BackendUnavailable(
                self.name,
                f"none of its {self._semaphore.limit} concurrency slots "
                f"freed within {self.slot_wait_s} s",
                attempts=0,
            )
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await self._semaphore.release(holder)

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        schema: type[BaseModel] | None,
        model: str | None = None,
        max_tokens: int | None = None,
        context: JsonObject | None = None,
    ) -> Completion:
        """Send a chat and return the completion, asking for `schema`'s JSON if one is given.

        Raises BackendUnavailable, BackendRequestError or BackendError (see gencoach.errors).
        """
        if self._state != "open":
            raise RuntimeError(f"use backend {self.name!r} inside `async with`")
        started = anyio.current_time()
        try:
            reply = await self._complete(
                list(messages), schema=schema, model=model, max_tokens=max_tokens, context=context
            )
        except BackendError as error:
            self._count(call_outcome(error), anyio.current_time() - started)
            raise
        size = utf8_size(reply.text)
        oversized = size > self.settings.max_answer_bytes
        completion = Completion(
            # Cut where it enters: logs, transcripts and re-asks hold the bounded text.
            text=clip(reply.text, self.settings.max_answer_bytes) if oversized else reply.text,
            model=reply.model,
            usage=reply.usage,
            attempts=reply.attempts,
            latency_s=anyio.current_time() - started,
            oversized_bytes=size if oversized else 0,
        )
        self._count("ok", completion.latency_s, completion.usage)
        log.info(
            "backend.completed",
            backend=self.name,
            model=completion.model,
            attempts=completion.attempts,
            latency_s=round(completion.latency_s, 3),
            prompt_tokens=completion.usage.prompt_tokens,
            completion_tokens=completion.usage.completion_tokens,
        )
        return completion

    def _oversized(self, completion: Completion) -> str | None:
        """Why an answer above `max_answer_bytes` is refused, or None."""
        if not completion.oversized_bytes:
            return None
        return (
            f"the answer is {completion.oversized_bytes:,} bytes, above the "
            f"{self.settings.max_answer_bytes:,} this backend's answers may have "
            f"(backends.{self.name}.max_answer_bytes)"
        )

    def _count(self, outcome: str, latency_s: float, usage: Usage | None = None) -> None:
        self.metrics.inc(LLM_CALLS, self.name, outcome)
        self.metrics.observe(LLM_SECONDS, latency_s, self.name, outcome)
        if usage is not None:
            self.metrics.inc(LLM_TOKENS, self.name, "prompt", by=usage.prompt_tokens)
            self.metrics.inc(LLM_TOKENS, self.name, "completion", by=usage.completion_tokens)

    async def ask(
        self,
        messages: Sequence[ChatMessage],
        contract: type[ContractT],
        *,
        model: str | None = None,
        max_tokens: int | None = None,
        context: JsonObject | None = None,
    ) -> Answer[ContractT]:
        """Ask for an answer that satisfies `contract`, once more if the first one does not.

        The second prompt is the first, the refused answer and a message naming the
        validation error. After a second refusal, raises BackendAnswerError with both raw
        answers and the transcript; both answers are logged.
        """
        prompt = list(messages)
        transcript: list[Exchange] = []
        for round_ in (1, 2):
            completion = await self.complete(
                prompt, schema=contract, model=model, max_tokens=max_tokens, context=context
            )
            refusal = self._oversized(completion)
            if refusal is None:
                try:
                    value = parse_llm_answer(contract, completion.text)
                except ContractError as error:
                    refusal = str(error)
                else:
                    self.metrics.inc(LLM_ANSWERS, self.name, "accepted")
                    transcript.append(Exchange(tuple(prompt), completion))
                    return Answer(value, transcript)
            self.metrics.inc(LLM_ANSWERS, self.name, "refused")
            transcript.append(Exchange(tuple(prompt), completion, refusal))
            log.warning(
                "backend.answer_refused",
                backend=self.name,
                contract=contract.__name__,
                round=round_,
                error=refusal,
                raw_answer=completion.text,
            )
            prompt = [
                *prompt,
                ChatMessage.assistant(completion.text),
                ChatMessage.user(reask_prompt(refusal)),
            ]
        raw_answers = [exchange.answer for exchange in transcript]
        log.error(
            "backend.answer_abandoned",
            backend=self.name,
            contract=contract.__name__,
            rounds=len(transcript),
            errors=[exchange.error for exchange in transcript],
            raw_answers=raw_answers,
        )
        raise BackendAnswerError(
            self.name,
            f"answers refused as {contract.__name__} twice; last: {transcript[-1].error}",
            attempts=len(transcript),
            raw_answers=raw_answers,
            transcript=transcript,
        )
