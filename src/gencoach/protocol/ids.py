"""The one character set of generator-chosen ids: run, situation and candidate ids.

`id_problem` and `check_id` hold an id to `ID_RULE` (`Identifier` in the contracts);
`url_problem` checks a URL. The rule and its reasons: docs/events.md ("Ids").
"""

from __future__ import annotations

import unicodedata
from typing import Annotated, Final

from pydantic import AfterValidator

MAX_ID_LENGTH: Final = 256
ID_RULE: Final = (
    f"1 to {MAX_ID_LENGTH} printable characters, without control or format characters, "
    "line separators, '{' or '}'"
)
# Unicode's control, format, surrogate, private-use and unassigned characters, and the line
# and paragraph separators. URL characters (`/`, `#`, `?`, `%`) are allowed: ids are
# percent-encoded wherever they become a path segment, and save folders get a name of
# their own (`run_folder_name`).
_FORBIDDEN_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_HASH_TAG: Final = frozenset("{}")  # a run id is the Redis Cluster hash tag of its keys


def id_problem(value: str) -> str | None:
    """Why `value` is not a valid id, or None when it is."""
    if not value:
        return f"an id must not be empty ({ID_RULE})"
    if len(value) > MAX_ID_LENGTH:
        return f"an id has at most {MAX_ID_LENGTH} characters, got {len(value)}"
    if value.isascii() and value.isprintable() and "{" not in value and "}" not in value:
        return None  # the common case, checked in C: printable ASCII is every allowed kind
    for position, char in enumerate(value):
        if char in _HASH_TAG or unicodedata.category(char) in _FORBIDDEN_CATEGORIES:
            return (
                f"character {char!r} (U+{ord(char):04X}) at position {position} "
                f"is not allowed in an id ({ID_RULE})"
            )
    return None


def check_id(value: str) -> str:
    """`value` if it is a valid id; otherwise ValueError saying why."""
    problem = id_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


Identifier = Annotated[str, AfterValidator(check_id)]
"""A generator-chosen id (run, situation, candidate), validated against `ID_RULE`."""


def url_problem(url: str) -> str | None:
    """Why a URL has characters no HTTP client will send, or None."""
    for position, char in enumerate(url):
        if char.isspace() or unicodedata.category(char) in _FORBIDDEN_CATEGORIES:
            return f"character {char!r} (U+{ord(char):04X}) at position {position} is not allowed"
    return None
