"""Packages whose public names are imported on first use.

A package's `__init__` lists each name's module and sets `__getattr__ = lazy_names(...)`
(PEP 562), so that importing one of its submodules (a command's options, an error class)
does not import everything the package exports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` that imports `modules[name]` when `name` is first used."""

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook's own name
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
