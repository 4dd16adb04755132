"""The agents of running runs: what each announced, and its coaching session.

On `run.started` the controller reads the agent's `GET /v1/info` and, when coaching is
on and the agent offers specialized coaching, opens a session with the configured
HTTP backends in the MAGMA shape. A refused session (409, 503) is logged with its
reason and the run goes on without specialized coaching. At `run.finished` the
session is closed.
"""

from __future__ import annotations

import anyio
import httpx
from redis.asyncio import Redis

from gencoach.agent_client import AgentClient
from gencoach.config import BackendSettings, Settings
from gencoach.constants import Keys
from gencoach.errors import AgentCallError
from gencoach.logs import get_logger
from gencoach.protocol import AgentInfo, CoachingBackendConfig, CoachingSessionConfig
from gencoach.service.graphstore import META
from gencoach.service.nodes import as_text
from gencoach.service.router import AgentCoaching

log = get_logger("registry")

# MAGMA agents accept only this type: an OpenAI-compatible chat-completions client.
SESSION_BACKEND_TYPE = "ollama"
REGISTERED = "registered"


def session_backend(backend: BackendSettings) -> CoachingBackendConfig:
    """A backend as a MAGMA agent's coaching session takes it (headers in clear)."""
    headers = backend.header_values()
    if not any(name.lower() == "content-type" for name in headers):
        headers["Content-type"] = "application/json"  # MAGMA agents send only these headers
    if backend.api_key is not None and not any(n.lower() == "authorization" for n in headers):
        headers["Authorization"] = f"Bearer {backend.api_key.get_secret_value()}"
    return CoachingBackendConfig(
        type=SESSION_BACKEND_TYPE,
        endpoint=backend.endpoint,
        default_model=backend.default_model or "",
        headers=headers,
        timeout=backend.timeout_s,
        max_retry=backend.max_retries,
    )


def session_config(settings: Settings) -> CoachingSessionConfig | None:
    """The session to open for the configured HTTP backends, or None if there are none."""
    backends = {
        name: session_backend(backend)
        for name, backend in settings.backends.items()
        if backend.type == "openai"
    }
    return CoachingSessionConfig(backends=backends) if backends else None


class AgentRegistry:
    """Registers runs' agents and answers what each one offers."""

    def __init__(self, client: Redis, keys: Keys, http: httpx.AsyncClient) -> None:
        self.client = client
        self.keys = keys
        self.http = http

    async def register(self, run_id: str, agent_url: str, settings: Settings) -> AgentInfo | None:
        """Read the agent's announcement and open its coaching session if it offers one.

        The run is marked registered last, whatever happened, so `wait_registered` tells
        the coaching loop when what the agent offers is known.
        """
        try:
            return await self._register(run_id, agent_url, settings)
        finally:
            await self.client.hset(self.keys.run(run_id, META), REGISTERED, "1")

    async def _register(self, run_id: str, agent_url: str, settings: Settings) -> AgentInfo | None:
        meta = self.keys.run(run_id, META)
        agent = AgentClient(agent_url, self.http)
        try:
            info = await agent.info()
        except AgentCallError as error:
            log.error("agent.refused", run_id=run_id, agent_url=agent_url, reason=error.reason)
            await self.client.hset(meta, "agent_error", error.reason)
            return None
        await self.client.hset(
            meta,
            mapping={
                "agent_id": info.agent_id,
                "agent_version": info.agent_version,
                "agent_info": info.model_dump_json(),
            },
        )
        log.info(
            "agent.registered",
            run_id=run_id,
            agent_id=info.agent_id,
            specialized_coaching=info.specialized_coaching,
            coaching_resume=info.coaching_resume,
        )
        if info.ignored_kinds:
            log.info(
                "agent.coaching_kinds_ignored",
                run_id=run_id,
                kinds=info.ignored_kinds,
                reason="gencoach routes failure, suboptimal and format only",
            )
        if settings.coaching.enabled and info.routed_kinds:
            await self._open_session(run_id, agent, settings)
        return info

    async def _open_session(self, run_id: str, agent: AgentClient, settings: Settings) -> None:
        meta = self.keys.run(run_id, META)
        config = session_config(settings)
        if config is None:
            await self.client.hset(meta, "session", "none")
            log.info("agent.session_skipped", run_id=run_id, reason="no HTTP backend to share")
            return
        try:
            outcome = await agent.open_session(run_id, config)
        except AgentCallError as error:
            await self.client.hset(
                meta, mapping={"session": "failed", "session_reason": error.reason}
            )
            log.error("agent.session_failed", run_id=run_id, reason=error.reason)
            return
        await self.client.hset(
            meta, mapping={"session": outcome.status, "session_reason": outcome.reason}
        )
        if outcome.status == "opened":
            log.info("agent.session_opened", run_id=run_id, backends=sorted(config.backends))
        else:
            log.warning(
                "agent.session_refused", run_id=run_id, status=outcome.status, reason=outcome.reason
            )

    async def unregister(self, run_id: str, agent_url: str) -> None:
        """Close the run's coaching session if one was opened."""
        session = await self.client.hget(self.keys.run(run_id, META), "session")
        if session is None or as_text(session) != "opened":
            return
        try:
            await AgentClient(agent_url, self.http).close_session(run_id)
        except AgentCallError as error:
            log.warning("agent.session_close_failed", run_id=run_id, reason=error.reason)
            return
        await self.client.hset(self.keys.run(run_id, META), "session", "closed")

    async def wait_registered(self, run_id: str, timeout_s: float) -> bool:
        """Wait until the run's agent was asked what it offers; False on timeout."""
        with anyio.move_on_after(timeout_s):
            # Another controller may be the one registering: the flag in Redis is the signal.
            while not await self.client.hexists(self.keys.run(run_id, META), REGISTERED):  # noqa: ASYNC110
                await anyio.sleep(0.02)
            return True
        return False

    async def coaching(self, run_id: str) -> AgentCoaching:
        """What the run's agent offers; nothing when it never answered its info."""
        meta = self.keys.run(run_id, META)
        raw, session, session_reason = await self.client.hmget(
            meta, ["agent_info", "session", "session_reason"]
        )
        if raw is None:
            return AgentCoaching(unavailable="the agent never answered GET /v1/info")
        info = AgentInfo.model_validate_json(raw)
        resume = info.coaching_resume
        if session is not None and as_text(session) in ("conflict", "unavailable", "failed"):
            why = as_text(session)
            if session_reason is not None:
                why += f": {as_text(session_reason)}"
            refused = f"its coaching session was refused ({why})"
            return AgentCoaching(resume=resume, unavailable=refused)
        unavailable = info.coaching_unavailable_reason
        return AgentCoaching(frozenset(info.routed_kinds), resume, unavailable)
