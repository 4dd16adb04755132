"""Consoles for what the CLI prints: full width in a pipe or a file, not rich's 80 columns."""

from __future__ import annotations

import os

from rich.console import Console

# Wide enough for the widest table the CLI prints on one line per row, when not a terminal.
WIDTH_WHEN_NOT_A_TERMINAL = 200


def fit_to_output(console: Console) -> None:
    """Not a terminal: let lines run wide instead of cutting them at rich's 80 columns,
    unless COLUMNS sets the width (rich has taken it then)."""
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console.width = WIDTH_WHEN_NOT_A_TERMINAL


def fitted_console(*, stderr: bool = False) -> Console:
    """A rich console for stdout (or stderr) fitted to where its output goes."""
    console = Console(stderr=stderr)
    fit_to_output(console)
    return console
