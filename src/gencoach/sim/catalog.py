"""The reference scenarios' names and one-line descriptions, readable without the world
(command-line options and help); `gencoach.sim.scenarios` builds each one."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

SCENARIO_DESCRIPTIONS: Mapping[str, str] = MappingProxyType(
    {
        "buttons": "Press buttons in a given order on a tabletop.",
        "sorting": "Sort coloured objects into the bins of their colours.",
        "two_stage": "Take an object, then put it where a second order says.",
        "text_question": "Answer a question about the table in words.",
    }
)
