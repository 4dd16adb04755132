"""The query parameters of a runs listing, checked, with the messages a person reads."""

from __future__ import annotations

from typing import Final

from gencoach.service.store.runindex import DEFAULT_PAGE, MAX_PAGE, RUN_STATES, RunQuery

STATE_HELP: Final = "Only runs in this state: active, finished or saved."
AGENT_HELP: Final = "Only runs of this agent (the id it announced, else its URL)."
CURSOR_HELP: Final = "Where the page starts: the `next_cursor` of the previous page."
LIMIT_HELP: Final = f"How many runs per page, 1 to {MAX_PAGE} ({DEFAULT_PAGE} by default)."


def run_query(
    state: str | None,
    scenario: str | None,
    agent: str | None,
    cursor: str | None,
    limit: str | None,
) -> RunQuery:
    """The query these parameters ask for; ValueError naming the parameter otherwise.

    An empty filter means any; the cursor is checked when the page is read.
    """
    if state and state not in RUN_STATES:
        raise ValueError(f"state must be one of {', '.join(RUN_STATES)}; got {state!r}")
    size = DEFAULT_PAGE
    if limit is not None:
        if not limit.isascii() or not limit.isdigit() or not 1 <= int(limit) <= MAX_PAGE:
            raise ValueError(f"limit must be an integer from 1 to {MAX_PAGE}; got {limit!r}")
        size = int(limit)
    return RunQuery(state or None, scenario or None, agent or None, cursor or None, size)
