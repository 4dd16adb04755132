"""A backend that calls a Python function of this process, named by an import path.

`PythonBackend` imports the function `endpoint` names ("package.module:function") when it
opens, and calls it with the messages, the answer's schema, the model and, when it takes
one, the asking job's `context`. The function's signature: docs/backends.md, `type: python`.
"""

from __future__ import annotations

import importlib
import inspect
import traceback
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
from pydantic import BaseModel

from gencoach.errors import BackendError, BackendRequestError, BackendUnavailable
from gencoach.protocol.base import JsonObject
from gencoach.protocol.llm import answer_schema
from gencoach.runtime.logs import get_logger
from gencoach.workers.backends.backend import Backend, Reply
from gencoach.workers.backends.chat import ChatMessage

PythonFunction = Callable[..., str | Awaitable[str]]

log = get_logger("backends.python")


def load_function(endpoint: str) -> PythonFunction:
    """Import the callable `endpoint` names ("package.module:function"), or raise ImportError."""
    module_name, _, attribute = endpoint.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ImportError(f"module {module_name!r} has no attribute {attribute!r}") from None
    if not callable(target):
        raise ImportError(f"{endpoint} is a {type(target).__name__}, not a function")
    function: PythonFunction = target
    return function


def _accepts_context(function: PythonFunction) -> bool:
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    return "context" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def error_summary(error: BaseException) -> str:
    """The exception and the innermost frame it came from, on one line."""
    summary = "".join(traceback.format_exception_only(error)).strip().replace("\n", " ")
    frames = traceback.extract_tb(error.__traceback__)
    if frames:
        frame = frames[-1]
        summary += f" (at {frame.filename}:{frame.lineno} in {frame.name})"
    return summary


class PythonBackend(Backend):
    """Calls the function `settings.endpoint` names (its signature: docs/backends.md).

    The import happens when the backend opens; a call that outlasts `settings.timeout_s`
    raises BackendUnavailable (a thread cannot be stopped: it is abandoned). A coroutine
    function runs on the job's event loop, a plain one in a worker thread, so it may
    block. Token usage is unknown: the reply counts zeros.
    """

    _function: PythonFunction | None = None

    async def _open(self) -> None:
        try:
            self._function = load_function(self.settings.endpoint)
        except ImportError as error:
            raise BackendRequestError(
                self.name,
                f"cannot import {self.settings.endpoint}: {error}",
                endpoint=self.settings.endpoint,
            ) from error

    async def _complete(
        self,
        messages: list[ChatMessage],
        *,
        schema: type[BaseModel] | None,
        model: str | None,
        max_tokens: int | None,
        context: JsonObject | None = None,
    ) -> Reply:
        function = self._function
        assert function is not None
        chosen = model or self.settings.default_model
        extra = {"context": context} if _accepts_context(function) else {}
        call = partial(
            function,
            [message.as_json() for message in messages],
            schema=answer_schema(schema) if schema is not None else None,
            model=chosen,
            **extra,
        )
        timeout_s = self.settings.timeout_s
        result: object = None
        async with self._slot():
            with anyio.move_on_after(timeout_s) as scope:
                try:
                    result = await self._call(function, call)
                except Exception as error:
                    summary = error_summary(error)
                    log.error("backend.function_failed", backend=self.name, error=summary)
                    raise BackendError(
                        self.name, f"{self.settings.endpoint} raised {summary}"
                    ) from error
        if scope.cancelled_caught:
            log.error("backend.gave_up", backend=self.name, attempt=1, cause="timeout")
            raise BackendUnavailable(
                self.name, f"{self.settings.endpoint} gave no answer within {timeout_s} s"
            )
        if not isinstance(result, str):
            raise BackendError(
                self.name,
                f"{self.settings.endpoint} returned {type(result).__name__}, not the answer's text",
            )
        return Reply(text=result, model=chosen or "python")

    @staticmethod
    async def _call(function: PythonFunction, call: Callable[[], object]) -> object:
        if inspect.iscoroutinefunction(function):
            result = call()
        else:
            result = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        if inspect.isawaitable(result):
            result = await result
        return result
