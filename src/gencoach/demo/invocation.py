"""How this `gencoach` was started, so a command the demo prints can be pasted as is."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path


def own_command(argv0: str | None = None) -> str:
    """`gencoach` when that name on PATH is this program, else the path it was started by.

    `make demo` runs `.venv/bin/gencoach`, which is not on PATH: the summary then says
    `.venv/bin/gencoach export ...`. Under `python -m gencoach` it says `python -m gencoach`.
    """
    launched = Path(sys.argv[0] if argv0 is None else argv0)
    if launched.name != "gencoach":
        return f"{shlex.quote(sys.executable)} -m gencoach"
    on_path = shutil.which("gencoach")
    if on_path is not None and Path(on_path).resolve() == launched.resolve():
        return "gencoach"
    try:
        shown = launched.resolve().relative_to(Path.cwd())
    except ValueError:
        shown = launched.resolve()
    return shlex.quote(str(shown))
