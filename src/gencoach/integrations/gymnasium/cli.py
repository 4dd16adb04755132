"""`gencoach sim gym MODULE:ADAPTER`: play an adapter's env under gencoach, many runs at once.

The command imports gymnasium and the adapter only when it runs.
"""

from __future__ import annotations

import importlib
from typing import Any

from gencoach.integrations.gymnasium.adapter import GymAdapter


def load_adapter(path: str) -> GymAdapter:
    """The adapter `MODULE:NAME` names: an instance, or a class built without arguments.

    Raises ValueError with what is wrong (a missing module or name, not an adapter).
    """
    module_name, _, name = path.partition(":")
    if not module_name or not name:
        raise ValueError(f"{path!r} is not MODULE:ADAPTER (e.g. mypackage.envs:MyAdapter)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"cannot import {module_name}: {error}") from error
    found: Any = getattr(module, name, None)
    if found is None:
        raise ValueError(f"module {module_name} has no {name!r}")
    if isinstance(found, type) and issubclass(found, GymAdapter):
        found = found()
    if not isinstance(found, GymAdapter):
        raise ValueError(f"{path} is a {type(found).__name__}, not a GymAdapter")
    if not found.tools:
        raise ValueError(f"{path} offers no tools")
    return found
