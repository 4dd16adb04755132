"""The one exception tree of gencoach, split by what the caller can do about it.

```
GencoachError
├── ConfigError            the settings are wrong: fix the file or the environment, restart
├── ContractError          a payload broke a wire contract: the sender must change it
├── SaveError              a saved graph folder cannot be written or read as MAGMA-GEN 2.0
└── RedisError             the Redis server cannot be reached or started
    └── EmbeddedRedisError the private server for this process tree would not start
```

Every error carries its context as attributes, so logs and API answers can show them
without parsing the message.
"""

from __future__ import annotations

from dataclasses import dataclass


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
