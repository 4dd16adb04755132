"""Whether a run is settled: no branch order can come for it until its generator reports more.

`Settling` is the controller's side of `lua/settle.lua`: terminals routed, requests past
ordering, and what the API shows (`settled`, `settled_seq`). The protocol, as generators
see it: docs/branch-orders.md.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Final, Literal, cast

from redis.asyncio import Redis

from gencoach.constants import Keys

SCRIPT: Final = resources.files("gencoach").joinpath("lua/settle.lua").read_text()

Outcome = Literal["settled", "none", "routing", "coaching"]
"""What a check found: answered, no probe to answer, a terminal not routed yet, or a
request that may still publish an order."""


def settle_keys(keys: Keys, run_id: str) -> list[str]:
    """The script's KEYS for one run."""
    return [keys.settle(run_id), keys.routed(run_id), keys.requests(run_id), keys.branches(run_id)]


def ask_args(run_id: str, last_seq: int, terminals: list[str]) -> list[str]:
    """The script's ARGV for a generator's probe."""
    return ["ask", run_id, str(last_seq), json.dumps(sorted(terminals))]


def _outcome(reply: bytes | str) -> Outcome:
    text = reply.decode() if isinstance(reply, bytes) else reply
    return cast(Outcome, text)


class Settling:
    """The controller's side: terminals routed, requests past ordering, and what the API shows.

    The script writes the `run.settled` answer on the run's branch stream once each
    terminal the probe names is routed and no request of the run is in
    `lifecycle.MAY_ORDER`; being one script, the answer always follows the orders it covers.
    """

    def __init__(self, client: Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._script = client.register_script(SCRIPT)

    async def routed(self, run_id: str, terminal: str) -> Outcome:
        """Record a terminal as routed, and answer the run's probe if that settles it."""
        keys = settle_keys(self.keys, run_id)
        return _outcome(await self._script(keys=keys, args=["routed", run_id, terminal]))

    async def check(self, run_id: str) -> Outcome:
        """Answer the run's probe if the run is settled (after a request stopped ordering)."""
        keys = settle_keys(self.keys, run_id)
        return _outcome(await self._script(keys=keys, args=["check", run_id]))

    async def answered(self, run_id: str) -> int | None:
        """The seq through which the run's latest probe was answered settled, or None (no
        probe, or one not answered yet)."""
        answered, asked = await self.client.hmget(self.keys.settle(run_id), "answered", "asked")
        return int(answered) if answered is not None and answered == asked else None
