"""The one exception tree of gencoach, split by what the caller can do about it.

`GencoachError` is the root; `ConfigError`, `ContractError`, `SaveError`, `RedisError`,
`AgentCallError`, `ExportError` and `BackendError` (with its four kinds) each name one
failure and carry its context as attributes, so logs and API answers can show them
without parsing the message. The tree is drawn in docs/architecture.md#errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class GencoachError(Exception):
    """Base class of every error gencoach raises on purpose."""


@dataclass(frozen=True)
class ConfigProblem:
    """One invalid setting: where it is, what it holds, and what is wrong with it."""

    path: str
    message: str
    value: object = None
    has_value: bool = False

    def __str__(self) -> str:
        if self.has_value:
            return f"{self.path}: {self.message} (got {self.value!r})"
        return f"{self.path}: {self.message}"


class ConfigError(GencoachError):
    """The configuration cannot be used; `problems` lists every invalid setting."""

    def __init__(self, problems: list[ConfigProblem], source: str | None = None) -> None:
        self.problems = problems
        self.source = source
        where = f" in {source}" if source else ""
        lines = "\n".join(f"  - {problem}" for problem in problems)
        super().__init__(f"invalid configuration{where}:\n{lines}")


@dataclass(frozen=True)
class ContractViolation:
    """One reason a payload was refused, located by its dotted field path."""

    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


class ContractError(GencoachError, ValueError):
    """A payload does not satisfy a wire contract; the message names each field and why."""

    def __init__(self, model: str, violations: list[ContractViolation]) -> None:
        self.model = model
        self.violations = violations
        details = "; ".join(str(violation) for violation in violations)
        super().__init__(f"invalid {model}: {details}")

    @property
    def fields(self) -> list[str]:
        """The dotted paths of the refused fields, in the order they were found."""
        return [violation.field for violation in self.violations]


class SaveError(GencoachError):
    """A saved graph cannot be written or read; `path` is the file or folder at fault."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class RedisError(GencoachError):
    """The Redis server is unreachable or misbehaving."""

    def __init__(self, message: str, url: str | None = None) -> None:
        self.url = url
        super().__init__(message)


class EmbeddedRedisError(RedisError):
    """The embedded Redis server could not be found, started or reached."""


class AgentCallError(GencoachError):
    """An agent call failed: unreachable, an unexpected status, or an invalid answer."""

    def __init__(self, agent_url: str, reason: str, *, retryable: bool = False) -> None:
        self.agent_url = agent_url
        self.reason = reason
        self.retryable = retryable  # unreachable or overloaded, rather than wrong
        super().__init__(f"agent {agent_url}: {reason}")


class ExportError(GencoachError):
    """The export cannot run, and nothing was written; `reason` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class BackendError(GencoachError):
    """An LLM backend gave no usable answer; `backend` names it, `attempts` counts the tries."""

    def __init__(self, backend: str, message: str, *, attempts: int = 1) -> None:
        self.backend = backend
        self.attempts = attempts
        self.reason = message
        tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
        super().__init__(f"backend {backend!r}: {message} ({tries})")


class _BackendCallError(BackendError):
    """A failed call: where it went (`endpoint`, no credentials) and the last HTTP status."""

    what = "failed"

    def __init__(
        self,
        backend: str,
        message: str,
        *,
        attempts: int = 1,
        endpoint: str | None = None,
        status: int | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.status = status
        where = f" at {endpoint}" if endpoint else ""
        super().__init__(backend, f"{self.what}{where}: {message}", attempts=attempts)


class BackendUnavailable(_BackendCallError):  # noqa: N818 (the name the design gives it)
    """The backend could not be reached, timed out or stayed overloaded through every retry.

    `endpoint` is where it was called (without credentials) and `status` the last HTTP
    status, None when no answer came back at all.
    """

    what = "unavailable"


class BackendRequestError(_BackendCallError):
    """The backend refused the request as it is configured (a 4xx, an import path that fails)."""

    what = "request refused"


class BackendTruncatedError(BackendError):
    """The answer stopped at the token limit (`finish_reason: length`); `max_tokens` was it."""

    def __init__(self, backend: str, max_tokens: int, *, attempts: int = 1) -> None:
        self.max_tokens = max_tokens
        message = (
            f"the answer was cut by the token limit (max_tokens {max_tokens}); "
            "raise the backend's max_tokens"
        )
        super().__init__(backend, message, attempts=attempts)


class BackendAnswerError(BackendError):
    """The backend's answer did not parse or broke the contract, even when asked once more.

    `raw_answers` holds every answer as the backend wrote it and `transcript` the
    exchanges of `gencoach.workers.backends` (prompt, answer, error), for the coaching logs.
    """

    def __init__(
        self,
        backend: str,
        message: str,
        *,
        attempts: int = 1,
        raw_answers: Sequence[str] = (),
        transcript: Sequence[Any] = (),
    ) -> None:
        self.raw_answers = list(raw_answers)
        self.transcript = list(transcript)
        super().__init__(backend, message, attempts=attempts)
