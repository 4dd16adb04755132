"""Controller leases: who of the controllers sharing a Redis is alive.

`Lease` keeps this controller's key alive while it runs, says whether another's is
(`alive`), and holds work no other live controller may do at the same time (`hold`,
`let_go`). How controllers share the work: docs/operations.md, "Several controllers".
"""

from __future__ import annotations

import contextlib
import secrets
from typing import Final, cast

import anyio
import redis.exceptions
from anyio.abc import TaskStatus
from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.runtime.logs import get_logger
from gencoach.service.isolation import REDIS_UNAVAILABLE

log = get_logger("leases")

# Renewals per lease: one lost renewal (a slow Redis, a busy event loop) is not a death.
RENEWALS_PER_LEASE = 4
# Delete a key only while it holds the value given (a holder letting go of its own).
_LET_GO: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class Lease:
    """This controller's lease, renewed until `stop()`; and the others', looked up.

    The lease is a key named after the controller's stream consumer (`Keys.lease`),
    written with an expiry of `lease_s` and renewed every quarter of it; a graceful stop
    deletes it. A consumer whose lease has expired is dead: the survivors take over the
    stream entries it held (`gencoach.service.store.consumer`) without waiting for them
    to idle out. The key holds a token of the process, so two controllers that were given
    the same consumer name find each other out, and say so.
    """

    def __init__(self, client: Redis, keys: Keys, consumer: str, lease_s: float) -> None:
        self.client = client
        self.keys = keys
        self.consumer = consumer
        self.lease_s = lease_s
        self._token = secrets.token_hex(8)
        self._held = False  # written once: a foreign token from then on is a live twin
        self._shared_logged = False
        self._stopping = anyio.Event()
        self._let_go = client.register_script(_LET_GO)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Take the lease, renew it until stopped, then give it up."""
        await self._renew_or_warn()
        task_status.started()
        try:
            while not self._stopping.is_set():
                with anyio.move_on_after(self.lease_s / RENEWALS_PER_LEASE):
                    await self._stopping.wait()
                await self._renew_or_warn()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await self._give_up()

    def stop(self) -> None:
        """Give the lease up: survivors take over what this controller leaves pending."""
        self._stopping.set()

    async def renew(self) -> None:
        """Write the lease with a fresh expiry, noticing another process under this name."""
        key = self.keys.lease(self.consumer)
        ms = int(self.lease_s * 1000)
        previous = cast(bytes | None, await self.client.set(key, self._token, px=ms, get=True))
        held, self._held = self._held, True
        # A foreign token at the first write is a dead predecessor's (a restart).
        twin = held and previous is not None and previous.decode() != self._token
        if twin and not self._shared_logged:
            self._shared_logged = True
            log.error(
                "controller.consumer_shared",
                consumer=self.consumer,
                reason="another controller runs under this consumer name; give each "
                "controller its own controller.consumer, or none (the default: host "
                "name and process id), else neither's entries are taken over when "
                "one dies",
            )

    async def hold(self, key: str, ttl_s: float) -> bool:
        """Take `key` for this controller unless another live controller holds it.

        The key names its holder's consumer (a request's reinjection, say): the holder
        lets it go when done, and a survivor takes over the key of a holder whose lease
        lapsed.
        """
        me = self.consumer.encode()
        ms = int(ttl_s * 1000)
        if await self.client.set(key, me, nx=True, px=ms):
            return True
        async with self.client.pipeline(transaction=True) as pipe:
            try:
                await pipe.watch(key)
                holder = cast(bytes | None, await pipe.get(key))
                if holder not in (None, me) and await self.alive(holder.decode()):
                    return False
                pipe.multi()  # type: ignore[no-untyped-call]
                pipe.set(key, me, px=ms)
                await pipe.execute()
                return True
            except redis.exceptions.WatchError:
                return False  # another controller took it meanwhile

    async def let_go(self, key: str) -> None:
        """Give up `key` if this controller holds it (in one step: a key that lapsed and
        was taken by another controller meanwhile stays theirs)."""
        await self._let_go(keys=[key], args=[self.consumer])

    async def _renew_or_warn(self) -> None:
        try:
            await self.renew()
        except REDIS_UNAVAILABLE as error:  # tried again at the next renewal
            log.warning("lease.renew_failed", error=str(error))

    async def alive(self, consumer: str) -> bool:
        """Whether that consumer's controller holds its lease."""
        return bool(await self.client.exists(self.keys.lease(consumer)))

    async def _give_up(self) -> None:
        with contextlib.suppress(*REDIS_UNAVAILABLE):  # else it expires on its own
            await self._let_go(keys=[self.keys.lease(self.consumer)], args=[self._token])
