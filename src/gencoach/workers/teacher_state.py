"""The privileged teacher states a `type: python` backend receives in its context.

`job_context` adds to a job's JSON the states its generator saved for the job's steps
(`teacher_states`), as `context["teacher_state"]`; docs/backends.md, "Teacher state".
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import redis.asyncio

from gencoach.constants import Keys
from gencoach.protocol.base import JsonObject
from gencoach.runtime.logs import get_logger
from gencoach.runtime.retrying import RetryPolicy

log = get_logger("workers.teacher_state")

READ_RETRY_S = 10.0
_READ_RETRY = RetryPolicy(timeout_s=READ_RETRY_S)


async def teacher_states(
    client: redis.asyncio.Redis, keys: Keys, run_id: str, input_ids: Iterable[int]
) -> dict[str, Any]:
    """The saved states of these inputs of the run (an unreadable one is left out).

    The read rides out a Redis that dropped the connection or is still loading its data
    set for up to `READ_RETRY_S`; past that the job fails and its request is retried.
    """
    fields = sorted({str(input_id) for input_id in input_ids})
    if not fields:
        return {}
    async for attempt in _READ_RETRY.retrying():
        with attempt:
            raw = await client.hmget(keys.teacher_state(run_id), fields)
    states: dict[str, Any] = {}
    for field, value in zip(fields, raw, strict=True):
        if value is None:
            continue
        try:
            states[field] = json.loads(value)
        except ValueError:
            log.warning("teacher_state.unreadable", run_id=run_id, input_id=field)
    return states


async def job_context(
    client: redis.asyncio.Redis, keys: Keys, job: Any, input_ids: Iterable[int]
) -> JsonObject:
    """The job's JSON with the teacher states of its steps under `teacher_state`."""
    context: JsonObject = job.model_dump(mode="json")
    context["teacher_state"] = await teacher_states(client, keys, job.run_id, input_ids)
    return context
