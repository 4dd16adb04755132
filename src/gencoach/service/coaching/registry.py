"""The agents of running runs: what each announced, and its coaching session.

`AgentRegistry` reads an agent's `GET /v1/info` at `run.started`, opens its coaching
session and closes it at `run.finished`; `session_config` builds the session MAGMA
agents take. See docs/coaching.md ("One lane per run") and docs/magma.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Final

import anyio
import httpx
from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from gencoach.agent_client import AgentClient, agent_unreachable
from gencoach.config import BackendSettings, Settings
from gencoach.constants import Keys
from gencoach.errors import AgentCallError
from gencoach.protocol import (
    DECISION_SOURCE_CAPABILITY,
    AgentInfo,
    CoachingBackendConfig,
    CoachingSessionConfig,
)
from gencoach.runtime.logs import get_logger
from gencoach.runtime.retrying import RetryPolicy
from gencoach.service.coaching.router import AgentCoaching
from gencoach.service.store.graphstore import META
from gencoach.service.store.nodes import as_text
from gencoach.service.store.runindex import RunIndex
from gencoach.service.store.watches import RunWatches

log = get_logger("registry")

# MAGMA agents accept only this type: an OpenAI-compatible chat-completions client.
SESSION_BACKEND_TYPE = "ollama"
REGISTERED = "registered"
_COACHING_FIELDS: Final = ["agent_info", "session", "session_reason", "agent_error"]
# The most registered runs whose agent's offer a controller keeps in memory (the oldest
# go first; a run not kept is read again).
OFFERS_KEPT: Final = 16_384
# An agent that cannot be reached is asked again for its info until
# `controller.registration_give_up_s` (the bound, set per call).
REGISTRATION_RETRY: Final = RetryPolicy(timeout_s=None, wait_initial_s=1.0, wait_max_s=30.0)


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


class _Lookup:
    """One read of an agent's announcement in progress, shared by the runs naming it."""

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.info: AgentInfo | None = None
        self.error: AgentCallError | None = None


class AgentRegistry:
    """Registers runs' agents and answers what each one offers.

    When coaching is on and the agent offers specialized coaching, registration opens a
    session with the configured HTTP backends in the MAGMA shape. A refused session (409,
    503) is logged with its reason and the run goes on without specialized coaching; the
    session is closed at `run.finished`.
    """

    def __init__(self, client: Redis, keys: Keys, http: httpx.AsyncClient) -> None:
        self.client = client
        self.keys = keys
        self.http = http
        self.index = RunIndex(client, keys)
        self.watches = RunWatches(client, keys)
        self._ended: dict[str, anyio.Event] = {}  # registrations ended in this process
        self._lookups: dict[str, _Lookup] = {}  # announcement reads in progress, by agent
        # What each registered run's agent offers, as its registration stored it once and
        # for all: kept from the registration done here, or from the first read, until the
        # run finishes, so a run's terminals cost no read of it.
        self._offers: dict[str, AgentCoaching] = {}

    async def register(self, run_id: str, agent_url: str, settings: Settings) -> AgentInfo | None:
        """Read the agent's announcement and open its coaching session if it offers one.

        An agent that cannot be reached is asked again until `registration_give_up_s`
        (`_announcement`); one that answers wrongly is refused at once. What the
        registration found (the agent's info or error, its session) is stored with the
        run's `registered` mark, last and in one write whatever happened, so
        `wait_registered` tells the coaching loop when what the agent offers is known, and
        its run leaves the registrations reconciliation watches.
        """
        found: dict[str, str] = {}
        try:
            return await self._register(run_id, agent_url, settings, found)
        finally:
            with anyio.CancelScope(shield=True):
                pipe = self.client.pipeline(transaction=False)
                fields: dict[FieldT, EncodableT] = {REGISTERED: "1"}
                fields.update(found)
                pipe.hset(self.keys.run(run_id, META), mapping=fields)
                if "agent_id" in found:
                    await self.index.announced(run_id, found["agent_id"], pipe)
                self.watches.registered(pipe, run_id)
                await pipe.execute()
                self._keep(run_id, _offer([found.get(name) for name in _COACHING_FIELDS]))
                self._event(run_id).set()
                self._ended.pop(run_id, None)

    async def _register(
        self, run_id: str, agent_url: str, settings: Settings, found: dict[str, str]
    ) -> AgentInfo | None:
        """Ask the agent, noting in `found` the run's fields that what it said sets."""
        agent = AgentClient(agent_url, self.http)
        try:
            info = await self._shared_announcement(run_id, agent, settings)
        except AgentCallError as error:
            log.error("agent.refused", run_id=run_id, agent_url=agent_url, reason=error.reason)
            found["agent_error"] = error.reason
            return None
        found.update(
            agent_id=info.agent_id,
            agent_version=info.agent_version,
            agent_info=info.model_dump_json(),
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
            found.update(await self._open_session(run_id, agent, settings))
        return info

    async def _shared_announcement(
        self, run_id: str, agent: AgentClient, settings: Settings
    ) -> AgentInfo:
        """The agent's info, read once for every run that asks while a read is under way.

        A campaign of thousands of runs behind an agent that is down asks it once per
        backoff step, not once per run.
        """
        lookup = self._lookups.get(agent.base_url)
        if lookup is None:
            lookup = self._lookups[agent.base_url] = _Lookup()
            try:
                lookup.info = await self._announcement(run_id, agent, settings)
            except AgentCallError as error:
                lookup.error = error
            finally:
                del self._lookups[agent.base_url]
                lookup.done.set()
        else:
            await lookup.done.wait()
        if lookup.error is not None:
            raise lookup.error
        if lookup.info is None:
            raise AgentCallError(agent.base_url, "the read of its announcement was interrupted")
        return lookup.info

    async def _announcement(self, run_id: str, agent: AgentClient, settings: Settings) -> AgentInfo:
        """The agent's info, asked again (`REGISTRATION_RETRY`) while it cannot be reached,
        for up to `registration_give_up_s`.

        Unreachable means a connection error, a timeout, a 5xx or a 429; any other wrong
        answer is raised at once. Giving up is logged once, as
        `agent.registration_abandoned`; the run is then marked registered, the reason kept
        as its `agent_error` (docs/operations.md, "Retries").
        """
        give_up_s = settings.controller.registration_give_up_s
        policy = replace(REGISTRATION_RETRY, timeout_s=give_up_s)
        attempts, reason = 0, "no answer in time"
        with anyio.move_on_after(give_up_s):  # the bound holds for a try that hangs too
            try:
                async for attempt in policy.retrying(
                    on=agent_unreachable, log_as="agent.registration_retry", run_id=run_id
                ):
                    with attempt:
                        attempts, reason = attempt.num, "no answer in time"
                        try:
                            return await agent.info()
                        except AgentCallError as error:
                            reason = error.reason
                            raise
            except AgentCallError as error:
                if not error.retryable:
                    raise
        tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
        why = f"gave up after {tries} over {give_up_s:g} s; last: {reason}"
        log.error(
            "agent.registration_abandoned", run_id=run_id, agent_url=agent.base_url, reason=why
        )
        raise AgentCallError(agent.base_url, why)

    async def _open_session(
        self, run_id: str, agent: AgentClient, settings: Settings
    ) -> dict[str, str]:
        """Open the run's coaching session; the run's fields that say how it went."""
        config = session_config(settings)
        if config is None:
            log.info("agent.session_skipped", run_id=run_id, reason="no HTTP backend to share")
            return {"session": "none"}
        try:
            outcome = await agent.open_session(run_id, config)
        except AgentCallError as error:
            log.error("agent.session_failed", run_id=run_id, reason=error.reason)
            return {"session": "failed", "session_reason": error.reason}
        if outcome.status == "opened":
            log.info("agent.session_opened", run_id=run_id, backends=sorted(config.backends))
        else:
            log.warning(
                "agent.session_refused", run_id=run_id, status=outcome.status, reason=outcome.reason
            )
        return {"session": outcome.status, "session_reason": outcome.reason}

    async def unregister(self, run_id: str, agent_url: str) -> None:
        """Close the run's coaching session if one was opened."""
        self._offers.pop(run_id, None)
        session = await self.client.hget(self.keys.run(run_id, META), "session")
        if session is None or as_text(session) != "opened":
            return
        try:
            await AgentClient(agent_url, self.http).close_session(run_id)
        except AgentCallError as error:
            log.warning("agent.session_close_failed", run_id=run_id, reason=error.reason)
            return
        await self.client.hset(self.keys.run(run_id, META), "session", "closed")

    def _event(self, run_id: str) -> anyio.Event:
        return self._ended.setdefault(run_id, anyio.Event())

    async def registered(self, run_id: str) -> bool:
        """Whether the run's agent was asked what it offers (by any controller)."""
        return bool(await self.client.hexists(self.keys.run(run_id, META), REGISTERED))

    async def _registered_reading(self, run_id: str) -> bool:
        """`registered`, keeping with it what `coaching` needs next (one round trip, once)."""
        if run_id in self._offers:
            return True
        flag, *fields = await self.client.hmget(
            self.keys.run(run_id, META), [REGISTERED, *_COACHING_FIELDS]
        )
        if flag is None:
            return False
        self._keep(run_id, _offer(fields))
        return True

    def _keep(self, run_id: str, offer: AgentCoaching) -> None:
        if len(self._offers) >= OFFERS_KEPT:
            del self._offers[next(iter(self._offers))]
        self._offers[run_id] = offer

    async def wait_registered(self, run_id: str, timeout_s: float) -> bool:
        """Wait until the run's agent was asked what it offers; False on timeout.

        A registration in this process wakes the waiter at once; one done by another
        controller is seen when the flag is read again (0.5 s, doubling, at most 5 s apart).
        """
        recheck_s = 0.5
        try:
            with anyio.move_on_after(timeout_s):
                while not await self._registered_reading(run_id):
                    with anyio.move_on_after(recheck_s):
                        await self._event(run_id).wait()
                    recheck_s = min(recheck_s * 2, 5.0)
                return True
            return False
        finally:
            self._ended.pop(run_id, None)  # a later waiter makes its own

    async def coaching(self, run_id: str) -> AgentCoaching:
        """What the run's agent offers; nothing when it never answered its info (or its
        registration has not ended)."""
        offer = self._offers.get(run_id)
        if offer is not None:
            return offer
        if await self._registered_reading(run_id):
            return self._offers[run_id]
        return _offer([None] * len(_COACHING_FIELDS))


def _offer(fields: Sequence[bytes | str | None]) -> AgentCoaching:
    """What an agent offers, from its run's registration fields (`_COACHING_FIELDS`)."""
    raw, session, session_reason, error = fields
    if raw is None:
        why = f" ({as_text(error)})" if error is not None else ""
        return AgentCoaching(unavailable=f"the agent never answered GET /v1/info{why}")
    info = AgentInfo.model_validate_json(raw)
    resume = info.coaching_resume
    reads_source = info.capabilities.get(DECISION_SOURCE_CAPABILITY, False)
    if session is not None and as_text(session) in ("conflict", "unavailable", "failed"):
        why = as_text(session)
        if session_reason is not None:
            why += f": {as_text(session_reason)}"
        refused = f"its coaching session was refused ({why})"
        return AgentCoaching(resume=resume, unavailable=refused, reads_source=reads_source)
    unavailable = info.coaching_unavailable_reason
    return AgentCoaching(frozenset(info.routed_kinds), resume, unavailable, reads_source)
