"""Python callables named in options as `module:function`, resolved with clear errors."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from gencoach.errors import ExportError


def resolve_callable(reference: str, what: str) -> Callable[..., Any]:
    """The callable `module:function` names (a dotted attribute path after the colon).

    `what` says what the callable is for, so a bad reference reads e.g. "the reasoning
    transform 'pkg.mod:fn' ...: no attribute 'fn'".
    """
    module_name, colon, attribute = reference.partition(":")
    if not colon or not module_name.strip() or not attribute.strip():
        raise ExportError(f"{what} {reference!r} must be written module:function")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise ExportError(f"{what} {reference!r} cannot be imported: {error}") from None
    for name in attribute.split("."):
        try:
            target = getattr(target, name)
        except AttributeError:
            raise ExportError(
                f"{what} {reference!r}: {type(target).__name__} {module_name!r} has no "
                f"attribute {name!r}"
            ) from None
    if not callable(target):
        kind = type(target).__name__
        raise ExportError(f"{what} {reference!r} is a {kind}, not a callable")
    result: Callable[..., Any] = target
    return result
