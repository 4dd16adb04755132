"""The coaching budgets in force: the config file's, overlaid by changes made over HTTP.

`PUT /v1/budgets` stores overrides in Redis, so every controller sharing that Redis
applies them at its next admission; SIGHUP re-reads the file underneath them;
`DELETE /v1/budgets` drops the overrides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pydantic import ValidationError
from redis.asyncio import Redis

from gencoach.config import CoachingSettings, Limits
from gencoach.constants import Keys
from gencoach.service.store.nodes import as_text

FIELDS = tuple(Limits.model_fields)


class BudgetError(ValueError):
    """An override that is not a valid budget; `problems` maps each field to why."""

    def __init__(self, problems: dict[str, str]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{key}: {value}" for key, value in problems.items()))


class Budgets:
    """Reads and changes the budgets shared by the controllers.

    `coaching` gives the config file's section in force (a new one after each reload).
    The budgets in force are built once and kept until the section or the overrides
    change: every admission and reinjection reads them.
    """

    def __init__(self, client: Redis, keys: Keys, coaching: Callable[[], CoachingSettings]) -> None:
        self.client = client
        self.keys = keys
        self.coaching = coaching
        self._last: tuple[CoachingSettings, dict[str, int], Limits] | None = None

    def base(self) -> Limits:
        """The config file's budgets."""
        return self.coaching().limits

    async def overrides(self) -> dict[str, int]:
        """The budgets changed over HTTP."""
        raw = await self.client.hgetall(self.keys.budgets)
        return {as_text(key): int(value) for key, value in raw.items() if as_text(key) in FIELDS}

    async def current(self) -> Limits:
        """The budgets the next admission applies."""
        overrides = await self.overrides()
        section, last = self.coaching(), self._last
        if last is not None and last[0] is section and last[1] == overrides:
            return last[2]
        limits = Limits.model_validate({**_limits(section.limits), **overrides})
        self._last = (section, overrides, limits)
        return limits

    async def change(self, changes: Mapping[str, object]) -> Limits:
        """Override some budgets for every controller; refused whole if any is invalid."""
        unknown = sorted(set(changes) - set(FIELDS))
        if unknown:
            raise BudgetError({key: "unknown budget" for key in unknown})
        merged = {**_limits(self.base()), **await self.overrides(), **changes}
        try:
            limits = Limits.model_validate(merged)
        except ValidationError as error:
            raise BudgetError(
                {".".join(str(p) for p in item["loc"]): item["msg"] for item in error.errors()}
            ) from None
        if changes:
            await self.client.hset(
                self.keys.budgets, mapping={k: getattr(limits, k) for k in changes}
            )
        return limits

    async def reset(self) -> Limits:
        """Drop every override: the file's budgets apply again."""
        await self.client.delete(self.keys.budgets)
        return await self.current()


def _limits(limits: Limits) -> dict[str, int]:
    return {name: getattr(limits, name) for name in FIELDS}
