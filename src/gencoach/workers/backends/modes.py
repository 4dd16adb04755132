"""Which structured-output mode a server takes, learnt by `auto` and remembered.

Worker jobs run in short-lived processes, so what one job learns is kept in Redis (a hash
per backend, `<endpoint> <model>` -> mode) for every later job on any worker, and in this
process for the jobs it runs itself. The first time a mode is learnt it is logged once.
"""

from __future__ import annotations

import anyio
import redis.asyncio

from gencoach.runtime.logs import get_logger
from gencoach.workers.backends.schemas import FALLBACKS, StructuredOutput

log = get_logger("backends.modes")

# Modes learnt in this process, per (backend, endpoint, model).
_LEARNT: dict[tuple[str, str, str], StructuredOutput] = {}


def forget_learnt() -> None:
    """Forget what this process learnt (Redis keeps its own), as a new process would."""
    _LEARNT.clear()


class ModeMemory:
    """The modes one backend at one endpoint found working, per model."""

    def __init__(
        self, backend: str, endpoint: str, client: redis.asyncio.Redis | None, key: str
    ) -> None:
        self.backend = backend
        self.endpoint = endpoint
        self.client = client
        self.key = key

    def _field(self, model: str) -> str:
        return f"{self.endpoint} {model}"

    async def to_try(self, model: str) -> tuple[StructuredOutput, ...]:
        """The modes to try, in order: from the one known to work, else all of them."""
        known = _LEARNT.get((self.backend, self.endpoint, model))
        if known is None and self.client is not None:
            try:
                raw = await self.client.hget(self.key, self._field(model))
            except redis.asyncio.RedisError as error:
                log.warning(
                    "backend.structured_output_unknown", backend=self.backend, error=str(error)
                )
                raw = None
            text = raw.decode() if isinstance(raw, bytes) else raw
            known = next((mode for mode in FALLBACKS if mode == text), None)
        return FALLBACKS[FALLBACKS.index(known) :] if known is not None else FALLBACKS

    async def learnt(self, model: str, mode: StructuredOutput) -> None:
        """Keep the mode that worked; log it the first time it is learnt anywhere."""
        local = (self.backend, self.endpoint, model)
        if _LEARNT.get(local) == mode:
            return
        _LEARNT[local] = mode
        first = True
        if self.client is not None:
            try:
                with anyio.CancelScope(shield=True):
                    field = self._field(model)
                    first = await self.client.hget(self.key, field) != mode.encode()
                    await self.client.hset(self.key, field, mode)
            except redis.asyncio.RedisError as error:
                log.warning(
                    "backend.structured_output_unsaved", backend=self.backend, error=str(error)
                )
        if first:
            log.info(
                "backend.structured_output",
                backend=self.backend,
                endpoint=self.endpoint,
                model=model,
                mode=mode,
                hint=f"this server takes structured_output: {mode}",
            )
