"""A check's verdict, and the target agent every check talks to."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx

from gencoach.agent_client import AgentClient
from gencoach.errors import AgentCallError, ContractError
from gencoach.protocol import JsonObject


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict: passed or not, and why (a note when it passed)."""

    name: str
    passed: bool
    reason: str = ""
    skipped: bool = False

    def line(self) -> str:
        """The line `check-agent` prints: `PASS name`, `FAIL name: reason`, `SKIP name: reason`."""
        if self.skipped:
            return f"SKIP {self.name}: {self.reason}"
        if not self.passed:
            return f"FAIL {self.name}: {self.reason}"
        return f"PASS {self.name}" + (f" ({self.reason})" if self.reason else "")


def passed(name: str, note: str = "") -> CheckResult:
    """A passed check, with an optional note."""
    return CheckResult(name, True, note)


def failed(name: str, reason: str) -> CheckResult:
    """A failed check and why."""
    return CheckResult(name, False, reason)


def skipped(name: str, reason: str) -> CheckResult:
    """A check that does not apply to this agent (it counts as passed)."""
    return CheckResult(name, True, reason, skipped=True)


class CheckFailedError(Exception):
    """Raised inside a check to fail it with `reason`."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def violations(error: ContractError) -> str:
    """The refused fields and why, without the model's name."""
    return "; ".join(str(violation) for violation in error.violations)


def detail(response: httpx.Response) -> str:
    """What an answer's body says, shortened."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    shown = body.get("detail", body) if isinstance(body, dict) else body
    return json.dumps(shown)[:300]


@dataclass
class Target:
    """The agent under check, and what earlier checks learned about it."""

    url: str
    http: httpx.AsyncClient
    error_candidates: list[object] = field(default_factory=list)
    first_memory: JsonObject = field(default_factory=dict)

    @property
    def client(self) -> AgentClient:
        """gencoach's own client for this agent."""
        return AgentClient(self.url, self.http)

    async def call(self, method: str, path: str, body: object = None) -> httpx.Response:
        """One HTTP call; a transport failure fails the check."""
        content = None if body is None else json.dumps(body)
        headers = {} if body is None else {"Content-Type": "application/json"}
        try:
            return await self.http.request(
                method, self.url + path, content=content, headers=headers
            )
        except httpx.HTTPError as error:
            raise CheckFailedError(f"{method} {path} failed: {error!r}") from None


async def run_check(name: str, check: Callable[[], Awaitable[CheckResult]]) -> CheckResult:
    """Run one check, turning a CheckFailedError or an AgentCallError into its failure."""
    try:
        return await check()
    except CheckFailedError as error:
        return failed(name, error.reason)
    except AgentCallError as error:
        return failed(name, error.reason)
