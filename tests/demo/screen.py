"""What a terminal shows after it is sent some output: enough of one for rich's Live.

Live redraws in place with carriage returns, "cursor up" and "erase line"; colours and
showing or hiding the cursor change nothing here. Any other control fails the test, so
that a change in what rich sends is noticed rather than misread.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\x1b\[(\??[0-9;]*)([A-Za-z])|\r|\n|[^\x1b\r\n]+")


def screen(output: str) -> list[str]:
    """The lines left on the screen (scrollback included), without trailing blanks."""
    lines = [""]
    row = column = 0
    for token in _TOKEN.finditer(output):
        text = token.group(0)
        if text == "\r":
            column = 0
        elif text == "\n":
            row, column = row + 1, 0
            lines.extend("" for _ in range(row + 1 - len(lines)))
        elif text.startswith("\x1b"):
            row = _control(lines, row, token.group(1), token.group(2))
        else:
            line = lines[row].ljust(column)
            lines[row] = line[:column] + text + line[column + len(text) :]
            column += len(text)
    while lines and not lines[-1].strip():
        lines.pop()
    return [line.rstrip() for line in lines]


def _control(lines: list[str], row: int, argument: str, command: str) -> int:
    if command == "m" or (argument.startswith("?") and command in "hl"):
        return row  # colours, cursor shown or hidden
    if command == "A":
        return max(0, row - int(argument or "1"))
    if command == "K" and argument == "2":
        lines[row] = ""
        return row
    raise AssertionError(f"a control this screen does not know: ESC[{argument}{command}")
