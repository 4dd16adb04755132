"""Coaching sessions: the backends gencoach shares with an agent for one run.

`SessionStore` opens and closes a process's sessions (its docstring says what it accepts,
refuses and masks); `CoachingSession` is one open session, `backend_settings` and
`probe` check a backend, `SessionRefusedError` says why a session cannot be opened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import anyio
import httpx
from pydantic import ValidationError

from gencoach.config import scrubbing
from gencoach.config.settings import BackendSettings, Settings
from gencoach.errors import ContractError, ContractViolation
from gencoach.protocol import CoachingBackendConfig, CoachingSessionConfig
from gencoach.workers.backends import Backend, make_backend
from gencoach.workers.backends.openai import public_url

SUPPORTED_BACKEND_TYPE = "ollama"
StructuredOutput = Literal["auto", "json_schema", "json_object", "none"]


class SessionRefusedError(Exception):
    """A session cannot be opened: `status` is the HTTP answer, `detail` why."""

    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        self.detail = detail
        super().__init__(detail)


@dataclass(frozen=True)
class CoachingSession:
    """An open session: the run it serves and the backends its coach may call."""

    run_id: str
    config: CoachingSessionConfig
    settings: dict[str, BackendSettings] = field(default_factory=dict)

    @property
    def backend_names(self) -> list[str]:
        """The backends, in the order the config lists them."""
        return list(self.config.backends)

    @property
    def capture_logs(self) -> bool:
        """Whether the coach should return its logs."""
        return self.config.capture_logs

    def make_backend(self, name: str) -> Backend:
        """An unopened chat client for one backend (use it in `async with`)."""
        return make_backend(name, self.settings[name])


def backend_settings(
    name: str, backend: CoachingBackendConfig, structured_output: StructuredOutput = "auto"
) -> BackendSettings:
    """gencoach's settings for a session backend; a refused one raises ContractError.

    The session config (MAGMA's shape) says nothing of structured output: the agent's own
    setting applies, `auto` by default (json_schema, else json_object, else the schema in
    the prompt), as gencoach's backends do.
    """
    field_prefix = f"backends.{name}"
    if backend.type != SUPPORTED_BACKEND_TYPE:
        reason = (
            f"only type {SUPPORTED_BACKEND_TYPE!r} (an OpenAI-compatible chat-completions "
            f"client) is supported, got {backend.type!r}"
        )
        raise ContractError(
            "CoachingSessionConfig", [ContractViolation(f"{field_prefix}.type", reason)]
        )
    try:
        return BackendSettings.model_validate(
            {
                "type": backend.type,
                "endpoint": backend.endpoint,
                "default_model": backend.default_model,
                "headers": backend.headers,
                "timeout_s": backend.timeout,
                "max_retries": backend.max_retry,
                "structured_output": structured_output,
            }
        )
    except ValidationError as error:
        violations = [
            ContractViolation(
                ".".join([field_prefix, *(str(part) for part in detail["loc"])]), detail["msg"]
            )
            for detail in error.errors(include_url=False)
        ]
        raise ContractError("CoachingSessionConfig", violations) from None


async def probe(
    name: str, backend: CoachingBackendConfig, timeout_s: float, http: httpx.AsyncClient
) -> str | None:
    """Why the backend is unreachable, or None when it answered anything at all.

    A GET on its endpoint carrying only the configured headers: any HTTP answer, even a
    4xx, proves it reachable, while a connection error or timeout refuses the session
    with 503.
    """
    timeout = min(timeout_s, backend.timeout)
    try:
        with anyio.fail_after(timeout):
            await http.get(backend.endpoint, headers=backend.headers, timeout=timeout)
    except (httpx.HTTPError, TimeoutError) as error:
        cause = str(error) or type(error).__name__
        return f"backend {name} unreachable at {public_url(backend.endpoint)}: {cause}"
    return None


class SessionStore:
    """The open sessions of one agent process, by run id; their backends ask for structured
    output as `structured_output` says.

    `PUT /v1/coaching/sessions/{run_id}` opens a session, as MAGMA agents do: every
    backend must be of type `ollama` (an OpenAI-compatible chat-completions client whose
    `endpoint` is the full `.../v1/chat/completions` URL; anything else is refused with
    422, since the sender must change the config), and every backend is probed once
    (`probe`). The same config again is accepted without probing (204); a different one
    is a conflict (409).

    The open sessions' credentials (secret header values such as `Authorization` or
    `X-Api-Key`, also without their scheme) are masked as `***` in everything the process
    logs, as the controller and workers mask theirs (`gencoach.config.scrubbing`): a
    server that echoes a key in a refusal never gets it into the agent's log.
    """

    def __init__(
        self,
        *,
        probe_timeout_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
        structured_output: StructuredOutput = "auto",
    ) -> None:
        self.probe_timeout_s = probe_timeout_s
        self.structured_output = structured_output
        self._transport = transport
        self._sessions: dict[str, CoachingSession] = {}
        self._opening: dict[str, anyio.Lock] = {}

    def get(self, run_id: str) -> CoachingSession | None:
        """The run's open session, if any."""
        return self._sessions.get(run_id)

    async def open(self, run_id: str, config: CoachingSessionConfig) -> None:
        """Open the run's session, or raise SessionRefusedError (409, 503) or ContractError."""
        settings = {
            name: backend_settings(name, b, self.structured_output)
            for name, b in config.backends.items()
        }
        lock = self._opening.setdefault(run_id, anyio.Lock())
        async with lock:
            current = self._sessions.get(run_id)
            if current is not None:
                if current.config == config:
                    return
                raise SessionRefusedError(
                    409, f"run {run_id} already has a session with a different config"
                )
            self._mask_secrets(settings)  # before the probes: a server may echo a key
            problems = await self._probe_all(config)
            if problems:
                self._mask_secrets()
                raise SessionRefusedError(503, "; ".join(problems))
            self._sessions[run_id] = CoachingSession(run_id, config, settings)

    async def _probe_all(self, config: CoachingSessionConfig) -> Sequence[str]:
        problems: dict[str, str | None] = dict.fromkeys(config.backends)
        async with httpx.AsyncClient(transport=self._transport) as http:

            async def run(name: str, backend: CoachingBackendConfig) -> None:
                problems[name] = await probe(name, backend, self.probe_timeout_s, http)

            async with anyio.create_task_group() as group:
                for name, backend in config.backends.items():
                    group.start_soon(run, name, backend)
        return [problem for problem in problems.values() if problem is not None]

    def close(self, run_id: str) -> bool:
        """Close the run's session; False when it had none."""
        self._opening.pop(run_id, None)
        closed = self._sessions.pop(run_id, None) is not None
        if closed:
            self._mask_secrets()
        return closed

    def _mask_secrets(self, opening: dict[str, BackendSettings] | None = None) -> None:
        """Mask the credentials of the open sessions, and of one `opening`, from now on."""
        backends = {
            f"{run_id}/{name}": backend
            for run_id, session in self._sessions.items()
            for name, backend in session.settings.items()
        }
        backends.update({f"opening/{name}": backend for name, backend in (opening or {}).items()})
        scrubbing.install(scrubbing.secret_values(Settings.model_construct(backends=backends)))
