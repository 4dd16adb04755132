"""Token usage per backend, summed in Redis across every worker process."""

from __future__ import annotations

from dataclasses import dataclass

import redis.asyncio

from gencoach.workers.backends.chat import Usage

FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens", "requests")


@dataclass(frozen=True)
class UsageTotals(Usage):
    """A backend's usage so far, and how many completions it answered."""

    requests: int = 0


class UsageLedger:
    """Adds each completion's usage to a backend's hash (`Keys.backend_usage`)."""

    def __init__(self, client: redis.asyncio.Redis, key: str) -> None:
        self.key = key
        self._client = client

    async def add(self, usage: Usage) -> None:
        """Count one completion and its tokens (one round trip; each field's increment is
        atomic, so no transaction is needed around them)."""
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.hincrby(self.key, "prompt_tokens", usage.prompt_tokens)
            pipe.hincrby(self.key, "completion_tokens", usage.completion_tokens)
            pipe.hincrby(self.key, "total_tokens", usage.total_tokens)
            pipe.hincrby(self.key, "requests", 1)
            await pipe.execute()

    async def totals(self) -> UsageTotals:
        """The sums recorded so far (zeros for a backend never used)."""
        raw = await self._client.hgetall(self.key)
        values = {
            (key.decode() if isinstance(key, bytes) else str(key)): int(value)
            for key, value in raw.items()
        }
        return UsageTotals(**{name: values.get(name, 0) for name in FIELDS})
