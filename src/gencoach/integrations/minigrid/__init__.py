"""BabyAI under gencoach: the adapter, the reference agent's policy and the oracle teacher.

Needs the `gym` extra (`pip install 'gencoach[gym]'`: gymnasium and minigrid). Ready
adapters: `go_to_local`, `pickup_dist`, `open_red_door`, `put_next_local`, e.g.
`gencoach sim gym gencoach.integrations.minigrid:put_next_local --agent URL`.
"""

from gencoach.integrations.minigrid.adapter import (
    LEVELS,
    TOOLS,
    BabyAIAdapter,
    go_to_local,
    open_red_door,
    pickup_dist,
    put_next_local,
    view_text,
)
from gencoach.integrations.minigrid.teacher import teacher

__all__ = [
    "LEVELS",
    "TOOLS",
    "BabyAIAdapter",
    "go_to_local",
    "open_red_door",
    "pickup_dist",
    "put_next_local",
    "teacher",
    "view_text",
]
